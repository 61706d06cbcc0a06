// Package nn ports the reference's shared streaming layers
// (moshi/modules/transformer.py, rope.py, gating.py): the streaming
// transformer used by Mimi's encoder/decoder transformers, the LM's temporal
// transformer and its depformer. The model packages describe what is
// computed; the kernels live in infer/ops.
package nn

import (
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// TransformerConfig mirrors the StreamingTransformer constructor arguments.
type TransformerConfig struct {
	DModel         int
	NumHeads       int
	NumLayers      int
	DimFeedforward int     // constructor's dim_feedforward (the gated hidden size is derived)
	Context        int     // attention span in steps; 0 = unlimited (capacity = WeightsPerStep)
	Norm           string  // layer_norm, layer_norm_f32, rms_norm, rms_norm_f32
	LayerScale     bool    // layer_scale_{1,2}.scale present
	Gating         string  // "none" (linear1/linear2 + GELU) or an activation name (silu, gelu, relu)
	PosEmb         string  // "rope" or "none"
	MaxPeriod      float64 // RoPE max period
	WeightsPerStep int     // > 0: step t uses weight slice t (depformer)
}

// GatingHidden is ActivationGating's hidden size for dim_feedforward.
func GatingHidden(dim, dimFeedforward int) int {
	if dimFeedforward == 4*dim {
		return (21 * dim) / 8
	}
	return (2 * dimFeedforward) / 3
}

// Norm is create_norm_fn(norm, dim): RMSNorm (alpha in W) or LayerNorm
// (weight W, bias B).
type Norm struct {
	RMS  bool
	Eps  float32
	W, B []float32
}

// Apply writes the normalised x into dst (float32).
func (n *Norm) Apply(dst, x []float32) {
	if n.RMS {
		ops.RMSNorm(dst, x, n.W, n.Eps)
	} else {
		ops.LayerNorm(dst, x, n.W, n.B, n.Eps)
	}
}

// NormKind maps a norm name of the config to its kind and epsilon, as
// create_norm_fn does.
func NormKind(name string) (rms bool, eps float32, err error) {
	switch name {
	case "layer_norm":
		return false, 1e-5, nil
	case "layer_norm_f32":
		return false, 1e-8, nil
	case "rms_norm":
		return true, 1e-5, nil
	case "rms_norm_f32":
		return true, 1e-8, nil
	}
	return false, 0, fmt.Errorf("norm %q is not supported", name)
}

// LoadNorm binds the norm called prefix (prefix.alpha [1,1,dim] for RMSNorm,
// prefix.weight/.bias [dim] for LayerNorm).
func LoadNorm(f *weights.File, kind, prefix string, dim int) (Norm, error) {
	var n Norm
	var err error
	if n.RMS, n.Eps, err = NormKind(kind); err != nil {
		return n, fmt.Errorf("%s: %v", prefix, err)
	}
	vec := func(name string, shape ...int) ([]float32, error) {
		t, err := f.Get(name, shape...)
		if err != nil {
			return nil, err
		}
		return t.Float32s(), nil
	}
	if n.RMS {
		n.W, err = vec(prefix+".alpha", 1, 1, dim)
		return n, err
	}
	if n.W, err = vec(prefix+".weight", dim); err != nil {
		return n, err
	}
	n.B, err = vec(prefix+".bias", dim)
	return n, err
}

// Activation is _get_activation for the gatings the reference uses.
func Activation(name string) (func(float32) float32, error) {
	switch name {
	case "silu":
		return ops.SiLU, nil
	case "gelu":
		return func(v float32) float32 { return float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))) }, nil
	case "relu":
		return func(v float32) float32 { return max(v, 0) }, nil
	}
	return nil, fmt.Errorf("gating %q is not supported", name)
}

type gating struct {
	in, out ops.Mat
}

// Layer is one StreamingTransformerLayer's weights.
type Layer struct {
	InProj, OutProj ops.Mat
	norm1, norm2    Norm
	scale1, scale2  []float32
	linear1         ops.Mat
	linear2         ops.Mat
	gates           []gating // 1, or WeightsPerStep
}

// Transformer is a StreamingTransformer's weights and shape.
type Transformer struct {
	Cfg    TransformerConfig
	Layers []*Layer
	hidden int // FFN hidden size
	dHead  int
	rope   *ops.RoPE
	act    func(float32) float32
	// normRMS and eps are the layers' norm kind (see BindLayer).
	normRMS bool
	eps     float32
}

// LoadTransformer binds the tensors under prefix ("transformer",
// "encoder_transformer.transformer", …) and checks every shape.
func LoadTransformer(f *weights.File, prefix string, cfg TransformerConfig) (*Transformer, error) {
	D := cfg.DModel
	if cfg.NumHeads <= 0 || D%cfg.NumHeads != 0 || (D/cfg.NumHeads)%2 != 0 {
		return nil, fmt.Errorf("%s: d_model %d is not divisible into %d heads of even size", prefix, D, cfg.NumHeads)
	}
	if cfg.Context <= 0 && cfg.WeightsPerStep <= 0 {
		return nil, fmt.Errorf("%s: a streaming transformer needs a context or weights per step", prefix)
	}
	t := &Transformer{Cfg: cfg, dHead: D / cfg.NumHeads}
	switch cfg.PosEmb {
	case "rope":
		t.rope = ops.NewRoPE(t.dHead, cfg.MaxPeriod)
	case "none", "":
	default:
		return nil, fmt.Errorf("%s: positional embedding %q is not supported", prefix, cfg.PosEmb)
	}
	normRMS, eps, err := NormKind(cfg.Norm)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", prefix, err)
	}
	if cfg.Gating == "none" {
		if cfg.WeightsPerStep > 0 {
			return nil, fmt.Errorf("%s: weights per step need gating", prefix)
		}
		t.hidden = cfg.DimFeedforward
	} else {
		t.hidden = GatingHidden(D, cfg.DimFeedforward)
		if t.act, err = Activation(cfg.Gating); err != nil {
			return nil, fmt.Errorf("%s: %v", prefix, err)
		}
	}
	t.normRMS, t.eps = normRMS, eps
	for i := 0; i < cfg.NumLayers; i++ {
		specs := t.LayerTensors(prefix, i)
		ts := make([]weights.Tensor, len(specs))
		for k, sp := range specs {
			w, err := f.Get(sp.Name, sp.Shape...)
			if err != nil {
				return nil, err
			}
			ts[k] = *w
		}
		l := &Layer{}
		if err := t.BindLayer(l, ts); err != nil {
			return nil, err
		}
		t.Layers = append(t.Layers, l)
	}
	return t, nil
}

// Capacity is the number of positions each layer's KV ring holds.
func (t *Transformer) Capacity() int {
	if t.Cfg.Context > 0 {
		return t.Cfg.Context
	}
	return t.Cfg.WeightsPerStep
}

// LayerBytes is the weight storage of layer i.
func (t *Transformer) LayerBytes(i int) int64 {
	l := t.Layers[i]
	n := l.InProj.Bytes() + l.OutProj.Bytes() + l.linear1.Bytes() + l.linear2.Bytes()
	for _, g := range l.gates {
		n += g.in.Bytes() + g.out.Bytes()
	}
	return n
}

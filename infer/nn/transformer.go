// Package nn ports the reference's shared streaming layers
// (moshi/modules/transformer.py, rope.py, gating.py): the streaming
// transformer used by Mimi's encoder/decoder transformers, the LM's temporal
// transformer and its depformer. It says what is computed, as calls on a
// backend.Backend, over a batch of rows that may belong to different
// sequences (conversations); it holds no loops over vector elements.
package nn

import (
	"fmt"
	"github.com/pp-offline/pp-offline/infer/config"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// TransformerConfig mirrors the StreamingTransformer constructor arguments.
type TransformerConfig struct {
	DModel         int
	NumHeads       int
	NumLayers      int
	DimFeedforward int     // constructor's dim_feedforward (the gated hidden size is derived)
	Context        int     // attention span in steps; 0 = unlimited (the ring holds Capacity)
	Capacity       int     // ring capacity when Context is 0 (the depformer: dep_q steps)
	Norm           string  // layer_norm, layer_norm_f32, rms_norm, rms_norm_f32
	LayerScale     bool    // layer_scale_{1,2}.scale present
	Gating         string  // "none" (linear1/linear2 + GELU) or an activation name (silu, gelu, relu)
	PosEmb         string  // "rope" or "none"
	MaxPeriod      float64 // RoPE max period
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

// Layer is one StreamingTransformerLayer's weights (for one step, in the
// depformer).
type Layer struct {
	InProj, OutProj  *backend.Weight // [3·D, D], [D, D]
	Norm1, Norm2     backend.Norm
	Scale1, Scale2   *backend.Weight // [1, D] layer scales, nil when absent
	Linear1, Linear2 *backend.Weight // gating "none": [hidden, D], [D, hidden]
	GateIn, GateOut  *backend.Weight // gated: [2·hidden, D], [D, hidden]
}

// Transformer is a StreamingTransformer's shape and (unless its layers come
// from elsewhere, see LayerSource) its weights.
type Transformer struct {
	Cfg    TransformerConfig
	Layers []*Layer
	Hidden int // FFN hidden size
	DHead  int
	act    backend.Activation
	rms    bool
	eps    float32
}

// NewTransformer checks cfg and prepares a transformer without weights.
func NewTransformer(cfg TransformerConfig) (*Transformer, error) {
	D := cfg.DModel
	if cfg.NumHeads <= 0 || D%cfg.NumHeads != 0 || (D/cfg.NumHeads)%2 != 0 {
		return nil, fmt.Errorf("d_model %d is not divisible into %d heads of even size", D, cfg.NumHeads)
	}
	if cfg.Context <= 0 && cfg.Capacity <= 0 {
		return nil, fmt.Errorf("a streaming transformer needs a context or a capacity")
	}
	t := &Transformer{Cfg: cfg, DHead: D / cfg.NumHeads}
	switch cfg.PosEmb {
	case "rope", "none", "":
	default:
		return nil, fmt.Errorf("positional embedding %q is not supported", cfg.PosEmb)
	}
	var err error
	if t.rms, t.eps, err = NormKind(cfg.Norm); err != nil {
		return nil, err
	}
	if cfg.Gating == "none" {
		t.Hidden = cfg.DimFeedforward
	} else {
		t.Hidden = config.GatingHidden(D, cfg.DimFeedforward)
		if t.act, err = backend.ParseActivation(cfg.Gating); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// LoadTransformer binds the tensors of every layer under prefix
// ("transformer", "encoder_transformer.transformer", …), as LayerTensors
// declares them, checking every shape.
func LoadTransformer(f *weights.File, prefix string, cfg TransformerConfig) (*Transformer, error) {
	t, err := NewTransformer(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", prefix, err)
	}
	for i := 0; i < cfg.NumLayers; i++ {
		l := &Layer{}
		if err := BindTensors(t.LayerTensors(l, prefix, i, -1, 0), f.Get); err != nil {
			return nil, err
		}
		t.Layers = append(t.Layers, l)
	}
	return t, nil
}

// MaxCapacity is the number of positions each layer's KV ring holds at most.
func (t *Transformer) MaxCapacity() int {
	if t.Cfg.Context > 0 {
		return t.Cfg.Context
	}
	return t.Cfg.Capacity
}

// LayerBytes is the weight storage of layer l.
func LayerBytes(l *Layer) int64 { return layerSum(l, (*backend.Weight).Bytes) }

// LayerElems is the weight elements of layer l: the multiply-adds of its
// linear maps for one position.
func LayerElems(l *Layer) int64 { return layerSum(l, (*backend.Weight).Elems) }

func layerSum(l *Layer, f func(*backend.Weight) int64) int64 {
	var n int64
	for _, w := range []*backend.Weight{l.InProj, l.OutProj, l.Linear1, l.Linear2, l.GateIn, l.GateOut} {
		if w != nil {
			n += f(w)
		}
	}
	return n
}

package nn

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// LayerSource supplies the weights each layer of a forward pass is computed
// from, in execution order: AcquireLayer(i) before layer i runs,
// ReleaseLayer(i) once it no longer reads them. The Transformer itself is
// the default source (its own Layers: the mapped checkpoint, no overhead);
// an offload executor hands out a Layer bound to the bytes its plan placed
// (BindLayer), so the model says what is computed and the plan decides
// where the weights come from.
type LayerSource interface {
	AcquireLayer(i int) *Layer
	ReleaseLayer(i int)
}

// AcquireLayer returns layer i's own weights (Transformer as a LayerSource).
func (t *Transformer) AcquireLayer(i int) *Layer { return t.Layers[i] }

// ReleaseLayer does nothing (Transformer as a LayerSource).
func (t *Transformer) ReleaseLayer(int) {}

// ForwardFrom is Forward with every layer's weights taken from src.
func (t *Transformer) ForwardFrom(src LayerSource, s *TransformerState, xs [][]float32) {
	t.forward(src, s, xs, false)
}

// ForwardStepsFrom is ForwardSteps (the prefill) with every layer's weights
// taken from src.
func (t *Transformer) ForwardStepsFrom(src LayerSource, s *TransformerState, xs [][]float32) {
	t.forward(src, s, xs, true)
}

// TensorSpec names one tensor a layer reads and its shape in the checkpoint.
type TensorSpec struct {
	Name  string
	Shape []int
}

// LayerTensors lists the tensors layer i of a transformer loaded under
// prefix reads, in the order BindLayer takes them: in_proj, out_proj, norm1,
// norm2 (alpha, or weight and bias), the layer scales if any, then linear1
// and linear2 or the gating's linear_in and linear_out (one pair per step
// with weights per step).
func (t *Transformer) LayerTensors(prefix string, i int) []TensorSpec {
	cfg := &t.Cfg
	D := cfg.DModel
	mult := max(1, cfg.WeightsPerStep)
	p := fmt.Sprintf("%s.layers.%d.", prefix, i)
	s := []TensorSpec{
		{p + "self_attn.in_proj_weight", []int{mult * 3 * D, D}},
		{p + "self_attn.out_proj.weight", []int{mult * D, D}},
	}
	for _, n := range []string{"norm1", "norm2"} {
		if t.normRMS {
			s = append(s, TensorSpec{p + n + ".alpha", []int{1, 1, D}})
		} else {
			s = append(s, TensorSpec{p + n + ".weight", []int{D}}, TensorSpec{p + n + ".bias", []int{D}})
		}
	}
	if cfg.LayerScale {
		s = append(s, TensorSpec{p + "layer_scale_1.scale", []int{D}}, TensorSpec{p + "layer_scale_2.scale", []int{D}})
	}
	switch {
	case cfg.Gating == "none":
		s = append(s, TensorSpec{p + "linear1.weight", []int{t.hidden, D}}, TensorSpec{p + "linear2.weight", []int{D, t.hidden}})
	case cfg.WeightsPerStep > 0:
		for st := 0; st < cfg.WeightsPerStep; st++ {
			s = append(s,
				TensorSpec{fmt.Sprintf("%sgating.%d.linear_in.weight", p, st), []int{2 * t.hidden, D}},
				TensorSpec{fmt.Sprintf("%sgating.%d.linear_out.weight", p, st), []int{D, t.hidden}})
		}
	default:
		s = append(s, TensorSpec{p + "gating.linear_in.weight", []int{2 * t.hidden, D}}, TensorSpec{p + "gating.linear_out.weight", []int{D, t.hidden}})
	}
	return s
}

// BindLayer points dst at the tensors ts, given in LayerTensors' order with
// LayerTensors' shapes: the matrices become views of the tensors' Data (no
// copy), the norm and scale vectors are widened into dst's own buffers
// (reused when dst was bound before, so rebinding does not allocate). It is
// how LoadTransformer binds the mapped checkpoint, and how an offload
// executor binds the bytes it handed out for a layer.
func (t *Transformer) BindLayer(dst *Layer, ts []weights.Tensor) error {
	cfg := &t.Cfg
	D := cfg.DModel
	k := 0
	take := func(n int) (*weights.Tensor, error) {
		if k >= len(ts) {
			return nil, fmt.Errorf("nn: BindLayer: %d tensors given, more needed", len(ts))
		}
		w := &ts[k]
		k++
		if len(w.Data) != w.Numel()*w.DType.Size() || w.Numel() != n {
			return nil, fmt.Errorf("nn: BindLayer: tensor %q has %d elements in %d bytes, %d expected", w.Name, w.Numel(), len(w.Data), n)
		}
		return w, nil
	}
	mat := func(dst *ops.Mat, rows, cols int) error {
		w, err := take(rows * cols)
		if err != nil {
			return err
		}
		m, err := ops.NewMat(w)
		if err != nil {
			return err
		}
		m.Rows, m.Cols = rows, cols
		*dst = m
		return nil
	}
	vec := func(dst *[]float32) error {
		w, err := take(D)
		if err != nil {
			return err
		}
		return widenInto(dst, w)
	}
	mult := max(1, cfg.WeightsPerStep)
	if err := mat(&dst.InProj, mult*3*D, D); err != nil {
		return err
	}
	if err := mat(&dst.OutProj, mult*D, D); err != nil {
		return err
	}
	for _, n := range []*Norm{&dst.norm1, &dst.norm2} {
		n.RMS, n.Eps = t.normRMS, t.eps
		if err := vec(&n.W); err != nil {
			return err
		}
		if !t.normRMS {
			if err := vec(&n.B); err != nil {
				return err
			}
		}
	}
	if cfg.LayerScale {
		if err := vec(&dst.scale1); err != nil {
			return err
		}
		if err := vec(&dst.scale2); err != nil {
			return err
		}
	}
	switch {
	case cfg.Gating == "none":
		if err := mat(&dst.linear1, t.hidden, D); err != nil {
			return err
		}
		if err := mat(&dst.linear2, D, t.hidden); err != nil {
			return err
		}
	default:
		if len(dst.gates) != mult {
			dst.gates = make([]gating, mult)
		}
		for s := range dst.gates {
			if err := mat(&dst.gates[s].in, 2*t.hidden, D); err != nil {
				return err
			}
			if err := mat(&dst.gates[s].out, D, t.hidden); err != nil {
				return err
			}
		}
	}
	if k != len(ts) {
		return fmt.Errorf("nn: BindLayer: %d tensors given, %d used", len(ts), k)
	}
	return nil
}

// widenInto widens a float tensor exactly to float32 into *dst, reusing its
// storage when large enough.
func widenInto(dst *[]float32, w *weights.Tensor) error {
	n := w.Numel()
	if cap(*dst) < n {
		*dst = make([]float32, n)
	}
	out := (*dst)[:n]
	d := w.Data
	switch w.DType {
	case weights.BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16)
		}
	case weights.F16:
		for i := range out {
			out[i] = weights.HalfToFloat(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case weights.F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	default:
		return fmt.Errorf("nn: tensor %q: dtype %s is not a float weight", w.Name, w.DType)
	}
	*dst = out
	return nil
}

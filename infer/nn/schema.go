package nn

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// TensorRef declares one tensor a model reads: its checkpoint name and
// shape, the rows [Row0, Row1) of it that are used (a per-step slice of a
// depformer projection; Row1 = 0: all), the matrix shape it is used as, and
// the field it is bound to. A model's list of TensorRefs is the one place
// its checkpoint names are written: loading, shape validation, random
// weights, offload packing and placement binding all read it.
type TensorRef struct {
	Name       string
	Shape      []int
	Row0, Row1 int
	Rows, Cols int
	Dst        **backend.Weight
}

// BindTensors gets every tensor of refs with get (a weights.File's Get, or
// an offload executor's) and binds it to its field: a view of the tensor's
// bytes (rows [Row0, Row1) when set), never a copy.
func BindTensors(refs []TensorRef, get func(name string, shape ...int) (*weights.Tensor, error)) error {
	for _, r := range refs {
		t, err := get(r.Name, r.Shape...)
		if err != nil {
			return err
		}
		if err := BindTensor(r, t); err != nil {
			return err
		}
	}
	return nil
}

// BindTensor binds t, the tensor r declares (or only the rows of it that r
// uses, as an offload packing holds them), to r's field.
func BindTensor(r TensorRef, t *weights.Tensor) error {
	n := t.Numel()
	if r.Cols <= 0 || n%r.Cols != 0 {
		return fmt.Errorf("tensor %q: %d elements cannot be rows of %d", r.Name, n, r.Cols)
	}
	w, err := backend.NewWeight(t, n/r.Cols, r.Cols)
	if err != nil {
		return err
	}
	if r.Row1 != 0 && w.Rows != r.Rows {
		if r.Row1 > w.Rows {
			return fmt.Errorf("tensor %q: rows [%d, %d) of %d", r.Name, r.Row0, r.Row1, w.Rows)
		}
		w = w.RowSlice(r.Row0, r.Row1)
	}
	if w.Rows != r.Rows {
		return fmt.Errorf("tensor %q: %d×%d bound as [%d, %d]", r.Name, w.Rows, w.Cols, r.Rows, r.Cols)
	}
	if *r.Dst == nil {
		*r.Dst = new(backend.Weight)
	}
	**r.Dst = w // rebinding reuses the field's Weight: no allocation
	return nil
}

// NormTensors declares the norm called prefix (prefix.alpha [1,1,dim] for
// RMSNorm, prefix.weight/.bias [dim] for LayerNorm) bound to n.
func NormTensors(n *backend.Norm, kind, prefix string, dim int) ([]TensorRef, error) {
	var err error
	if n.RMS, n.Eps, err = NormKind(kind); err != nil {
		return nil, fmt.Errorf("%s: %v", prefix, err)
	}
	if n.RMS {
		return []TensorRef{{Name: prefix + ".alpha", Shape: []int{1, 1, dim}, Rows: 1, Cols: dim, Dst: &n.W}}, nil
	}
	return []TensorRef{
		{Name: prefix + ".weight", Shape: []int{dim}, Rows: 1, Cols: dim, Dst: &n.W},
		{Name: prefix + ".bias", Shape: []int{dim}, Rows: 1, Cols: dim, Dst: &n.B},
	}, nil
}

// Mat declares a [rows, cols] matrix tensor.
func Mat(dst **backend.Weight, name string, rows, cols int) TensorRef {
	return TensorRef{Name: name, Shape: []int{rows, cols}, Rows: rows, Cols: cols, Dst: dst}
}

// LayerTensors declares the tensors of layer i of a transformer under
// prefix, bound to l: in_proj, out_proj, norm1, norm2, the layer scales,
// then linear1/linear2 or the gating. step ≥ 0 declares the depformer's
// step-step slice of a layer with weights per step: rows of the attention
// projections (which hold steps·3·D and steps·D rows; a checkpoint holding
// fewer steps S is used as slice step mod S, get_moshi_lm's "Patch 1") and
// gating.<step>.
func (t *Transformer) LayerTensors(l *Layer, prefix string, i, step, steps int) []TensorRef {
	cfg := &t.Cfg
	D := cfg.DModel
	p := fmt.Sprintf("%s.layers.%d.", prefix, i)
	var s []TensorRef
	if step < 0 {
		s = append(s, Mat(&l.InProj, p+"self_attn.in_proj_weight", 3*D, D), Mat(&l.OutProj, p+"self_attn.out_proj.weight", D, D))
	} else {
		sl := step % steps
		s = append(s,
			TensorRef{Name: p + "self_attn.in_proj_weight", Shape: []int{steps * 3 * D, D}, Row0: sl * 3 * D, Row1: (sl + 1) * 3 * D, Rows: 3 * D, Cols: D, Dst: &l.InProj},
			TensorRef{Name: p + "self_attn.out_proj.weight", Shape: []int{steps * D, D}, Row0: sl * D, Row1: (sl + 1) * D, Rows: D, Cols: D, Dst: &l.OutProj})
	}
	for k, n := range []*backend.Norm{&l.Norm1, &l.Norm2} {
		refs, _ := NormTensors(n, cfg.Norm, fmt.Sprintf("%snorm%d", p, k+1), D) // the kind was checked by NewTransformer
		s = append(s, refs...)
	}
	if cfg.LayerScale {
		s = append(s,
			TensorRef{Name: p + "layer_scale_1.scale", Shape: []int{D}, Rows: 1, Cols: D, Dst: &l.Scale1},
			TensorRef{Name: p + "layer_scale_2.scale", Shape: []int{D}, Rows: 1, Cols: D, Dst: &l.Scale2})
	}
	H := t.Hidden
	switch {
	case cfg.Gating == "none":
		s = append(s, Mat(&l.Linear1, p+"linear1.weight", H, D), Mat(&l.Linear2, p+"linear2.weight", D, H))
	case step >= 0:
		s = append(s,
			Mat(&l.GateIn, fmt.Sprintf("%sgating.%d.linear_in.weight", p, step), 2*H, D),
			Mat(&l.GateOut, fmt.Sprintf("%sgating.%d.linear_out.weight", p, step), D, H))
	default:
		s = append(s, Mat(&l.GateIn, p+"gating.linear_in.weight", 2*H, D), Mat(&l.GateOut, p+"gating.linear_out.weight", D, H))
	}
	return s
}

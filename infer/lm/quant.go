package lm

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// QuantDType is the dtype a quantized model of the given format (Q8_0 or
// Q4_K) stores the checkpoint tensor called name in; "" keeps its own:
//
//   - the linear weights of the temporal transformer and of the depformer
//     (attention in_proj / out_proj, the gating's linear_in / linear_out or
//     linear1 / linear2) and depformer_in: the format — nearly all of a
//     frame's bytes;
//   - text_linear (the text head): Q8_0 in both formats, as llama.cpp keeps
//     its output head at higher precision than the Q4_K body: measured, a
//     4-bit text head moves the text logits 4× more than the whole 4-bit
//     body does, while keeping it in bf16 would cost the 1.3B shape its
//     byte targets (it is 6.5% of a frame there; docs/QUANTIZATION.md);
//   - linears.* (the depformer's audio heads, 0.2% of a frame's bytes at
//     7B): kept, measured to cost audio top-1 agreement when quantized;
//   - embeddings, norms, layer scales: kept.
func QuantDType(name string, format weights.DType) weights.DType {
	switch {
	case name == "text_linear.weight":
		return weights.Q8_0
	case strings.HasPrefix(name, "depformer_in."):
		if strings.HasSuffix(name, ".weight") {
			return format
		}
	case strings.HasPrefix(name, "transformer.layers."), strings.HasPrefix(name, "depformer.layers."):
		for _, s := range []string{".self_attn.in_proj_weight", ".self_attn.out_proj.weight", ".linear_in.weight", ".linear_out.weight", ".linear1.weight", ".linear2.weight"} {
			if strings.HasSuffix(name, s) {
				return format
			}
		}
	}
	return ""
}

// QuantReport is what QuantizeWeights did.
type QuantReport struct {
	Tensors     int   // distinct tensors (or row slices) quantized
	SourceBytes int64 // their bytes in the checkpoint's dtype
	Bytes       int64 // the blocks allocated for them
	Kept        int   // weights that were already in dt (a quantized file)
}

// QuantizeWeights quantizes, in memory, every weight of the model that
// QuantDType picks for format dt (at load, for users without a quantized
// file):
// each distinct tensor once (the aliases of an 8-step checkpoint share
// theirs), rows in parallel on par (nil: sequentially). The model then
// computes from the blocks exactly as from a file quantized with the same
// format. Weights already in dt are kept; weights in another block format
// are an error (requantizing compounds the error: start from the float
// checkpoint).
func (m *Model) QuantizeWeights(dt weights.DType, par func(n int, f func(i int))) (QuantReport, error) {
	return m.quantizeWeights(dt, par, func(n string) weights.DType { return QuantDType(n, dt) })
}

// quantizeWeights is QuantizeWeights of the weights pick chooses (tests
// measure other choices).
func (m *Model) quantizeWeights(format weights.DType, par func(n int, f func(i int)), pick func(string) weights.DType) (QuantReport, error) {
	var rep QuantReport
	if !format.Quantized() {
		return rep, fmt.Errorf("lm: %s is not a block format", format)
	}
	if par == nil {
		par = func(n int, f func(int)) {
			for i := range n {
				f(i)
			}
		}
	}
	type key struct {
		p *byte
		n int
	}
	done := map[key][]byte{}
	var err error
	for _, w := range m.quantTargets(pick) {
		if w == nil || err != nil {
			continue
		}
		dt := pick(w.Name)
		switch {
		case w.DType == dt:
			rep.Kept++
			continue
		case w.DType.Quantized():
			err = fmt.Errorf("%s is already %s; quantize the float checkpoint to %s instead", w.Name, w.DType, dt)
			continue
		}
		k := key{unsafe.SliceData(w.Host), len(w.Host)}
		b, ok := done[k]
		if !ok {
			if b, err = quantizeWeight(w, dt, par); err != nil {
				continue
			}
			done[k] = b
			rep.Tensors++
			rep.SourceBytes += int64(len(w.Host))
			rep.Bytes += int64(len(b))
		}
		w.DType, w.Host = dt, b
	}
	return rep, err
}

// quantTargets lists the model's bound weights that pick gives a dtype.
func (m *Model) quantTargets(pick func(string) weights.DType) []*backend.Weight {
	var out []*backend.Weight
	add := func(ws ...*backend.Weight) {
		for _, w := range ws {
			if w != nil && pick(w.Name) != "" {
				out = append(out, w)
			}
		}
	}
	for _, l := range m.Transformer.Layers {
		add(l.InProj, l.OutProj, l.Linear1, l.Linear2, l.GateIn, l.GateOut)
	}
	add(m.TextLinear)
	for j := range m.Dep.steps {
		st := &m.Dep.steps[j]
		add(st.In, st.Linear)
		for _, l := range st.Layers {
			add(l.InProj, l.OutProj, l.Linear1, l.Linear2, l.GateIn, l.GateOut)
		}
	}
	return out
}

// quantizeWeight quantizes the rows of w into a new buffer.
func quantizeWeight(w *backend.Weight, dt weights.DType, par func(n int, f func(i int))) ([]byte, error) {
	t := weights.Tensor{Name: w.Name, DType: w.DType, Shape: []int{w.Rows, w.Cols}, Data: w.Host}
	return weights.QuantizeTensorPar(&t, dt, nil, par)
}

// Quantized reports whether any weight of the model is in a block format
// (a quantized file, or QuantizeWeights).
func (m *Model) Quantized() bool {
	for _, w := range m.quantTargets(func(string) weights.DType { return weights.Q8_0 }) {
		if w.DType.Quantized() {
			return true
		}
	}
	return false
}

// StoredDTypes is the block format each loaded LM tensor is held in
// (Q8_0, Q4_K; the zero DType for the others): what an offload plan sizes
// the units by.
func (m *Model) StoredDTypes() func(name string) weights.DType { return m.storedDTypes() }

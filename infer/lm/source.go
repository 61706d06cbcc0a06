package lm

import (
	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// Weights supplies the weights each unit of the LM is computed from, in the
// order one pass runs them: the temporal layers 0..N−1 (nn.LayerSource),
// the head, then depformer steps 0, 1, … A pass is one step that reaches
// the temporal transformer, or one prefill (layers only); units a pass does
// not run (the head when the text is provided and no depformer step runs,
// the depformer steps whose tokens are all provided) are not acquired.
//
// The model says what is computed; a Weights says where the bytes come
// from. The default, Model.HostWeights, hands out the mapped checkpoint
// with no overhead; an offload executor (Placed) hands out the bytes its
// plan placed — a device copy, or host memory for units on the CPU.
//
// A Weights never fails a pass: on an error it records the error (Err),
// falls back to the host weights (the same bytes) and the caller stops at
// the next check (Gen.Err).
type Weights interface {
	nn.LayerSource
	BeginPass()
	AcquireHead() *Head
	ReleaseHead()
	AcquireDepStep(j int) *DepStep
	ReleaseDepStep(j int)
	EndPass()
	Err() error
}

// Head is the output head's weights: out_norm and text_linear.
type Head struct {
	OutNorm    backend.Norm
	TextLinear *backend.Weight
}

// DepStep is what depformer step j reads: depformer_in[j], its slice of
// every depformer layer and linears[j].
type DepStep struct {
	In     *backend.Weight
	Layers nn.Layers
	Linear *backend.Weight
}

// hostWeights is Weights over the model's own (mapped) weights.
type hostWeights struct{ m *Model }

// HostWeights is the default Weights: the model's own mapped weights.
func (m *Model) HostWeights() Weights { return m.host }

func (h *hostWeights) AcquireLayer(i int) *nn.Layer  { return h.m.Transformer.Layers[i] }
func (h *hostWeights) ReleaseLayer(int)              {}
func (h *hostWeights) BeginPass()                    {}
func (h *hostWeights) AcquireHead() *Head            { return &h.m.head }
func (h *hostWeights) ReleaseHead()                  {}
func (h *hostWeights) AcquireDepStep(j int) *DepStep { return &h.m.Dep.steps[j] }
func (h *hostWeights) ReleaseDepStep(int)            {}
func (h *hostWeights) EndPass()                      {}
func (h *hostWeights) Err() error                    { return nil }

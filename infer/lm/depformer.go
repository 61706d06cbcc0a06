package lm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// Depformer is the depth transformer of LMModel with its per-step input and
// output projections. Step j (0..dep_q−1) reads depformer_in[j] (or [0]
// without multi-linear), the embedding of the previous token
// (depformer_text_emb for j = 0, depformer_emb[j−1] after), weight slice j
// of every layer's attention projections and gating, and linears[j]. It runs
// through the shared nn.Transformer with a step → weights schedule (steps[j]
// holds step j's layers), over a KV ring of dep_q positions that is fresh
// every frame (the reference ignores depformer_context).
//
// Every per-step weight is a view of the mapped checkpoint; for an 8-step
// checkpoint, steps 8+i are views of the tensors of step i (get_moshi_lm's
// two patches), so nothing is copied.
type Depformer struct {
	Dim, NumHeads, Steps int
	Tr                   *nn.Transformer // the shape; weights come from steps[j]

	TextEmb *backend.Weight   // [text_card+1, depformer_dim]
	Emb     []*backend.Weight // per step j ≥ 1 (index j−1): [card+1, depformer_dim]
	steps   []DepStep
}

func newDepformer(c *config.LM) (*Depformer, error) {
	if !c.DepformerWeightsPerStep {
		return nil, fmt.Errorf("depformer: only depformer_weights_per_step = true is supported")
	}
	if c.DepformerGating == "none" || c.DepformerGating == "" {
		return nil, fmt.Errorf("depformer: gating %q is not supported (weights per step need gating)", c.DepformerGating)
	}
	tr, err := nn.NewTransformer(nn.TransformerConfig{
		DModel: c.DepformerDim, NumHeads: c.DepformerNumHeads, NumLayers: c.DepformerNumLayers,
		DimFeedforward: c.DepDimFeedforward(), Capacity: c.DepQ, Norm: c.Norm,
		LayerScale: c.DepformerLayerScale != nil, Gating: c.DepformerGating,
		PosEmb: c.DepformerPosEmb, MaxPeriod: c.DepformerMaxPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("depformer: %v", err)
	}
	d := &Depformer{Dim: c.DepformerDim, NumHeads: c.DepformerNumHeads, Steps: c.DepQ, Tr: tr}
	d.Emb = make([]*backend.Weight, c.DepQ-1)
	d.steps = make([]DepStep, c.DepQ)
	return d, nil
}

// tableTensors declares the depformer's embedding tables.
func (d *Depformer) tableTensors(c *config.LM) []nn.TensorRef {
	refs := []nn.TensorRef{nn.Mat(&d.TextEmb, "depformer_text_emb.weight", c.TextCard+1, d.Dim)}
	for j := range d.Emb {
		refs = append(refs, nn.Mat(&d.Emb[j], fmt.Sprintf("depformer_emb.%d.weight", j), c.Card+1, d.Dim))
	}
	return refs
}

// StepTensors declares what depformer step j reads, bound to st:
// depformer_in, its slice of every layer (held: the steps the checkpoint's
// attention projections hold) and linears[j]. It is the one declaration of
// a step's names: loading, random weights and offload units read it.
func (d *Depformer) StepTensors(c *config.LM, st *DepStep, j, held int) []nn.TensorRef {
	in := 0
	if c.DepformerMultiLinear {
		in = j
	}
	refs := []nn.TensorRef{nn.Mat(&st.In, fmt.Sprintf("depformer_in.%d.weight", in), d.Dim, c.Dim)}
	if len(st.Layers) != c.DepformerNumLayers { // a bound step's layers are kept (their refs are its own)
		st.Layers = make(nn.Layers, c.DepformerNumLayers)
		for l := range st.Layers {
			st.Layers[l] = &nn.Layer{}
		}
	}
	for l := range st.Layers {
		refs = append(refs, d.Tr.LayerTensors(st.Layers[l], "depformer", l, j, held)...)
	}
	return append(refs, nn.Mat(&st.Linear, fmt.Sprintf("linears.%d.weight", j), c.Card, d.Dim))
}

// StepBytes is the weight storage depformer step j reads (projections,
// attention, gating, output linear; the embedding row is negligible).
func (d *Depformer) StepBytes(j int) int64 {
	return d.stepSum(j, (*backend.Weight).Bytes, nn.LayerBytes)
}

// StepElems is the weight elements step j multiplies: its multiply-adds
// for one conversation.
func (d *Depformer) StepElems(j int) int64 {
	return d.stepSum(j, (*backend.Weight).Elems, nn.LayerElems)
}

func (d *Depformer) stepSum(j int, w func(*backend.Weight) int64, layer func(*nn.Layer) int64) int64 {
	st := &d.steps[j]
	n := w(st.In) + w(st.Linear)
	for _, l := range st.Layers {
		n += layer(l)
	}
	return n
}

// Table is the embedding of the token preceding step j (the text token
// for step 0, audio stream j−1's after).
func (d *Depformer) Table(j int) *backend.Weight {
	if j == 0 {
		return d.TextEmb
	}
	return d.Emb[j-1]
}

// stepAlias maps a per-step module's tensor "<group>.<n>.<rest>" with n in
// 8..15 to step n−8's (get_moshi_lm's Patch 2); false for other names.
func stepAlias(name string) (string, bool) {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || i == 0 {
			continue
		}
		switch parts[i-1] {
		case "depformer_in", "depformer_emb", "linears", "gating":
			if n >= 8 && n < 16 {
				parts[i] = strconv.Itoa(n - 8)
				return strings.Join(parts, "."), true
			}
		}
	}
	return "", false
}

package lm

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// The LM's offload units (offload.NewLM's order: temporal layers 0..N−1,
// the head, then depformer steps 0..S−1), declared from the model's own
// tensor declaration. unitID is the one mapping between a unit's position
// in that order and what it is; everything here and in Placed goes
// through it.

// unitID is one unit of the LM: temporal layer Index, the head, or
// depformer step Index.
type unitID struct {
	Kind  offload.Kind
	Index int
}

// unitAt is the unit at position i of the order.
func unitAt(c *config.LM, i int) unitID {
	switch {
	case i < c.NumLayers:
		return unitID{offload.KindLayer, i}
	case i == c.NumLayers:
		return unitID{offload.KindHead, 0}
	}
	return unitID{offload.KindDepStep, i - c.NumLayers - 1}
}

func layerUnit(i int) unitID { return unitID{offload.KindLayer, i} }
func headUnit() unitID       { return unitID{offload.KindHead, 0} }
func depUnit(j int) unitID   { return unitID{offload.KindDepStep, j} }

// pos is the unit's position in the order.
func (u unitID) pos(c *config.LM) int {
	switch u.Kind {
	case offload.KindLayer:
		return u.Index
	case offload.KindHead:
		return c.NumLayers
	}
	return c.NumLayers + 1 + u.Index
}

// name is the unit's name in plans ("layer.3", "head", "dep.0").
func (u unitID) name() string {
	switch u.Kind {
	case offload.KindLayer:
		return fmt.Sprintf("layer.%d", u.Index)
	case offload.KindHead:
		return "head"
	}
	return fmt.Sprintf("dep.%d", u.Index)
}

// unitFields are the fields a unit's declaration binds: a temporal layer's,
// the head's (out_norm, text_linear) or a depformer step's.
type unitFields struct {
	layer *nn.Layer
	norm  *backend.Norm
	lin   **backend.Weight
	step  *DepStep
}

// declareUnit declares unit u's tensors bound to f (the one declaration of
// each: nn's LayerTensors, HeadTensors, the depformer's StepTensors over a
// checkpoint holding all dep_q steps).
func (m *Model) declareUnit(u unitID, f unitFields) []nn.TensorRef {
	c := &m.Cfg
	switch u.Kind {
	case offload.KindLayer:
		return m.Transformer.LayerTensors(f.layer, "transformer", u.Index, -1, 0)
	case offload.KindHead:
		return m.HeadTensors(f.norm, f.lin, c.TextCard)
	}
	return m.Dep.StepTensors(c, f.step, u.Index, c.DepQ)
}

// Units derives the offload units of the LM described by c, with depSteps
// depformer steps run per frame (offload.DefaultDepSteps in offline
// inference), from the model's own tensor declaration: each temporal
// layer's tensors are nn's LayerTensors, the head's HeadTensors, each
// depformer step's StepTensors (its slice of every depformer layer, in a
// checkpoint holding all dep_q steps; an 8-step checkpoint's are expanded at
// packing). Each declared tensor is one offload.Part (the rows of it the
// unit uses); offload adds the cost model's figures. Only the config is
// read: no checkpoint is needed.
func Units(c *config.LM, depSteps int) (*offload.LM, error) {
	return UnitsOf(c, depSteps, nil)
}

// StoredAs is, for a block format (q8_0, q4_k), the format QuantDType
// stores each tensor in — a model quantized to it, by quantize or
// --weights — for UnitsOf; nil for "" (bf16).
func StoredAs(format weights.DType) func(tensor string) weights.DType {
	if format == "" {
		return nil
	}
	return func(name string) weights.DType { return QuantDType(name, format) }
}

// UnitsOf is Units with each tensor's stored block format given by stored
// ("": bf16; nil: all bf16): a quantized file's own dtypes, a model's, or
// StoredAs(format); a unit's bytes are then its stored size, so more of a
// quantized model stays resident under a budget.
func UnitsOf(c *config.LM, depSteps int, stored func(tensor string) weights.DType) (*offload.LM, error) {
	if err := offload.CheckLM(c, depSteps); err != nil {
		return nil, err
	}
	parts, err := unitParts(c, depSteps)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		for _, ps := range [][][]offload.Part{parts.Layers, {parts.Head}, parts.DepSteps, {parts.Depformer}} {
			for _, unit := range ps {
				for k := range unit {
					unit[k].Stored = stored(unit[k].Tensor)
				}
			}
		}
	}
	return offload.NewLM(c, depSteps, parts)
}

// unitParts lists the tensors of each unit from the model's declaration
// (bound to throw-away fields: only names and shapes are read).
func unitParts(c *config.LM, depSteps int) (offload.LMParts, error) {
	var out offload.LMParts
	m := &Model{Cfg: *c}
	var err error
	if m.Transformer, err = nn.NewTransformer(m.temporalConfig()); err != nil {
		return out, fmt.Errorf("transformer: %v", err)
	}
	for i := 0; i < c.NumLayers; i++ {
		out.Layers = append(out.Layers, refParts(m.declareUnit(layerUnit(i), unitFields{layer: &nn.Layer{}})))
	}
	var norm backend.Norm
	var lin *backend.Weight
	out.Head = refParts(m.declareUnit(headUnit(), unitFields{norm: &norm, lin: &lin}))
	// The depformer's declaration is per step; without weights per step
	// (a shape the LM itself does not run, but the planner models) the
	// shared unit takes its projections from the steps' declarations and
	// its layers unsliced.
	pc := *c
	pc.DepformerWeightsPerStep = true
	d, err := newDepformer(&pc)
	if err != nil {
		return out, err
	}
	m.Dep = d
	if c.DepformerWeightsPerStep {
		for s := 0; s < c.DepQ; s++ {
			out.DepSteps = append(out.DepSteps, refParts(m.declareUnit(depUnit(s), unitFields{step: &DepStep{}})))
		}
		return out, nil
	}
	if depSteps == 0 {
		return out, nil
	}
	steps := make([][]offload.Part, depSteps)
	for s := range steps {
		steps[s] = refParts(d.StepTensors(c, &DepStep{}, s, c.DepQ))
	}
	n := 1
	if c.DepformerMultiLinear {
		n = depSteps
	}
	for s := 0; s < n; s++ {
		out.Depformer = append(out.Depformer, steps[s][0]) // depformer_in
	}
	for l := 0; l < c.DepformerNumLayers; l++ {
		out.Depformer = append(out.Depformer, refParts(d.Tr.LayerTensors(&nn.Layer{}, "depformer", l, -1, 0))...)
	}
	for s := range steps {
		out.Depformer = append(out.Depformer, steps[s][len(steps[s])-1]) // linears
	}
	return out, nil
}

// refParts is one offload.Part per declared tensor: the rows of it used.
func refParts(refs []nn.TensorRef) []offload.Part {
	ps := make([]offload.Part, len(refs))
	for k, r := range refs {
		ps[k] = offload.Part{Tensor: r.Name, Shape: r.Shape, Row0: r.Row0, Row1: r.Row0 + r.Rows, Cols: r.Cols}
	}
	return ps
}

// unitRefs declares plan unit i bound to the model's own weights: those
// it computes with, the 8-step checkpoints' replaced and expanded tensors
// resolved at loading, and quantized if the model is (a quantized file, or
// QuantizeWeights).
func (m *Model) unitRefs(i int) []nn.TensorRef {
	u := unitAt(&m.Cfg, i)
	f := unitFields{norm: &m.OutNorm, lin: &m.TextLinear}
	switch u.Kind {
	case offload.KindLayer:
		f.layer = m.Transformer.Layers[u.Index]
	case offload.KindDepStep:
		f.step = &m.Dep.steps[u.Index]
	}
	return m.declareUnit(u, f)
}

// partBytes returns, for Unit.Pack, the bytes of unit u's parts from
// the model's weights refs are bound to: each in the part's stored format
// (bf16, or the block format the planner sized it in).
func (m *Model) partBytes(u offload.Unit, refs []nn.TensorRef) func(k int) ([]byte, error) {
	byName := map[string]*backend.Weight{}
	for _, r := range refs {
		byName[r.Name] = *r.Dst
	}
	return func(k int) ([]byte, error) {
		p := u.Parts[k]
		w := byName[p.Tensor]
		switch {
		case w == nil:
			return nil, fmt.Errorf("the model has no weight %s", p.Tensor)
		case w.DType != p.Format():
			return nil, fmt.Errorf("%s is %s but the plan holds it as %s (offload needs a bf16 checkpoint, or one quantized from it)", p.Tensor, w.DType, p.Format())
		}
		return w.Host, nil
	}
}

// storedDTypes gives the block format a weight of the model is held in ("":
// not quantized), by checkpoint name: what the planner sizes it as.
func (m *Model) storedDTypes() func(name string) weights.DType {
	dt := map[string]weights.DType{}
	for _, w := range m.quantTargets(func(string) weights.DType { return weights.Q8_0 }) {
		if w.DType.Quantized() {
			dt[w.Name] = w.DType
		}
	}
	return func(name string) weights.DType { return dt[name] }
}

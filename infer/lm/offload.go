package lm

import (
	"fmt"
	"strings"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// Placed is a Weights that executes an offload plan: it packs the model's
// units (Units: each temporal layer, the head, each depformer step
// run per frame) once, runs the plan's memory side on a simulated device
// (offload.Runtime: resident units uploaded once, streamed ones copied into
// staging slots ahead of use, CPU ones left in host memory) and, as a pass
// reaches each unit, binds the bytes the runtime hands out as the unit's
// matrices. Every pass (a step through the temporal transformer, or a
// prefill) is one runtime frame. The bytes handed out always equal the
// model's own weights (the checkpoint's, or their blocks when the model is
// quantized), so the outputs are bit-identical to a run on them, whatever
// the plan.
//
// Computation itself happens on the CPU in this build whatever the
// placement (the simulated device has no compute of its own); the
// runtime's timeline records when each unit would run on the device or the
// CPU at the plan's figures. The temporal KV cache is host memory (the
// plan accounts for its device share).
type Placed struct {
	m    *Model
	plan *offload.Plan
	dev  offload.Device
	rt   *offload.Runtime

	nLayers, nDep int
	binds         []binding // per unit, in the plan's order
	host          [][]byte  // packed units

	layers []*nn.Layer
	head   Head
	deps   []DepStep

	inPass bool
	held   int // unit acquired and not released, −1 when none
	passes int
	err    error
}

// binding is where, in a unit's packed bytes, each tensor the model
// declares for the unit (refs, bound to the Placed's own layers, head or
// depformer steps) lies: ts[k] is part parts[k] of the unit, at
// spans[parts[k]].
type binding struct {
	unit  offload.Unit
	spans []offload.Span
	parts []int
	refs  []nn.TensorRef
	ts    []weights.Tensor
}

// SimOptions configure NewSim. The zero value is a device of 0 bytes (all
// CPU).
type SimOptions struct {
	// Memory is the simulated device's memory in bytes; negative means
	// DefaultSimMemory. The plan is made for the device's free memory.
	Memory int64
	// HostMemory is the plan's host budget (0: unlimited).
	HostMemory int64
	// Workspace is the device memory kept for activations whenever a unit
	// runs on the device; negative means offload.DefaultWorkspace.
	Workspace int64
	// Figures are the machine figures the plan and the timeline use (nil:
	// offload.DefaultFigures, an H200 on PCIe gen5).
	Figures *offload.Figures
	// DepSteps is the number of depformer steps planned per frame (0:
	// offload.DefaultDepSteps, the agent's codebooks).
	DepSteps int
	// Verify makes the runtime check at every release that the unit's
	// device bytes still equal the host bytes.
	Verify bool
}

// DefaultSimMemory is the simulated device's memory when none is given: an
// H200's 141 GB, the device DefaultFigures describe.
const DefaultSimMemory = 141_000_000_000

// NewSim plans the model's units for a simulated device (offload's planner
// over the device's free memory) and starts executing the plan on it.
func NewSim(m *Model, o SimOptions) (*Placed, error) {
	mem := o.Memory
	if mem < 0 {
		mem = DefaultSimMemory
	}
	dev := offload.NewSimDevice(mem)
	depSteps := o.DepSteps
	if depSteps == 0 {
		depSteps = offload.DefaultDepSteps(&m.Cfg)
	}
	units, err := UnitsOf(&m.Cfg, depSteps, m.storedDTypes())
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	fig := offload.DefaultFigures()
	if o.Figures != nil {
		fig = *o.Figures
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, dev.Budget()-dev.Used(), o.HostMemory)
	if o.Workspace >= 0 {
		p.Workspace = o.Workspace
	}
	plan, err := p.Solve()
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	pl, err := NewPlaced(m, plan, dev)
	if err != nil {
		return nil, err
	}
	pl.rt.Verify = o.Verify
	return pl, nil
}

// NewPlaced packs the model's units (the plan's, in its order: layers, head,
// depformer steps) from the model's own weights, in their stored formats
// (bf16, or blocks when quantized), and starts the offload runtime for plan
// on dev. It fails, without exceeding the device's budget, when the plan
// does not fit, and when the plan sized a unit in another format.
func NewPlaced(m *Model, plan *offload.Plan, dev offload.Device) (*Placed, error) {
	c := &m.Cfg
	units := plan.Units()
	p := &Placed{m: m, plan: plan, dev: dev, nLayers: c.NumLayers, held: -1}
	p.nDep = len(units) - c.NumLayers - 1
	if p.nDep < 0 || p.nDep > c.DepQ {
		return nil, fmt.Errorf("offload: the plan has %d units, the model %d layers", len(units), c.NumLayers)
	}
	for i, u := range units {
		want, kind := fmt.Sprintf("layer.%d", i), offload.KindLayer
		switch {
		case i == c.NumLayers:
			want, kind = "head", offload.KindHead
		case i > c.NumLayers:
			want, kind = fmt.Sprintf("dep.%d", i-c.NumLayers-1), offload.KindDepStep
		}
		if u.Name != want || u.Kind != kind {
			return nil, fmt.Errorf("offload: unit %d of the plan is %s, the model runs %s there", i, u.Name, want)
		}
	}
	if m.TextLinear.Rows != c.TextCard {
		return nil, fmt.Errorf("offload: text_linear has %d rows; offload units hold text_card = %d", m.TextLinear.Rows, c.TextCard)
	}
	p.host = make([][]byte, len(units))
	p.binds = make([]binding, len(units))
	p.layers = make([]*nn.Layer, c.NumLayers)
	p.deps = make([]DepStep, p.nDep)
	for i := range units {
		u := units[i]
		blob, spans, err := u.Pack(nil, m.partBytes(u, m.unitRefs(i)))
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		p.host[i] = blob
		var refs []nn.TensorRef
		switch {
		case i < c.NumLayers:
			p.layers[i] = &nn.Layer{}
			refs = m.Transformer.LayerTensors(p.layers[i], "transformer", i, -1, 0)
		case i == c.NumLayers:
			refs = m.HeadTensors(&p.head.OutNorm, &p.head.TextLinear, c.TextCard)
		default:
			refs = m.Dep.StepTensors(c, &p.deps[i-c.NumLayers-1], i-c.NumLayers-1, c.DepQ)
		}
		b, err := newBinding(u, spans, refs)
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		p.binds[i] = b
		// Bind once from the host bytes: checks every shape now, and
		// allocates the norm buffers that later binds reuse.
		if err := p.bind(i, offload.View{Len: int64(len(blob)), Host: blob}); err != nil {
			return nil, fmt.Errorf("offload: %s: %w", u.Name, err)
		}
	}
	rt, err := offload.NewRuntime(plan, dev, p.host)
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	p.rt = rt
	return p, nil
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
	tr, err := nn.NewTransformer(m.temporalConfig())
	if err != nil {
		return out, fmt.Errorf("transformer: %v", err)
	}
	for i := 0; i < c.NumLayers; i++ {
		out.Layers = append(out.Layers, refParts(tr.LayerTensors(&nn.Layer{}, "transformer", i, -1, 0)))
	}
	var norm backend.Norm
	var lin *backend.Weight
	out.Head = refParts(m.HeadTensors(&norm, &lin, c.TextCard))
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
	if c.DepformerWeightsPerStep {
		for s := 0; s < c.DepQ; s++ {
			out.DepSteps = append(out.DepSteps, refParts(d.StepTensors(c, &DepStep{}, s, c.DepQ)))
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

// unitRefs declares plan unit i (layer i, the head, then depformer steps)
// bound to the model's own weights: those it computes with, the 8-step
// checkpoints' replaced and expanded tensors resolved at loading, and
// quantized if the model is (a quantized file, or QuantizeWeights).
func (m *Model) unitRefs(i int) []nn.TensorRef {
	c := &m.Cfg
	switch {
	case i < c.NumLayers:
		return m.Transformer.LayerTensors(m.Transformer.Layers[i], "transformer", i, -1, 0)
	case i == c.NumLayers:
		return m.HeadTensors(&m.OutNorm, &m.TextLinear, c.TextCard)
	}
	j := i - c.NumLayers - 1
	return m.Dep.StepTensors(c, &m.Dep.steps[j], j, c.DepQ)
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

func newBinding(u offload.Unit, spans []offload.Span, refs []nn.TensorRef) (binding, error) {
	b := binding{unit: u, spans: spans, refs: refs}
	idx := map[string]int{}
	for k, p := range u.Parts {
		idx[p.Tensor] = k
	}
	for _, r := range refs {
		k, ok := idx[r.Name]
		if !ok {
			return b, fmt.Errorf("unit %s has no tensor %s", u.Name, r.Name)
		}
		p := u.Parts[k]
		b.parts = append(b.parts, k)
		b.ts = append(b.ts, weights.Tensor{Name: r.Name, DType: p.Format(), Shape: []int{p.Row1 - p.Row0, p.Cols}})
	}
	if len(refs) != len(u.Parts) {
		return b, fmt.Errorf("unit %s has %d tensors, the model reads %d of them", u.Name, len(u.Parts), len(refs))
	}
	return b, nil
}

// bind points unit u's weights (p.layers, p.head or p.deps) at v: each
// weight's Host at its span of v.Host (of the packed host bytes, equal, when
// the device's memory is not host-visible), and its Dev at v.Buf, offset
// to the span, when the unit lies in device memory (so that a device
// backend computes from there).
func (p *Placed) bind(u int, v offload.View) error {
	b := &p.binds[u]
	host := v.Host
	if host == nil {
		host = p.host[u]
	}
	for k := range b.ts {
		sp := b.spans[b.parts[k]]
		b.ts[k].Data = host[sp.Offset : sp.Offset+sp.Bytes : sp.Offset+sp.Bytes]
		if err := nn.BindTensor(b.refs[k], &b.ts[k]); err != nil {
			return err
		}
		w := *b.refs[k].Dst
		w.Dev, w.DevOffset = v.Buf, 0
		if v.Buf != nil {
			w.DevOffset = v.Off + sp.Offset
		}
		w.OnCPU = p.plan.Where[u] == offload.CPU
	}
	return nil
}

// fail records the first error; from then on the host weights are handed
// out and the runtime is left alone.
func (p *Placed) fail(err error) {
	if p.err == nil {
		p.err = fmt.Errorf("offload: %w", err)
	}
}

// acquire takes unit u from the runtime and binds it; false on an error
// (recorded), when the caller uses the host weights.
func (p *Placed) acquire(u int) bool {
	if p.err != nil {
		return false
	}
	if !p.inPass {
		p.fail(fmt.Errorf("unit %s acquired outside a pass", p.binds[u].unit.Name))
		return false
	}
	view, err := p.rt.Acquire(u)
	if err != nil {
		p.fail(err)
		return false
	}
	p.held = u
	if err := p.bind(u, view); err != nil {
		p.fail(fmt.Errorf("%s: %w", p.binds[u].unit.Name, err))
		return false
	}
	return true
}

func (p *Placed) release(u int) {
	if p.held != u {
		return // never acquired: the host weights were used
	}
	p.held = -1
	if p.err != nil {
		return
	}
	if err := p.rt.Release(u); err != nil {
		p.fail(err)
	}
}

// BeginPass starts a runtime frame.
func (p *Placed) BeginPass() {
	if p.err != nil {
		return
	}
	if err := p.rt.BeginFrame(); err != nil {
		p.fail(err)
		return
	}
	p.inPass = true
	p.passes++
}

// EndPass ends the runtime frame; units not acquired are skipped.
func (p *Placed) EndPass() {
	if p.inPass && p.err == nil {
		if err := p.rt.EndFrame(); err != nil {
			p.fail(err)
		}
	}
	p.inPass = false
}

// AcquireLayer binds temporal layer i to the bytes the plan placed.
func (p *Placed) AcquireLayer(i int) *nn.Layer {
	if !p.acquire(i) {
		return p.m.Transformer.Layers[i]
	}
	return p.layers[i]
}

// ReleaseLayer releases layer i.
func (p *Placed) ReleaseLayer(i int) { p.release(i) }

// AcquireHead binds the head to the bytes the plan placed.
func (p *Placed) AcquireHead() *Head {
	if !p.acquire(p.nLayers) {
		return &p.m.head
	}
	return &p.head
}

// ReleaseHead releases the head.
func (p *Placed) ReleaseHead() { p.release(p.nLayers) }

// AcquireDepStep binds depformer step j to the bytes the plan placed. A step
// the plan has no unit for is an error (the plan was made for fewer steps
// per frame than the generation runs).
func (p *Placed) AcquireDepStep(j int) *DepStep {
	if j >= p.nDep {
		p.fail(fmt.Errorf("depformer step %d runs, the plan has units for %d steps per frame", j, p.nDep))
		return &p.m.Dep.steps[j]
	}
	if !p.acquire(p.nLayers + 1 + j) {
		return &p.m.Dep.steps[j]
	}
	return &p.deps[j]
}

// ReleaseDepStep releases depformer step j.
func (p *Placed) ReleaseDepStep(j int) { p.release(p.nLayers + 1 + j) }

// Err is the first error of the runtime or of binding a unit.
func (p *Placed) Err() error { return p.err }

// Plan is the plan executed.
func (p *Placed) Plan() *offload.Plan { return p.plan }

// Runtime is the offload runtime executing the plan (a device backend sets
// its DeviceCompute and queues its kernels on its ComputeStream).
func (p *Placed) Runtime() *offload.Runtime { return p.rt }

// Device is the device the plan runs on.
func (p *Placed) Device() offload.Device { return p.dev }

// Timeline is the runtime's record so far (transfers, computes, the
// device's peak).
func (p *Placed) Timeline() *offload.Timeline { return p.rt.Timeline() }

// Passes is the number of passes (runtime frames) begun.
func (p *Placed) Passes() int { return p.passes }

// Close stops the runtime and frees the device memory.
func (p *Placed) Close() error {
	err := p.rt.Close()
	if p.err != nil {
		return p.err
	}
	return err
}

// Summary describes the plan in lines for a log: one per placement class
// with its units and bytes, then the device memory and the prediction.
func (p *Placed) Summary() []string {
	pl := p.plan
	pr := pl.Problem
	host := "unlimited"
	if pr.HostBudget > 0 {
		host = offload.FormatSize(pr.HostBudget)
	}
	lines := []string{fmt.Sprintf("offload plan for a simulated device of %s (plan budget %s, host %s): %s",
		offload.FormatSize(p.dev.Budget()), offload.FormatSize(pr.GPUBudget), host, pl.Summary())}
	units := pl.Units()
	for _, w := range offload.Placements {
		var names []string
		var bytes int64
		var ms float64
		for i, x := range pl.Where {
			if x == w {
				names = append(names, units[i].Name)
				bytes += units[i].Bytes
				ms += pl.Predict.Units[i].ComputeMs
			}
		}
		if len(names) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-8s %2d units, %10s: %s (%.3f ms/frame predicted)", w, len(names), offload.FormatSize(bytes), CompactNames(names), ms))
	}
	m := pl.Memory
	lines = append(lines, fmt.Sprintf("  device   %s: resident %s, %d staging slot(s) %s, KV cache %s (%d layers), workspace %s; predicted %.3f ms/frame, %s over PCIe per frame",
		offload.FormatSize(m.GPUTotal), offload.FormatSize(m.GPUResident), m.StagingSlots, offload.FormatSize(m.GPUStaging),
		offload.FormatSize(m.GPUKV+m.GPUDepKV), m.KVLayersGPU, offload.FormatSize(m.GPUWorkspace), pl.Predict.FrameMs, offload.FormatSize(m.PCIeBytes)))
	return lines
}

// Finish closes the runtime (copies in flight for a pass that will not run
// are marked unused), checks the timeline (offload.Timeline.Check: the
// device within its budget, no unit transferred twice in a pass, every
// streamed compute after its own copy, …) and describes it in one line.
func (p *Placed) Finish() (string, error) {
	if err := p.Close(); err != nil {
		return "", err
	}
	tl := p.rt.Timeline()
	if err := tl.Check(); err != nil {
		return "", fmt.Errorf("offload: timeline check failed: %w", err)
	}
	var transfers, unused int
	var bytes int64
	for _, e := range tl.Events {
		if e.Kind == offload.Transfer {
			transfers++
			bytes += e.Bytes
			if e.Unused {
				unused++
			}
		}
	}
	return fmt.Sprintf("offload timeline check passed: %d passes, %d transfers (%s, %d prefetched for a pass that never ran), device peak %s of %s, no unit transferred twice in a pass",
		p.passes, transfers, offload.FormatSize(bytes), unused, offload.FormatSize(tl.PeakBytes), offload.FormatSize(tl.Budget)), nil
}

// CompactNames joins unit names, runs of one kind as ranges:
// "layer.0..3, head, dep.0..7".
func CompactNames(names []string) string {
	var out []string
	for i := 0; i < len(names); {
		pre, n, ok := splitIndex(names[i])
		j := i + 1
		for ok && j < len(names) {
			p2, n2, ok2 := splitIndex(names[j])
			if !ok2 || p2 != pre || n2 != n+(j-i) {
				break
			}
			j++
		}
		switch {
		case j-i > 2:
			out = append(out, fmt.Sprintf("%s%d..%d", pre, n, n+j-i-1))
		case j-i == 2:
			out = append(out, names[i], names[i+1])
		default:
			out = append(out, names[i])
		}
		i = j
	}
	return strings.Join(out, ", ")
}

func splitIndex(name string) (string, int, bool) {
	k := strings.LastIndexByte(name, '.')
	if k < 0 {
		return "", 0, false
	}
	var n int
	if _, err := fmt.Sscanf(name[k+1:], "%d", &n); err != nil || fmt.Sprint(n) != name[k+1:] {
		return "", 0, false
	}
	return name[:k+1], n, true
}

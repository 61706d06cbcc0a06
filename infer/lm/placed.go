package lm

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// Placed is a Weights that executes an offload plan on a device: it packs
// the model's units (UnitsOf: each temporal layer, the head, each
// depformer step run per frame) once, runs the plan's memory side with
// offload.Runtime on the device (resident units uploaded once, streamed
// ones copied into staging slots ahead of use, CPU ones left in host
// memory) and, as a pass reaches each unit, binds the bytes the runtime
// hands out as the unit's matrices: Weight.Host the host bytes, Weight.Dev
// and DevOffset the unit's device copy, and Weight.OnCPU for a unit the
// plan keeps on the CPU. Every pass (a step through the temporal
// transformer, or a prefill) is one runtime frame. The bytes handed out
// always equal the model's own weights (the checkpoint's, or their blocks
// when the model is quantized), so the outputs are bit-identical to a run
// on them, whatever the plan.
//
// Who computes is the backend's business: the CPU backend reads Host
// whatever the placement (on offload.SimDevice, whose runtime timeline
// records when each unit would run at the plan's figures); the CUDA
// backend, on its OffloadDevice with Runtime.DeviceCompute set and its
// kernels queued on Runtime.ComputeStream, reads Dev and runs OnCPU
// products on its CPU backend. Units are addressed by unitID (units.go).
type Placed struct {
	m    *Model
	plan *offload.Plan
	dev  offload.Device
	rt   *offload.Runtime

	nDep  int
	binds []binding // per unit, in the plan's order
	host  [][]byte  // packed units

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

// NewPlaced packs the model's units (the plan's, in its order: layers, head,
// depformer steps) from the model's own weights, in their stored formats
// (bf16, or blocks when quantized), and starts the offload runtime for plan
// on dev. It fails, without exceeding the device's budget, when the plan
// does not fit, and when the plan sized a unit in another format.
func NewPlaced(m *Model, plan *offload.Plan, dev offload.Device) (*Placed, error) {
	c := &m.Cfg
	units := plan.Units()
	p := &Placed{m: m, plan: plan, dev: dev, held: -1}
	p.nDep = len(units) - c.NumLayers - 1
	if p.nDep < 0 || p.nDep > c.DepQ {
		return nil, fmt.Errorf("offload: the plan has %d units, the model %d layers", len(units), c.NumLayers)
	}
	for i, u := range units {
		want := unitAt(c, i)
		if u.Name != want.name() || u.Kind != want.Kind {
			return nil, fmt.Errorf("offload: unit %d of the plan is %s, the model runs %s there", i, u.Name, want.name())
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
		id := unitAt(c, i)
		f := unitFields{norm: &p.head.OutNorm, lin: &p.head.TextLinear}
		switch id.Kind {
		case offload.KindLayer:
			p.layers[id.Index] = &nn.Layer{}
			f.layer = p.layers[id.Index]
		case offload.KindDepStep:
			f.step = &p.deps[id.Index]
		}
		b, err := newBinding(u, spans, m.declareUnit(id, f))
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
	if !p.acquire(p.pos(layerUnit(i))) {
		return p.m.Transformer.Layers[i]
	}
	return p.layers[i]
}

// ReleaseLayer releases layer i.
func (p *Placed) ReleaseLayer(i int) { p.release(p.pos(layerUnit(i))) }

// AcquireHead binds the head to the bytes the plan placed.
func (p *Placed) AcquireHead() *Head {
	if !p.acquire(p.pos(headUnit())) {
		return &p.m.head
	}
	return &p.head
}

// ReleaseHead releases the head.
func (p *Placed) ReleaseHead() { p.release(p.pos(headUnit())) }

// AcquireDepStep binds depformer step j to the bytes the plan placed. A step
// the plan has no unit for is an error (the plan was made for fewer steps
// per frame than the generation runs).
func (p *Placed) AcquireDepStep(j int) *DepStep {
	if j >= p.nDep {
		p.fail(fmt.Errorf("depformer step %d runs, the plan has units for %d steps per frame", j, p.nDep))
		return &p.m.Dep.steps[j]
	}
	if !p.acquire(p.pos(depUnit(j))) {
		return &p.m.Dep.steps[j]
	}
	return &p.deps[j]
}

// ReleaseDepStep releases depformer step j.
func (p *Placed) ReleaseDepStep(j int) { p.release(p.pos(depUnit(j))) }

// pos is unit u's position in the plan.
func (p *Placed) pos(u unitID) int { return u.pos(&p.m.Cfg) }

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

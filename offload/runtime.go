package offload

import (
	"bytes"
	"fmt"
)

// Runtime executes a Plan's memory side on a SimDevice: it uploads the
// resident units once, streams the streamed ones through two staging slots
// (each copy issued as soon as its slot is free, so unit k+1 is copied while
// unit k computes), and hands the executor, for every unit of every frame,
// the bytes to compute from. It records the timeline the cost model
// predicts (simulated times: copies at the plan's host→device bandwidth,
// computes at the cost model's durations), on which Timeline.Check asserts
// the engine's promises.
//
// # The executor's side
//
// The LM drives the runtime frame by frame, units in the plan's execution
// order (layers 0..N−1, the head, depformer steps 0..S−1):
//
//	rt, err := offload.NewRuntime(plan, dev, host) // host[u]: unit u's packed bytes (Unit.Pack)
//	defer rt.Close()
//	for each frame {
//		rt.BeginFrame()
//		for u := range plan.Units() {
//			w, err := rt.Acquire(u) // unit u's weights, laid out as Unit.Pack's spans say
//			// re-wrap w as the unit's matrices (same spans as at packing) and compute
//			// unit u on the device if rt.Where(u).OnDevice(), else on the CPU
//			rt.Release(u) // w may be overwritten from now on
//		}
//		rt.EndFrame()
//	}
//
// Acquire returns the device copy for a resident or streamed unit and the
// host bytes themselves for a CPU unit. The bytes are always equal to the
// host bytes given to NewRuntime, which is what makes the outputs
// bit-identical to a CPU-only run whatever the plan (tests check it; set
// Verify to re-check at every Release that the executor did not write into
// them). A view is valid from Acquire until Release; the executor holds at
// most one at a time. A unit not acquired in a frame (the LM skipped it) is
// skipped: its prefetched copy, if any, is dropped.
//
// A Runtime is used from one goroutine; the copies run on others.
type Runtime struct {
	// Verify makes Release check that the unit's bytes still equal the
	// host bytes (costs a comparison per unit).
	Verify bool

	plan     *Plan
	dev      *SimDevice
	host     [][]byte
	comp     []float64
	xferMs   []float64
	resident []*Buffer
	slots    []*Buffer
	reserve  string

	sIdx  []int // positions of the streamed units
	seqIx []int // position → index in sIdx, −1 when not streamed
	S     int   // staging slots
	clk   *clock

	issued   int // next sequence number to issue
	consumed int // next sequence number to consume
	inflight map[int]*pending

	frame   int // current frame (−1 before the first)
	inFrame bool
	next    int // next position the frame may acquire
	held    int // acquired and not released, −1 when none
	heldEv  Event
	heldSeq int

	t0     float64
	tl     Timeline
	closed bool
}

type pending struct {
	copy *Copy
	slot int
	end  float64
	ev   int // index of the transfer event
}

// NewRuntime allocates the plan's device memory on dev — the reservation for
// the KV cache and workspace, the resident units (uploaded now), the staging
// slots — and starts prefetching the first streamed units. host[u] are the
// bytes of unit u in the plan's order. It fails, without exceeding the
// device's budget, when the plan does not fit the device.
func NewRuntime(plan *Plan, dev *SimDevice, host [][]byte) (*Runtime, error) {
	units := plan.Units()
	if len(host) != len(units) {
		return nil, fmt.Errorf("runtime: %d host blobs for %d units", len(host), len(units))
	}
	e := newEvaluator(plan.Problem)
	e.durations(plan.Where)
	rt := &Runtime{
		plan: plan, dev: dev, host: host,
		comp:     append([]float64(nil), e.comp...),
		xferMs:   make([]float64, len(units)),
		resident: make([]*Buffer, len(units)),
		seqIx:    make([]int, len(units)),
		inflight: map[int]*pending{},
		frame:    -1, held: -1,
		reserve: "kv cache + workspace",
	}
	rt.tl.Budget = dev.Budget()
	bw := plan.Problem.Fig.H2DBandwidth.Value
	var maxStreamed int64
	for i, w := range plan.Where {
		rt.seqIx[i] = -1
		rt.xferMs[i] = float64(len(host[i])) / (bw * 1e9) * 1e3
		if w == Streamed {
			rt.seqIx[i] = len(rt.sIdx)
			rt.sIdx = append(rt.sIdx, i)
			maxStreamed = max(maxStreamed, int64(len(host[i])))
		}
	}
	fail := func(err error) (*Runtime, error) {
		rt.release()
		return nil, fmt.Errorf("runtime: %w", err)
	}
	m := plan.Memory
	if err := dev.Reserve(rt.reserve, m.GPUKV+m.GPUDepKV+m.GPUWorkspace); err != nil {
		rt.reserve = ""
		return fail(err)
	}
	// Resident units: uploaded once, before frame 0.
	var t float64
	for i, w := range plan.Where {
		if w != Resident {
			continue
		}
		b, err := dev.Upload(units[i].Name, host[i])
		if err != nil {
			return fail(err)
		}
		rt.resident[i] = b
		rt.tl.Events = append(rt.tl.Events, Event{Kind: Load, Frame: -1, Unit: i, Name: units[i].Name, Where: Resident,
			Slot: -1, Bytes: int64(len(host[i])), Start: t, End: t + rt.xferMs[i]})
		t += rt.xferMs[i]
	}
	rt.S = stagingSlots(len(rt.sIdx))
	for s := 0; s < rt.S; s++ {
		b, err := dev.Alloc(fmt.Sprintf("staging slot %d", s), maxStreamed)
		if err != nil {
			return fail(err)
		}
		rt.slots = append(rt.slots, b)
	}
	rt.t0 = t
	rt.clk = newClock(rt.S, t)
	for k := 0; k < rt.S; k++ {
		if err := rt.issue(); err != nil {
			return fail(err)
		}
	}
	rt.tl.PeakBytes = dev.Peak()
	return rt, nil
}

// Start is the simulated time at which frame 0 may start: the end of the
// resident units' upload.
func (rt *Runtime) Start() float64 { return rt.t0 }

// Where is unit u's placement.
func (rt *Runtime) Where(u int) Placement { return rt.plan.Where[u] }

// Frame is the current frame (−1 before the first BeginFrame).
func (rt *Runtime) Frame() int { return rt.frame }

// issue starts the copy of the next streamed unit into its slot.
func (rt *Runtime) issue() error {
	m := len(rt.sIdx)
	if m == 0 {
		return nil
	}
	k := rt.issued
	u := rt.sIdx[k%m]
	slot := k % rt.S
	c, err := rt.dev.CopyAsync(rt.slots[slot], rt.host[u])
	if err != nil {
		return err
	}
	st, en := rt.clk.transfer(slot, rt.xferMs[u])
	rt.tl.Events = append(rt.tl.Events, Event{Kind: Transfer, Frame: k / m, Unit: u, Name: rt.plan.Units()[u].Name,
		Where: Streamed, Slot: slot, Bytes: int64(len(rt.host[u])), Start: st, End: en})
	rt.inflight[k] = &pending{copy: c, slot: slot, end: en, ev: len(rt.tl.Events) - 1}
	rt.issued++
	return nil
}

// consume takes the next streamed sequence number, which must be unit u's,
// waits for its copy and returns it.
func (rt *Runtime) consume(u int) (*pending, int, error) {
	k := rt.consumed
	m := len(rt.sIdx)
	if rt.sIdx[k%m] != u || k/m != rt.frame {
		return nil, 0, fmt.Errorf("runtime: internal error: streamed sequence %d is unit %d frame %d, not unit %d frame %d", k, rt.sIdx[k%m], k/m, u, rt.frame)
	}
	p := rt.inflight[k]
	if p == nil {
		return nil, 0, fmt.Errorf("runtime: internal error: unit %d was never prefetched", u)
	}
	p.copy.Wait()
	delete(rt.inflight, k)
	rt.consumed++
	return p, k, nil
}

// freeSlot marks a slot free at simulated time t and issues the next copy.
func (rt *Runtime) freeSlot(slot int, t float64) error {
	rt.clk.slotFree[slot] = t
	return rt.issue()
}

// BeginFrame starts the next frame.
func (rt *Runtime) BeginFrame() error {
	if rt.closed {
		return fmt.Errorf("runtime: closed")
	}
	if rt.inFrame {
		return fmt.Errorf("runtime: frame %d has not ended", rt.frame)
	}
	rt.frame++
	rt.inFrame, rt.next = true, 0
	return nil
}

// skip drops units next..u−1 of the current frame (not run by the LM).
func (rt *Runtime) skip(u int) error {
	for ; rt.next < u; rt.next++ {
		if rt.plan.Where[rt.next] != Streamed {
			continue
		}
		p, _, err := rt.consume(rt.next)
		if err != nil {
			return err
		}
		if err := rt.freeSlot(p.slot, max(p.end, rt.clk.chain)); err != nil {
			return err
		}
	}
	return nil
}

// Acquire returns the bytes unit u computes from in the current frame:
// the device copy (resident or streamed), or the host bytes (CPU). Units
// must be acquired in execution order, one at a time; units passed over
// are skipped for this frame. The view is valid until Release(u).
func (rt *Runtime) Acquire(u int) ([]byte, error) {
	switch {
	case rt.closed:
		return nil, fmt.Errorf("runtime: closed")
	case !rt.inFrame:
		return nil, fmt.Errorf("runtime: Acquire(%d) outside a frame", u)
	case u < 0 || u >= len(rt.plan.Where):
		return nil, fmt.Errorf("runtime: no unit %d", u)
	case rt.held >= 0:
		return nil, fmt.Errorf("runtime: Acquire(%d) while unit %d is held", u, rt.held)
	case u < rt.next:
		return nil, fmt.Errorf("runtime: unit %d acquired out of order (next is %d) in frame %d", u, rt.next, rt.frame)
	}
	if err := rt.skip(u); err != nil {
		return nil, err
	}
	where := rt.plan.Where[u]
	ready, slot := rt.clk.chain, -1
	var view []byte
	switch where {
	case Resident:
		view = rt.resident[u].Bytes()
	case CPU:
		view = rt.host[u]
	case Streamed:
		p, k, err := rt.consume(u)
		if err != nil {
			return nil, err
		}
		ready, slot, rt.heldSeq = p.end, p.slot, k
		view = rt.slots[slot].Bytes()[:len(rt.host[u])]
	}
	st, en := rt.clk.compute(ready, rt.comp[u])
	rt.clk.chain = st // the chain advances at Release
	rt.heldEv = Event{Kind: Compute, Frame: rt.frame, Unit: u, Name: rt.plan.Units()[u].Name, Where: where, Slot: slot, Start: st, End: en}
	rt.held, rt.next = u, u+1
	return view, nil
}

// Release ends unit u's use of the view Acquire returned.
func (rt *Runtime) Release(u int) error {
	if rt.held != u {
		return fmt.Errorf("runtime: Release(%d) but the held unit is %d", u, rt.held)
	}
	ev := rt.heldEv
	if rt.Verify {
		var view []byte
		switch ev.Where {
		case Resident:
			view = rt.resident[u].Bytes()
		case Streamed:
			view = rt.slots[ev.Slot].Bytes()[:len(rt.host[u])]
		}
		if view != nil && !bytes.Equal(view, rt.host[u]) {
			return fmt.Errorf("runtime: unit %d (%s): device copy differs from the host bytes at release (was it written to?)", u, ev.Name)
		}
	}
	rt.held = -1
	rt.clk.chain = ev.End
	rt.tl.Events = append(rt.tl.Events, ev)
	if ev.Where == Streamed {
		return rt.freeSlot(ev.Slot, ev.End)
	}
	return nil
}

// EndFrame ends the current frame; units not acquired are skipped.
func (rt *Runtime) EndFrame() error {
	if !rt.inFrame {
		return fmt.Errorf("runtime: EndFrame outside a frame")
	}
	if rt.held >= 0 {
		return fmt.Errorf("runtime: EndFrame while unit %d is held", rt.held)
	}
	if err := rt.skip(len(rt.plan.Where)); err != nil {
		return err
	}
	rt.inFrame = false
	return nil
}

// Timeline returns the events recorded so far and the device's peak use.
func (rt *Runtime) Timeline() *Timeline {
	rt.tl.PeakBytes = rt.dev.Peak()
	return &rt.tl
}

func (rt *Runtime) release() {
	for _, p := range rt.inflight {
		p.copy.Wait()
		rt.tl.Events[p.ev].Unused = true
	}
	rt.inflight = map[int]*pending{}
	for i, b := range rt.resident {
		if b != nil {
			rt.dev.Free(b)
			rt.resident[i] = nil
		}
	}
	for _, b := range rt.slots {
		rt.dev.Free(b)
	}
	rt.slots = nil
	if rt.reserve != "" {
		rt.dev.Unreserve(rt.reserve)
		rt.reserve = ""
	}
}

// Close waits for the copies in flight (prefetches for a frame that will
// not run are marked Unused in the timeline) and frees the device memory.
func (rt *Runtime) Close() error {
	if rt.closed {
		return nil
	}
	rt.tl.PeakBytes = rt.dev.Peak()
	rt.release()
	rt.closed = true
	if rt.held >= 0 {
		return fmt.Errorf("runtime: closed while unit %d is held", rt.held)
	}
	return nil
}

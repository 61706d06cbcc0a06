package offload

import (
	"bytes"
	"fmt"
)

// Runtime executes a Plan's memory side on a Device: it uploads the
// resident units once, streams the streamed ones through two staging slots
// (each copy enqueued as soon as its slot is released, so unit k+1 is copied
// while unit k computes), and hands the executor, for every unit of every
// frame, a View of the bytes to compute from. It records the timeline the
// cost model predicts (simulated times: copies at the plan's host→device
// bandwidth, computes at the cost model's durations), on which
// Timeline.Check asserts the engine's promises.
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
//			v, err := rt.Acquire(u) // unit u's weights, laid out as Unit.Pack's spans say
//			// bind v as the unit's matrices (same spans as at packing: Host
//			// for the CPU backend, Buf at Off for a device backend) and
//			// compute unit u on the device if rt.Where(u).OnDevice(), else
//			// on the CPU
//			rt.Release(u) // the bytes may be overwritten once the unit's compute is done
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
// # The device's side
//
// The runtime makes two streams: a copy stream (the uploads and every
// staging copy, in order: one PCIe link) and a compute stream
// (ComputeStream: where a device backend enqueues a unit's kernels). Each
// staging slot has two fences: copied (recorded on the copy stream after
// the slot's copy) and released (recorded on the compute stream at
// Release). The calls, in order:
//
//   - copy k into slot k mod S: StreamWait(copy, released[slot]) when the
//     slot was released by a compute, CopyAsync(copy, slot, 0, host),
//     Record(copied[slot], copy); enqueued when slot k mod S is released
//     (at unit k−S's Release), so copy k+1 is enqueued before unit k's
//     compute is released;
//   - Acquire(k): StreamWait(compute, copied[slot]) and, unless
//     DeviceCompute, Wait(copied[slot]) (the CPU reads View.Host);
//   - Release(k): Record(released[slot], compute), then the next copy into
//     the slot (which waits for that fence on the device): Release never
//     blocks the host.
//
// A Runtime is used from one goroutine; the device's streams run on others.
type Runtime struct {
	// Verify makes Release check that the unit's bytes still equal the
	// host bytes (costs a comparison per unit; host-visible buffers only).
	Verify bool
	// DeviceCompute says the executor computes device units on the
	// device, enqueued on ComputeStream: Acquire then orders the compute
	// stream after the unit's copy without blocking the host. False (the
	// CPU backend reads View.Host): Acquire waits on the host for the copy.
	DeviceCompute bool

	plan     *Plan
	dev      Device
	host     [][]byte
	comp     []float64
	xferMs   []float64
	resident []Buffer
	slots    []Buffer
	reserve  string

	copyS, compS Stream
	copied       []Fence // per slot: its latest copy has landed
	released     []Fence // per slot: its latest compute is done
	relRecorded  []bool  // per slot: released was recorded since the slot's last copy
	done         Fence   // the copy stream's end, for Close and the uploads

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
	heldV   View

	t0     float64
	tl     Timeline
	closed bool
}

// View is where a unit's bytes lie for the executor, from Acquire to
// Release: Buf at byte offset Off (nil for a CPU unit: the bytes are in
// host memory only), and Host, the same bytes as the host can read them
// (a CPU unit's host bytes; a device unit's when the device buffer is a
// HostBuffer, as SimDevice's are; else nil, and a CPU computation reads
// the host copy given to NewRuntime, which is equal).
type View struct {
	Buf  Buffer
	Off  int64
	Len  int64
	Host []byte
}

type pending struct {
	slot int
	end  float64
	ev   int // index of the transfer event
}

// NewRuntime allocates the plan's device memory on dev — the reservation for
// the KV cache and workspace, the resident units (uploaded now), the staging
// slots — and starts prefetching the first streamed units. host[u] are the
// bytes of unit u in the plan's order. It fails, without exceeding the
// device's budget, when the plan does not fit the device.
func NewRuntime(plan *Plan, dev Device, host [][]byte) (*Runtime, error) {
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
		resident: make([]Buffer, len(units)),
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
	var err error
	if rt.copyS, err = dev.NewStream(); err != nil {
		return fail(err)
	}
	if rt.compS, err = dev.NewStream(); err != nil {
		return fail(err)
	}
	if rt.done, err = dev.NewFence(); err != nil {
		return fail(err)
	}
	// Resident units: uploaded once, before frame 0.
	var t float64
	for i, w := range plan.Where {
		if w != Resident {
			continue
		}
		b, err := dev.Alloc(units[i].Name, int64(len(host[i])))
		if err != nil {
			return fail(err)
		}
		rt.resident[i] = b
		if err := dev.CopyAsync(rt.copyS, b, 0, host[i]); err != nil {
			return fail(err)
		}
		rt.tl.Events = append(rt.tl.Events, Event{Kind: Load, Frame: -1, Unit: i, Name: units[i].Name, Where: Resident,
			Slot: -1, Bytes: int64(len(host[i])), Start: t, End: t + rt.xferMs[i]})
		t += rt.xferMs[i]
	}
	if err := rt.sync(); err != nil {
		return fail(err)
	}
	rt.S = stagingSlots(len(rt.sIdx))
	for s := 0; s < rt.S; s++ {
		b, err := dev.Alloc(fmt.Sprintf("staging slot %d", s), maxStreamed)
		if err != nil {
			return fail(err)
		}
		rt.slots = append(rt.slots, b)
		for _, fs := range []*[]Fence{&rt.copied, &rt.released} {
			f, err := dev.NewFence()
			if err != nil {
				return fail(err)
			}
			*fs = append(*fs, f)
		}
		rt.relRecorded = append(rt.relRecorded, false)
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

// sync waits on the host for everything enqueued on the copy stream.
func (rt *Runtime) sync() error {
	if err := rt.dev.Record(rt.done, rt.copyS); err != nil {
		return err
	}
	return rt.dev.Wait(rt.done)
}

// ComputeStream is the stream a device backend enqueues the units'
// computations on: Acquire orders it after the unit's copy, Release
// records the slot's release on it.
func (rt *Runtime) ComputeStream() Stream { return rt.compS }

// Start is the simulated time at which frame 0 may start: the end of the
// resident units' upload.
func (rt *Runtime) Start() float64 { return rt.t0 }

// Where is unit u's placement.
func (rt *Runtime) Where(u int) Placement { return rt.plan.Where[u] }

// Frame is the current frame (−1 before the first BeginFrame).
func (rt *Runtime) Frame() int { return rt.frame }

// issue enqueues the copy of the next streamed unit into its slot, after
// the slot's release on the device.
func (rt *Runtime) issue() error {
	m := len(rt.sIdx)
	if m == 0 {
		return nil
	}
	k := rt.issued
	u := rt.sIdx[k%m]
	slot := k % rt.S
	if rt.relRecorded[slot] {
		if err := rt.dev.StreamWait(rt.copyS, rt.released[slot]); err != nil {
			return err
		}
		rt.relRecorded[slot] = false
	}
	if err := rt.dev.CopyAsync(rt.copyS, rt.slots[slot], 0, rt.host[u]); err != nil {
		return err
	}
	if err := rt.dev.Record(rt.copied[slot], rt.copyS); err != nil {
		return err
	}
	st, en := rt.clk.transfer(slot, rt.xferMs[u])
	rt.tl.Events = append(rt.tl.Events, Event{Kind: Transfer, Frame: k / m, Unit: u, Name: rt.plan.Units()[u].Name,
		Where: Streamed, Slot: slot, Bytes: int64(len(rt.host[u])), Start: st, End: en})
	rt.inflight[k] = &pending{slot: slot, end: en, ev: len(rt.tl.Events) - 1}
	rt.issued++
	return nil
}

// consume takes the next streamed sequence number, which must be unit u's,
// and returns its copy (not waited for).
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

// Acquire returns the view unit u computes from in the current frame: the
// device copy (resident or streamed), or the host bytes (CPU). Units must
// be acquired in execution order, one at a time; units passed over are
// skipped for this frame. The view is valid until Release(u).
func (rt *Runtime) Acquire(u int) (View, error) {
	switch {
	case rt.closed:
		return View{}, fmt.Errorf("runtime: closed")
	case !rt.inFrame:
		return View{}, fmt.Errorf("runtime: Acquire(%d) outside a frame", u)
	case u < 0 || u >= len(rt.plan.Where):
		return View{}, fmt.Errorf("runtime: no unit %d", u)
	case rt.held >= 0:
		return View{}, fmt.Errorf("runtime: Acquire(%d) while unit %d is held", u, rt.held)
	case u < rt.next:
		return View{}, fmt.Errorf("runtime: unit %d acquired out of order (next is %d) in frame %d", u, rt.next, rt.frame)
	}
	if err := rt.skip(u); err != nil {
		return View{}, err
	}
	where := rt.plan.Where[u]
	ready, slot := rt.clk.chain, -1
	n := int64(len(rt.host[u]))
	var v View
	switch where {
	case Resident:
		v = deviceView(rt.resident[u], n)
	case CPU:
		v = View{Len: n, Host: rt.host[u]}
	case Streamed:
		p, k, err := rt.consume(u)
		if err != nil {
			return View{}, err
		}
		ready, slot, rt.heldSeq = p.end, p.slot, k
		if err := rt.dev.StreamWait(rt.compS, rt.copied[slot]); err != nil {
			return View{}, err
		}
		if !rt.DeviceCompute {
			if err := rt.dev.Wait(rt.copied[slot]); err != nil {
				return View{}, err
			}
		}
		v = deviceView(rt.slots[slot], n)
	}
	st, en := rt.clk.compute(ready, rt.comp[u])
	rt.clk.chain = st // the chain advances at Release
	rt.heldEv = Event{Kind: Compute, Frame: rt.frame, Unit: u, Name: rt.plan.Units()[u].Name, Where: where, Slot: slot, Start: st, End: en}
	rt.held, rt.next, rt.heldV = u, u+1, v
	return v, nil
}

// deviceView is the first n bytes of b, with their host view when the
// host can address b.
func deviceView(b Buffer, n int64) View {
	v := View{Buf: b, Len: n}
	if hb, ok := b.(HostBuffer); ok {
		v.Host = hb.Bytes()[:n:n]
	}
	return v
}

// Release ends unit u's use of the view Acquire returned: it records the
// slot's release on the compute stream (after the unit's computation, for
// a device backend) and enqueues the next copy into the slot behind it,
// without blocking.
func (rt *Runtime) Release(u int) error {
	if rt.held != u {
		return fmt.Errorf("runtime: Release(%d) but the held unit is %d", u, rt.held)
	}
	ev, v := rt.heldEv, rt.heldV
	if rt.Verify && ev.Where != CPU && v.Host != nil {
		if ev.Where == Streamed && rt.DeviceCompute {
			if err := rt.dev.Wait(rt.copied[ev.Slot]); err != nil {
				return err
			}
		}
		if !bytes.Equal(v.Host, rt.host[u]) {
			return fmt.Errorf("runtime: unit %d (%s): device copy differs from the host bytes at release (was it written to?)", u, ev.Name)
		}
	}
	rt.held, rt.heldV = -1, View{}
	rt.clk.chain = ev.End
	rt.tl.Events = append(rt.tl.Events, ev)
	if ev.Where == Streamed {
		if err := rt.dev.Record(rt.released[ev.Slot], rt.compS); err != nil {
			return err
		}
		rt.relRecorded[ev.Slot] = true
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
	if rt.copyS != nil && rt.done != nil {
		rt.sync() // the copies in flight land before their buffers go
	}
	for _, p := range rt.inflight {
		rt.tl.Events[p.ev].Unused = true
	}
	rt.inflight = map[int]*pending{}
	for _, s := range []*Stream{&rt.copyS, &rt.compS} {
		if *s != nil {
			rt.dev.DestroyStream(*s)
			*s = nil
		}
	}
	for _, f := range append(append([]Fence{rt.done}, rt.copied...), rt.released...) {
		if f != nil {
			rt.dev.DestroyFence(f)
		}
	}
	rt.done, rt.copied, rt.released = nil, nil, nil
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

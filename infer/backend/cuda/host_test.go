package cuda

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// The host side of the backend (memory accounting, the resident cache,
// pinning) and offload.Runtime driving it through OffloadDevice, on a fake
// driver whose streams run in an adversarial order — every other stream
// (the runtime's copy stream) as far ahead as its waits allow before each
// operation of the compute stream — so a missing fence shows as a kernel
// reading device bytes that a later copy overwrote.

// simOp is one operation queued on a simulated stream.
type simOp struct {
	kind string // "copy", "record", "wait", "use"
	p    cu.DevPtr
	n    int64
	src  uintptr // copy: the host address copied from; use: the one p must hold
	ev   *simEvent
	gen  int
}

type simEvent struct{ queued, done int }

type simStream struct{ ops []simOp }

// region is an executed copy: device bytes [p, p+n) hold host bytes from src.
type region struct {
	p   cu.DevPtr
	n   int64
	src uintptr
}

// fakeDev is a driver that runs nothing but orders everything: copies,
// records, waits and the matrix products' reads of their weights.
type fakeDev struct {
	next      cu.DevPtr
	live      map[cu.DevPtr]int64
	streams   []*simStream
	compute   *simStream
	mem       []region
	syncs     int
	registers int
	regs      []span
	failAlloc bool

	// expect is the host address the next matrix product's weight must
	// hold on the device (0: not checked); uses counts the checked reads.
	expect uintptr
	uses   int
	err    error
}

func newFake() *fakeDev {
	f := &fakeDev{next: 1 << 20, live: map[cu.DevPtr]int64{}}
	f.compute = f.newSim()
	return f
}

func (f *fakeDev) newSim() *simStream {
	s := &simStream{}
	f.streams = append(f.streams, s)
	return s
}

func (f *fakeDev) alloc(n int64) (cu.DevPtr, error) {
	if f.failAlloc {
		return 0, errors.New("driver out of memory")
	}
	p := f.next
	f.next += cu.DevPtr(n)
	f.live[p] = n
	return p, nil
}

func (f *fakeDev) free(p cu.DevPtr) error {
	if _, ok := f.live[p]; !ok {
		return fmt.Errorf("double free of %#x", uint64(p))
	}
	delete(f.live, p)
	return nil
}

func addr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

func (f *fakeDev) queue(s *simStream, op simOp) { s.ops = append(s.ops, op) }

func (f *fakeDev) copyAsync(dst cu.DevPtr, src []byte) error {
	f.queue(f.compute, simOp{kind: "copy", p: dst, n: int64(len(src)), src: addr(src)})
	return nil
}

func (f *fakeDev) newEvent() (event, error) { return &simEvent{}, nil }

// syncEvent runs the streams until e's last record has run.
func (f *fakeDev) syncEvent(e event) error {
	f.syncs++
	ev := e.(*simEvent)
	for ev.done < ev.queued {
		if !f.step() {
			return errors.New("deadlock waiting for an event")
		}
	}
	return nil // a stale read is drain's error
}

// register refuses, as the driver does, a range overlapping a registered
// one (whole pages).
func (f *fakeDev) register(addr, n uintptr) error {
	r := span{addr, addr + n}
	for _, x := range f.regs {
		if r.s < x.e && x.s < r.e {
			return errors.New("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED")
		}
	}
	f.regs = append(f.regs, r)
	f.registers++
	return nil
}

func (f *fakeDev) setCurrent() error { return nil }

// sync runs the compute stream (and what it waits for) to its end.
func (f *fakeDev) sync() error {
	f.syncs++
	for len(f.compute.ops) > 0 {
		if !f.step() {
			return errors.New("deadlock: the compute stream waits forever")
		}
	}
	return nil
}
func (f *fakeDev) memset(cu.DevPtr, int64) error              { return nil }
func (f *fakeDev) copyDtoD(dst, src cu.DevPtr, n int64) error { return nil }
func (f *fakeDev) download(dst []byte, src cu.DevPtr) error   { return nil }
func (f *fakeDev) pin([]byte) error                           { return nil }
func (f *fakeDev) unpin([]byte) error                         { return nil }

// launch queues, for a matrix product, the read of its weight (argument
// 4 of the four kernels' signatures) on the compute stream.
func (f *fakeDev) launch(name string, grid, block [3]uint32, shared uint32, params unsafe.Pointer) error {
	if name != "matmul_fma" && name != "matmul_fma_vec" && name != "matmul_fma_rows" && name != "matmul_mma_bf16" {
		return nil
	}
	cells := (*[24]unsafe.Pointer)(params)
	w := cu.DevPtr(*(*uint64)(cells[4]))
	if f.expect != 0 {
		f.queue(f.compute, simOp{kind: "use", p: w, src: f.expect})
	}
	return nil
}

func (f *fakeDev) newStream() (stream, error) { return f.newSim(), nil }
func (f *fakeDev) destroyStream(stream) error { return nil }
func (f *fakeDev) destroyEvent(event) error   { return nil }
func (f *fakeDev) computeStream() stream      { return f.compute }
func (f *fakeDev) setCompute(s stream) error {
	if err := f.sync(); err != nil {
		return err
	}
	f.compute = s.(*simStream)
	return nil
}
func (f *fakeDev) copyOn(s stream, dst cu.DevPtr, src []byte) error {
	f.queue(s.(*simStream), simOp{kind: "copy", p: dst, n: int64(len(src)), src: addr(src)})
	return nil
}
func (f *fakeDev) recordOn(e event, s stream) error {
	ev := e.(*simEvent)
	ev.queued++
	f.queue(s.(*simStream), simOp{kind: "record", ev: ev, gen: ev.queued})
	return nil
}
func (f *fakeDev) waitOn(s stream, e event) error {
	ev := e.(*simEvent)
	f.queue(s.(*simStream), simOp{kind: "wait", ev: ev, gen: ev.queued})
	return nil
}

var errStale = errors.New("a kernel read device bytes other than its weight's (a copy overwrote them, or had not landed)")

// holds is the host address whose bytes device address p holds now (the
// latest executed copy covering it), 0 if none.
func (f *fakeDev) holds(p cu.DevPtr) uintptr {
	for i := len(f.mem) - 1; i >= 0; i-- {
		r := f.mem[i]
		if p >= r.p && int64(p-r.p) < r.n {
			return r.src + uintptr(p-r.p)
		}
	}
	return 0
}

// runOne runs the head of stream s if it can; it reports progress.
func (f *fakeDev) runOne(s *simStream) bool {
	if len(s.ops) == 0 {
		return false
	}
	op := s.ops[0]
	switch op.kind {
	case "wait":
		if op.ev.done < op.gen {
			return false
		}
	case "record":
		op.ev.done = op.gen
	case "copy":
		f.mem = append(f.mem, region{op.p, op.n, op.src})
	case "use":
		f.uses++
		if f.holds(op.p) != op.src && f.err == nil {
			f.err = errStale
		}
	}
	s.ops = s.ops[1:]
	return true
}

// step runs every stream but the compute stream as far as it goes, then
// one operation of the compute stream.
func (f *fakeDev) step() bool {
	progress := false
	for more := true; more; {
		more = false
		for _, s := range f.streams {
			for s != f.compute && f.runOne(s) {
				more, progress = true, true
			}
		}
	}
	return f.runOne(f.compute) || progress
}

// drain runs everything queued; the first stale read is its error.
func (f *fakeDev) drain() error {
	for {
		pending := false
		for _, s := range f.streams {
			pending = pending || len(s.ops) > 0
		}
		if !pending {
			return f.err
		}
		if !f.step() {
			return errors.New("deadlock: every stream waits")
		}
	}
}

// onFake is a CUDA backend on f.
func onFake(t *testing.T, f *fakeDev, o Options, limit int64) *CUDA {
	t.Helper()
	c := newOn(o, f)
	if err := c.start(limit); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAllocatorLimit(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 10_000)
	p, err := a.alloc("a", 4000)
	if err != nil {
		t.Fatal(err)
	}
	if a.used != 4096 {
		t.Fatalf("used %d, want 4096 (256-byte granules)", a.used)
	}
	if _, err := a.alloc("b", 6000); !errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("past the limit: %v", err)
	}
	if a.used != 4096 || len(f.live) != 1 {
		t.Fatalf("a refused allocation left %d bytes, %d buffers", a.used, len(f.live))
	}
	q, err := a.alloc("c", 5000)
	if err != nil {
		t.Fatal(err)
	}
	if a.peak != 4096+5120 {
		t.Fatalf("peak %d", a.peak)
	}
	if err := a.free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.free(p); err == nil {
		t.Fatal("double free accepted")
	}
	f.failAlloc = true
	if _, err := a.alloc("d", 10); err == nil || errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("a driver failure: %v", err)
	}
	f.failAlloc = false
	_ = q
	if err := a.freeAll(); err != nil || a.used != 0 || len(f.live) != 0 {
		t.Fatalf("freeAll: %v, %d used, %d live", err, a.used, len(f.live))
	}
}

// Weights bound without Dev are uploaded once, by their host bytes; past
// the limit that is an out-of-memory error, not a fallback to streaming
// (the backend streams nothing: offload.Runtime does).
func TestResidentCache(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 1<<20)
	s := newResidentCache(f, a)
	w1, w2 := make([]byte, 1000), make([]byte, 3000)
	p1, err := s.get("w1", w1)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := s.get("w1", w1); p != p1 {
		t.Fatal("the same bytes were uploaded twice")
	}
	if _, err := s.get("w2", w2); err != nil {
		t.Fatal(err)
	}
	// A row block of w2 is other bytes: its own upload.
	if _, err := s.get("w2 rows", w2[1000:2000]); err != nil {
		t.Fatal(err)
	}
	if s.uploads != 3 || s.bytes != 5000 {
		t.Fatalf("%d uploads of %d bytes", s.uploads, s.bytes)
	}
	if _, err := s.get("big", make([]byte, 2<<20)); !errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("a weight past the limit: %v", err)
	}
	if err := f.drain(); err != nil {
		t.Fatal(err)
	}
}

// Buffers released by their owners' finalizers (any goroutine) are freed
// at the next allocation, after the stream synchronisation, so their
// memory counts again: a job of many conversations does not accumulate
// the rings of the finished ones.
func TestReleaseReaps(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 8192)
	syncs := 0
	a.sync = func() error { syncs++; return nil }
	p, err := a.alloc("ring", 8000)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { a.release(p); done <- true }()
	<-done
	if a.used != 8192 {
		t.Fatalf("released memory freed before the next allocation: %d used", a.used)
	}
	if _, err := a.alloc("next ring", 8000); err != nil {
		t.Fatalf("the released ring's memory was not reused: %v", err)
	}
	if syncs != 1 || a.reaps != 1 || len(f.live) != 1 {
		t.Fatalf("%d syncs, %d reaps, %d live buffers", syncs, a.reaps, len(f.live))
	}
}

// Neighbouring units of one packing share boundary pages: each page is
// registered once, and every copied unit's bytes end up pinned.
func TestPinSharedPages(t *testing.T) {
	f := newFake()
	c := onFake(t, f, Options{}, 64<<20)
	d := c.OffloadDevice()
	s, _ := d.NewStream()
	page := int(c.rc.pageSize)
	file := make([]byte, 16*page)
	base := (page - int(addr(file))%page) % page
	// Units straddling pages, copied out of order, one twice.
	cuts := []int{base + 100, base + page + 7, base + 3*page, base + 5*page + 1, base + 9*page + 300, base + 12*page}
	order := []int{2, 0, 4, 1, 3, 2}
	buf, err := d.Alloc("slot", 8*int64(page))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range order {
		if err := d.CopyAsync(s, buf, 0, file[cuts[i]:cuts[i+1]]); err != nil {
			t.Fatal(err)
		}
	}
	if c.rc.pinFailed != nil {
		t.Fatalf("pinning failed: %v", c.rc.pinFailed)
	}
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := addr(file[cuts[i]:]), addr(file[cuts[i+1]-1:])+1
		if len(uncovered(c.rc.pinned, span{lo, hi})) != 0 {
			t.Fatalf("unit %d is not wholly pinned", i)
		}
	}
	if err := f.drain(); err != nil {
		t.Fatal(err)
	}
}

// offload.Device's reservations (the plan's KV cache and workspace) count
// once: the backend's own buffers are carved from them first, and only
// what exceeds them counts on top; the limit holds throughout.
func TestReservations(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 100<<10)
	if err := a.reserve("kv cache + workspace", 40<<10); err != nil {
		t.Fatal(err)
	}
	if err := a.reserve("big", 70<<10); !errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("a reservation past the limit: %v", err)
	}
	w, err := a.alloc("unit", 50<<10) // a resident unit: on top
	if err != nil || a.used != 90<<10 {
		t.Fatal(err, a.used)
	}
	ring, err := a.allocWork("ring", 30<<10) // carved: no more used
	if err != nil || a.used != 90<<10 || a.pool != 10<<10 {
		t.Fatal(err, a.used, a.pool)
	}
	if _, err := a.allocWork("activations", 20<<10); !errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("past the reservation and the limit: %v", err)
	}
	act, err := a.allocWork("activations", 8<<10)
	if err != nil || a.used != 90<<10 {
		t.Fatal(err, a.used)
	}
	if err := a.free(ring); err != nil || a.pool != 32<<10 || a.used != 90<<10 {
		t.Fatal(err, a.pool, a.used)
	}
	a.unreserve("kv cache + workspace")
	if a.used != 50<<10+8<<10 || a.pool != 0 {
		t.Fatalf("after unreserve: %d used (the unit and the live activations), pool %d", a.used, a.pool)
	}
	if err := a.free(act); err != nil || a.used != 50<<10 {
		t.Fatal(err, a.used)
	}
	if err := a.free(w); err != nil || a.used != 0 || a.peak > a.limit {
		t.Fatal(err, a.used, a.peak)
	}
}

// dropCopyWaits is an offload.Device that loses the copy stream's waits
// (the stream the runtime creates first): a staging copy no longer waits
// for the compute that read the slot before.
type dropCopyWaits struct {
	offload.Device
	copyS offload.Stream
}

func (d *dropCopyWaits) NewStream() (offload.Stream, error) {
	s, err := d.Device.NewStream()
	if d.copyS == nil {
		d.copyS = s
	}
	return s, err
}

func (d *dropCopyWaits) StreamWait(s offload.Stream, f offload.Fence) error {
	if s == d.copyS {
		return nil
	}
	return d.Device.StreamWait(s, f)
}

// runPlanOnFake executes a plan of units (streamed, on the CPU, resident
// in a pattern) with offload.Runtime on the backend's OffloadDevice, the
// backend queued on the runtime's compute stream as a --cpu-offload job
// does, for frames frames: per unit, two matrix products from weights
// bound to the view the runtime hands out (Dev+DevOffset, or OnCPU for a
// CPU unit). It returns the fake (drained: its error is the first stale
// read) and the number of products checked.
func runPlanOnFake(t *testing.T, wrap func(offload.Device) offload.Device, frames int) (*fakeDev, int, error) {
	t.Helper()
	f := newFake()
	c := onFake(t, f, Options{ComputeDType: "f32", CPU: testCPU()}, 64<<20)
	defer c.Close()
	plan := fakePlan(t)
	units := plan.Units()
	host := make([][]byte, len(units))
	for i, u := range units {
		host[i] = make([]byte, u.Bytes)
	}
	var dev offload.Device = c.OffloadDevice()
	if wrap != nil {
		dev = wrap(dev)
	}
	rt, err := offload.NewRuntime(plan, dev, host)
	if err != nil {
		t.Fatal(err)
	}
	rt.DeviceCompute = true
	if err := c.UseRuntimeStream(rt.ComputeStream()); err != nil {
		t.Fatal(err)
	}
	const rows, cols = 4, 64
	x, y := c.NewActs(2, cols), c.NewActs(2, rows)
	checked := 0
	for fr := 0; fr < frames; fr++ {
		if err := rt.BeginFrame(); err != nil {
			t.Fatal(err)
		}
		for u := range units {
			v, err := rt.Acquire(u)
			if err != nil {
				t.Fatal(err)
			}
			for _, off := range []int64{0, int64(len(host[u])) - rows*cols*2} {
				w := &backend.Weight{Name: fmt.Sprintf("%s@%d", units[u].Name, off), Rows: rows, Cols: cols, DType: weights.BF16,
					Host: host[u][off : off+rows*cols*2]}
				f.expect = 0
				if v.Buf != nil {
					w.Dev, w.DevOffset = v.Buf, v.Off+off
					f.expect = addr(w.Host)
					checked++
				} else {
					w.OnCPU = true
				}
				c.MatMul(y, x, w)
			}
			f.expect = 0
			if err := rt.Release(u); err != nil {
				t.Fatal(err)
			}
		}
		if err := rt.EndFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Close(); err != nil {
		return f, checked, err
	}
	return f, checked, f.drain()
}

// Streaming lives in offload.Runtime alone: on the backend's OffloadDevice,
// with the copy stream as far ahead as its fences allow, every kernel of a
// streamed or resident unit reads its own unit's bytes, every frame; CPU
// units launch nothing (their products run on the CPU backend). Without
// the copy stream's waits on the slots' release fences, the same run reads
// overwritten slots, which the check catches.
func TestRuntimeStreamsOnOffloadDevice(t *testing.T) {
	f, checked, err := runPlanOnFake(t, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	units := fakePlan(t).Units()
	onDevice := 0
	for i := range units {
		if i%5 != 2 {
			onDevice++
		}
	}
	if checked != 3*2*onDevice || f.uses != checked {
		t.Fatalf("%d products on device units checked, %d reads ran, want %d", checked, f.uses, 3*2*onDevice)
	}
	if f.registers == 0 {
		t.Fatal("the units' host bytes were never pinned")
	}
	_, _, err = runPlanOnFake(t, func(d offload.Device) offload.Device { return &dropCopyWaits{Device: d} }, 3)
	if !errors.Is(err, errStale) {
		t.Fatalf("without the release fences' waits: %v, want a stale read", err)
	}
}

// fakePlan places the tiny model's units streamed, streamed, on the CPU,
// streamed, resident in turn (consecutive streamed units reuse the two
// staging slots).
func fakePlan(t *testing.T) *offload.Plan {
	t.Helper()
	cfg, err := config.Load("../../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	units, err := lm.Units(&cfg.LM, offload.DefaultDepSteps(&cfg.LM))
	if err != nil {
		t.Fatal(err)
	}
	where := make([]offload.Placement, len(units.Units))
	for i := range where {
		where[i] = []offload.Placement{offload.Streamed, offload.Streamed, offload.CPU, offload.Streamed, offload.Resident}[i%5]
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, offload.DefaultFigures(), 1<<40, 0)
	p.Workspace = 1 << 20
	plan, err := p.Evaluate(where)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func testCPU() backend.Backend { return cpu.Default() }

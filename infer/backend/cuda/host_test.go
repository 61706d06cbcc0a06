package cuda

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/offload"
)

// The host side of the backend (memory accounting, the resident cache,
// staging with streams and events) on a fake device: two simulated
// streams whose operations run in an adversarial order — the copy stream
// as far ahead as its waits allow — so a missing event would show as a
// kernel reading a slot that was overwritten.

type simOp struct {
	kind string // "copy", "record", "wait", "use"
	p    cu.DevPtr
	key  hostKey
	ev   *simEvent
	gen  int
}

type simEvent struct{ queued, done int }

type fakeDev struct {
	next      cu.DevPtr
	live      map[cu.DevPtr]int64
	streams   [2][]simOp // 0: compute, 1: copy
	contents  map[cu.DevPtr]hostKey
	syncs     int
	registers int
	regs      []span
	failAlloc bool
}

func newFake() *fakeDev {
	return &fakeDev{next: 1 << 20, live: map[cu.DevPtr]int64{}, contents: map[cu.DevPtr]hostKey{}}
}

func sid(copy bool) int {
	if copy {
		return 1
	}
	return 0
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

func (f *fakeDev) copyAsync(dst cu.DevPtr, src []byte, copy bool) error {
	f.streams[sid(copy)] = append(f.streams[sid(copy)], simOp{kind: "copy", p: dst, key: keyOf(src)})
	return nil
}

func (f *fakeDev) newEvent() (event, error) { return &simEvent{}, nil }

func (f *fakeDev) record(e event, copy bool) error {
	ev := e.(*simEvent)
	ev.queued++
	f.streams[sid(copy)] = append(f.streams[sid(copy)], simOp{kind: "record", ev: ev, gen: ev.queued})
	return nil
}

func (f *fakeDev) wait(copy bool, e event) error {
	ev := e.(*simEvent)
	f.streams[sid(copy)] = append(f.streams[sid(copy)], simOp{kind: "wait", ev: ev, gen: ev.queued})
	return nil
}

// syncEvent runs the streams until e's last record has run.
func (f *fakeDev) syncEvent(e event) error {
	f.syncs++
	ev := e.(*simEvent)
	for ev.done < ev.queued {
		if !f.step() {
			return errors.New("deadlock waiting for an event")
		}
	}
	return nil
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

// use queues a kernel on the compute stream that reads p, which must then
// hold key.
func (f *fakeDev) use(p cu.DevPtr, key hostKey) {
	f.streams[0] = append(f.streams[0], simOp{kind: "use", p: p, key: key})
}

var errStale = errors.New("a kernel read a slot overwritten by a later copy")

// runOne runs the head of stream s if it can; it reports progress.
func (f *fakeDev) runOne(s int) (bool, error) {
	if len(f.streams[s]) == 0 {
		return false, nil
	}
	op := f.streams[s][0]
	switch op.kind {
	case "wait":
		if op.ev.done < op.gen {
			return false, nil
		}
	case "record":
		op.ev.done = op.gen
	case "copy":
		f.contents[op.p] = op.key
	case "use":
		if f.contents[op.p] != op.key {
			return false, errStale
		}
	}
	f.streams[s] = f.streams[s][1:]
	return true, nil
}

// step runs the copy stream as far as it goes, then one compute op.
func (f *fakeDev) step() bool {
	progress := false
	for {
		ok, err := f.runOne(1)
		if err != nil {
			panic(err)
		}
		if !ok {
			break
		}
		progress = true
	}
	ok, err := f.runOne(0)
	if err != nil {
		panic(err)
	}
	return progress || ok
}

// drain runs everything queued, returning errStale on a stale read.
func (f *fakeDev) drain() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = r.(error)
		}
	}()
	for len(f.streams[0])+len(f.streams[1]) > 0 {
		if !f.step() {
			return errors.New("deadlock: both streams wait")
		}
	}
	return nil
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

func TestResidentCache(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 1<<20)
	s, err := newWeightStore(f, a, storeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := make([]byte, 1000), make([]byte, 3000)
	p1, slot, err := s.get("w1", w1)
	if err != nil || slot != -1 {
		t.Fatal(err, slot)
	}
	if p, _, _ := s.get("w1", w1); p != p1 {
		t.Fatal("the same bytes were uploaded twice")
	}
	if _, _, err := s.get("w2", w2); err != nil {
		t.Fatal(err)
	}
	// A row block of w2 is other bytes: its own upload.
	if _, _, err := s.get("w2 rows", w2[1000:2000]); err != nil {
		t.Fatal(err)
	}
	if s.uploads != 3 || s.uploaded != 5000 {
		t.Fatalf("%d uploads of %d bytes", s.uploads, s.uploaded)
	}
	if err := f.drain(); err != nil {
		t.Fatal(err)
	}
	// Without streaming, a weight past the limit is an out-of-memory error.
	if _, _, err := s.get("big", make([]byte, 2<<20)); !errors.Is(err, offload.ErrOutOfMemory) {
		t.Fatalf("a weight past the limit: %v", err)
	}
}

// Streamed weights go through the slots: every kernel reads the bytes of
// its own weight however far the copy stream runs ahead, each slot's next
// copy waits for the kernels that read it, and the allocator stays within
// its limit; weights the plan makes resident are uploaded once.
func TestStagingOrder(t *testing.T) {
	for _, slots := range []int{2, 3} {
		f := newFake()
		a := newAllocator(f, 64<<10)
		place := func(name string) offload.Placement {
			if name[0] == 's' {
				return offload.Streamed
			}
			return offload.Resident
		}
		s, err := newWeightStore(f, a, storeOptions{Stream: true, Slots: slots, SlotBytes: 4096, Place: place})
		if err != nil {
			t.Fatal(err)
		}
		ws := make([][]byte, 6)
		for i := range ws {
			ws[i] = make([]byte, 4096-256*i)
		}
		res := make([]byte, 512)
		for frame := 0; frame < 4; frame++ {
			for i, w := range ws {
				p, slot, err := s.get(fmt.Sprintf("s%d", i), w)
				if err != nil {
					t.Fatal(err)
				}
				if slot < 0 {
					t.Fatalf("streamed weight %d was not staged", i)
				}
				f.use(p, keyOf(w))
				if err := s.release(slot); err != nil {
					t.Fatal(err)
				}
				rp, rs, err := s.get("resident", res)
				if err != nil || rs != -1 {
					t.Fatal(err, rs)
				}
				f.use(rp, keyOf(res))
			}
		}
		if err := f.drain(); err != nil {
			t.Fatalf("%d slots: %v", slots, err)
		}
		if s.stages != 24 || s.uploads != 1 || a.used > a.limit {
			t.Fatalf("%d slots: %d stages, %d uploads, %d of %d bytes", slots, s.stages, s.uploads, a.used, a.limit)
		}
		if f.registers == 0 || s.pinFailed != nil {
			t.Fatalf("%d host registrations, %v", f.registers, s.pinFailed)
		}
	}
}

// Without the release events the same sequence reads stale slots: the
// check above would catch a missing event.
func TestStagingWithoutReleaseIsStale(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 64<<10)
	s, err := newWeightStore(f, a, storeOptions{Stream: true, Slots: 2, SlotBytes: 4096, Place: func(string) offload.Placement { return offload.Streamed }})
	if err != nil {
		t.Fatal(err)
	}
	// Let the compute stream block first so that the copies race ahead.
	gate, _ := f.newEvent()
	f.wait(false, gate)
	for i := 0; i < 4; i++ {
		w := make([]byte, 1000+i)
		p, _, err := s.get("s", w)
		if err != nil {
			t.Fatal(err)
		}
		f.use(p, keyOf(w))
		// No release: the slot's reuse does not wait for this use.
	}
	_ = f.record(gate, true)
	if err := f.drain(); !errors.Is(err, errStale) {
		t.Fatalf("without release events: %v, want a stale read", err)
	}
}

// Past the resident budget, streaming takes over instead of failing; a
// weight larger than a slot grows it after the slot's last use.
func TestStreamingFallbackAndGrowth(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 64<<10)
	s, err := newWeightStore(f, a, storeOptions{Stream: true, ResidentLimit: 8 << 10, SlotBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	var staged int
	for i := 0; i < 6; i++ {
		w := make([]byte, 3000+512*i)
		p, slot, err := s.get(fmt.Sprintf("w%d", i), w)
		if err != nil {
			t.Fatal(err)
		}
		if slot >= 0 {
			staged++
		}
		f.use(p, keyOf(w))
		if err := s.release(slot); err != nil {
			t.Fatal(err)
		}
	}
	if s.residentBytes > 8<<10 || staged != 4 || s.uploads != 2 {
		t.Fatalf("%d resident bytes, %d staged, %d uploads", s.residentBytes, staged, s.uploads)
	}
	if f.syncs == 0 {
		t.Fatal("a slot grew without waiting for its last use")
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

// Neighbouring weights of one checkpoint share boundary pages: each page
// is registered once, and every streamed weight's bytes end up pinned.
func TestPinSharedPages(t *testing.T) {
	f := newFake()
	a := newAllocator(f, 1<<20)
	s, err := newWeightStore(f, a, storeOptions{Stream: true, SlotBytes: 64 << 10, Place: func(string) offload.Placement { return offload.Streamed }})
	if err != nil {
		t.Fatal(err)
	}
	page := int(s.pageSize)
	file := make([]byte, 16*page)
	base := (page - int(uintptr(unsafe.Pointer(&file[0])))%page) % page
	// Weights straddling pages, used out of order, one used twice.
	cuts := []int{base + 100, base + page + 7, base + 3*page, base + 5*page + 1, base + 9*page + 300, base + 12*page}
	order := []int{2, 0, 4, 1, 3, 2}
	for _, i := range order {
		w := file[cuts[i]:cuts[i+1]]
		p, slot, err := s.get(fmt.Sprintf("w%d", i), w)
		if err != nil {
			t.Fatal(err)
		}
		f.use(p, keyOf(w))
		if err := s.release(slot); err != nil {
			t.Fatal(err)
		}
	}
	if s.pinFailed != nil {
		t.Fatalf("pinning failed: %v", s.pinFailed)
	}
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := uintptr(unsafe.Pointer(&file[cuts[i]])), uintptr(unsafe.Pointer(&file[cuts[i+1]-1]))+1
		if len(uncovered(s.pinned, span{lo, hi})) != 0 {
			t.Fatalf("weight %d is not wholly pinned", i)
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

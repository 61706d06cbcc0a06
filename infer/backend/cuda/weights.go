package cuda

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/offload"
)

// weightStore gives the device address of a weight without Dev: resident
// weights are uploaded once into device memory (a cache keyed by the host
// bytes' start and length); streamed weights (an offload plan's, or what
// no longer fits when streaming is allowed) are copied from pinned host
// memory into one of a few staging slots on the copy stream, ordered by
// events: the compute stream waits for the slot's copy, and the next copy
// into the slot waits for the compute that read it. The host queues all of
// this asynchronously and runs ahead of the GPU, so the copy of the next
// streamed weight overlaps the compute of the current one.
type weightStore struct {
	d   device
	mem *allocator

	resident map[hostKey]cu.DevPtr
	// residentLimit bounds the bytes of resident weights (the rest of the
	// allocator's limit is left to activations, KV and staging) when
	// streaming is allowed; without streaming a weight that does not fit
	// is an error.
	residentLimit int64
	residentBytes int64
	stream        bool
	// place says where a weight belongs by name (nil: resident).
	place func(name string) offload.Placement

	slots     []slot
	next      int
	pinned    []span // registered host pages, sorted, disjoint
	pinFailed error
	pageSize  uintptr

	// Statistics.
	uploads, stages   int
	uploaded, staged  int64
	stallsOnSlotReuse int
}

// slot is a staging buffer for streamed weights.
type slot struct {
	p        cu.DevPtr
	size     int64
	ready    event // recorded on the copy stream after its copy
	released event // recorded on the compute stream after the last use
	used     bool  // released has a record
	key      hostKey
}

// storeOptions configure a weightStore.
type storeOptions struct {
	Stream        bool
	ResidentLimit int64 // 0: no limit of its own (the allocator's)
	Slots         int   // staging slots (default 2)
	SlotBytes     int64 // initial size of each slot (grown on demand)
	Place         func(name string) offload.Placement
}

func newWeightStore(d device, mem *allocator, o storeOptions) (*weightStore, error) {
	s := &weightStore{d: d, mem: mem, resident: map[hostKey]cu.DevPtr{}, stream: o.Stream, place: o.Place, pageSize: uintptr(os.Getpagesize())}
	s.residentLimit = o.ResidentLimit
	if s.residentLimit <= 0 {
		s.residentLimit = mem.limit
	}
	if o.Stream || o.Place != nil {
		n := max(o.Slots, 2)
		for i := 0; i < n; i++ {
			s.slots = append(s.slots, slot{})
			if o.SlotBytes > 0 {
				p, err := mem.alloc(fmt.Sprintf("staging slot %d", i), o.SlotBytes)
				if err != nil {
					return nil, err
				}
				s.slots[i].p, s.slots[i].size = p, o.SlotBytes
			}
		}
	}
	return s, nil
}

// placement of a weight by name.
func (s *weightStore) placement(name string) offload.Placement {
	if s.place == nil {
		return offload.Resident
	}
	return s.place(name)
}

// get returns the device address of host bytes b (weight name) and, for a
// staged weight, the slot to release after the kernels that read it were
// queued (release; -1 when resident).
func (s *weightStore) get(name string, b []byte) (cu.DevPtr, int, error) {
	k := keyOf(b)
	if p, ok := s.resident[k]; ok {
		return p, -1, nil
	}
	if s.placement(name) == offload.Resident {
		n := int64(len(b))
		if s.residentBytes+n <= s.residentLimit {
			p, err := s.mem.alloc("weight "+name, n)
			if err == nil {
				if err := s.d.copyAsync(p, b, false); err != nil {
					return 0, -1, err
				}
				s.resident[k] = p
				s.residentBytes += n
				s.uploads++
				s.uploaded += n
				return p, -1, nil
			}
			if !s.stream || !errors.Is(err, offload.ErrOutOfMemory) {
				return 0, -1, err
			}
		} else if !s.stream {
			return 0, -1, &offload.OOMError{Name: "weight " + name, Want: n, Used: s.residentBytes, Budget: s.residentLimit}
		}
	}
	if len(s.slots) == 0 {
		return 0, -1, fmt.Errorf("cuda: weight %s is streamed but the backend has no staging slots", name)
	}
	return s.stage(name, b)
}

// getResident is get for small weights (norm scales, layer scales, biases):
// always resident, whatever the placement of their unit, within the
// allocator's limit.
func (s *weightStore) getResident(name string, b []byte) (cu.DevPtr, error) {
	k := keyOf(b)
	if p, ok := s.resident[k]; ok {
		return p, nil
	}
	p, err := s.mem.alloc("weight "+name, int64(len(b)))
	if err != nil {
		return 0, err
	}
	if err := s.d.copyAsync(p, b, false); err != nil {
		return 0, err
	}
	s.resident[k] = p
	s.residentBytes += int64(len(b))
	s.uploads++
	s.uploaded += int64(len(b))
	return p, nil
}

// stage copies b into the next slot on the copy stream.
func (s *weightStore) stage(name string, b []byte) (cu.DevPtr, int, error) {
	i := s.next
	s.next = (s.next + 1) % len(s.slots)
	sl := &s.slots[i]
	n := int64(len(b))
	if sl.size < n {
		// Grow: the old buffer may still be read by queued kernels.
		if sl.used {
			if err := s.d.syncEvent(sl.released); err != nil {
				return 0, -1, err
			}
		}
		if sl.p != 0 {
			if err := s.mem.free(sl.p); err != nil {
				return 0, -1, err
			}
			sl.p, sl.size = 0, 0
		}
		p, err := s.mem.alloc(fmt.Sprintf("staging slot %d", i), n)
		if err != nil {
			return 0, -1, err
		}
		sl.p, sl.size, sl.used = p, n, false
	}
	k := keyOf(b)
	if s.pinFailed == nil {
		s.pin(b)
	}
	if sl.ready == nil {
		var err error
		if sl.ready, err = s.d.newEvent(); err != nil {
			return 0, -1, err
		}
		if sl.released, err = s.d.newEvent(); err != nil {
			return 0, -1, err
		}
	}
	if sl.used {
		// The copy must not overwrite the slot before the compute that
		// read it has run.
		if err := s.d.wait(true, sl.released); err != nil {
			return 0, -1, err
		}
		s.stallsOnSlotReuse++
	}
	if err := s.d.copyAsync(sl.p, b, true); err != nil {
		return 0, -1, err
	}
	if err := s.d.record(sl.ready, true); err != nil {
		return 0, -1, err
	}
	if err := s.d.wait(false, sl.ready); err != nil {
		return 0, -1, err
	}
	sl.key = k
	s.stages++
	s.staged += n
	return sl.p, i, nil
}

// release records, on the compute stream, that the kernels reading slot i
// have been queued: the slot's next copy waits for them.
func (s *weightStore) release(i int) error {
	if i < 0 {
		return nil
	}
	if err := s.d.record(s.slots[i].released, false); err != nil {
		return err
	}
	s.slots[i].used = true
	return nil
}

// span is a range of host addresses [s, e).
type span struct{ s, e uintptr }

// pin registers the pages of b not registered yet. The driver registers
// whole pages and refuses a range overlapping a registered one, and
// neighbouring weights of a checkpoint share their boundary pages: so b's
// pages are rounded outwards (they lie in the same mapping or allocation
// as b) and only the uncovered ones are registered. A failure stops
// pinning (copies from unpinned memory are staged by the driver: slower,
// as correct).
func (s *weightStore) pin(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	ps := start &^ (s.pageSize - 1)
	pe := (start + uintptr(len(b)) + s.pageSize - 1) &^ (s.pageSize - 1)
	for _, r := range uncovered(s.pinned, span{ps, pe}) {
		// Addresses only: the rounded pages reach past b's object, where
		// no Go slice or pointer may point.
		if err := s.d.register(r.s, r.e-r.s); err != nil {
			s.pinFailed = err
			return
		}
		s.pinned = insertSpan(s.pinned, r)
	}
}

// uncovered is the parts of r that no span of set (sorted, disjoint)
// covers.
func uncovered(set []span, r span) []span {
	var out []span
	at := r.s
	for _, x := range set {
		if x.e <= at || x.s >= r.e {
			continue
		}
		if x.s > at {
			out = append(out, span{at, x.s})
		}
		at = max(at, x.e)
	}
	if at < r.e {
		out = append(out, span{at, r.e})
	}
	return out
}

// insertSpan adds r (disjoint from set) keeping set sorted.
func insertSpan(set []span, r span) []span {
	i := sort.Search(len(set), func(i int) bool { return set[i].s >= r.e })
	set = append(set, span{})
	copy(set[i+1:], set[i:])
	set[i] = r
	return set
}

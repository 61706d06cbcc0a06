package cuda

import (
	"os"
	"sort"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
)

// residentCache gives the device address of a weight bound without Dev
// (the model's own mapped weights, Mimi's transformers, vectors): its bytes
// are uploaded once into device memory and kept for the backend's life,
// keyed by the host bytes' start and length. This is memory management, not
// streaming: a weight an offload plan streams comes bound to the offload
// runtime's device memory (Weight.Dev), and the runtime alone copies,
// stages and fences (offload.Runtime on OffloadDevice).
type residentCache struct {
	d   device
	mem *allocator

	resident map[hostKey]cu.DevPtr
	bytes    int64
	uploads  int

	// Host pages pinned for asynchronous copies (OffloadDevice.CopyAsync
	// of the units' packed bytes).
	pinned    []span // registered host pages, sorted, disjoint
	pinFailed error
	pageSize  uintptr
}

func newResidentCache(d device, mem *allocator) *residentCache {
	return &residentCache{d: d, mem: mem, resident: map[hostKey]cu.DevPtr{}, pageSize: uintptr(os.Getpagesize())}
}

// get returns the device address of host bytes b (weight name), uploading
// them on first use; past the allocator's limit it is an out-of-memory
// error (*offload.OOMError).
func (s *residentCache) get(name string, b []byte) (cu.DevPtr, error) {
	k := keyOf(b)
	if p, ok := s.resident[k]; ok {
		return p, nil
	}
	p, err := s.mem.alloc("weight "+name, int64(len(b)))
	if err != nil {
		return 0, err
	}
	if err := s.d.copyAsync(p, b); err != nil {
		return 0, err
	}
	s.resident[k] = p
	s.bytes += int64(len(b))
	s.uploads++
	return p, nil
}

// span is a range of host addresses [s, e).
type span struct{ s, e uintptr }

// pin registers the pages of b not registered yet. The driver registers
// whole pages and refuses a range overlapping a registered one, and
// neighbouring units of a packing (or weights of a checkpoint) share their
// boundary pages: so b's pages are rounded outwards (they lie in the same
// mapping or allocation as b) and only the uncovered ones are registered.
// A failure stops pinning (copies from unpinned memory are staged by the
// driver: slower, as correct).
func (s *residentCache) pin(b []byte) {
	if len(b) == 0 || s.pinFailed != nil {
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

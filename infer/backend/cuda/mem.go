package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/offload"
)

// device is the part of the driver the host side of the backend uses
// (memory, copies on the compute stream, events); *gpu implements it with
// the driver, and the tests with fakes that record every call, so that
// accounting, the resident cache and stream/event ordering are tested
// without a GPU.
type device interface {
	alloc(n int64) (cu.DevPtr, error)
	free(p cu.DevPtr) error
	// copyAsync queues a host-to-device copy on the compute stream.
	copyAsync(dst cu.DevPtr, src []byte) error
	// newEvent makes an event (offload.Device.NewFence); syncEvent blocks
	// the host until its last record has passed (offload.Device.Wait).
	newEvent() (event, error)
	syncEvent(e event) error
	// register pins host memory (best effort: an error means copies from
	// it are staged by the driver).
	register(addr, n uintptr) error // pin host pages [addr, addr+n)
}

// event is a recorded point of a stream.
type event interface{}

// allocator accounts every byte the backend allocates on the device against
// a limit (--gpu-memory, else the free memory at start): an allocation
// past it fails with an *offload.OOMError and allocates nothing, so an
// 8 GiB GPU can be emulated on a bigger one.
type allocator struct {
	d           device
	limit       int64
	used, peak  int64
	sizes       map[cu.DevPtr]int64
	allocations int

	// Reservations (offload.Device.Reserve: the plan's KV cache and
	// workspace) count in used; the backend's own buffers (allocWork) are
	// carved from them first, so the memory the plan reserved for them is
	// not counted twice.
	reserved map[string]int64
	pool     int64 // reserved bytes not yet carved
	carved   map[cu.DevPtr]bool

	// Buffers whose Go owners were collected (finalizers, any goroutine):
	// freed at the next allocation, once the queued work is done (sync).
	mu    sync.Mutex
	dead  []cu.DevPtr
	sync  func() error
	reaps int
}

func newAllocator(d device, limit int64) *allocator {
	return &allocator{d: d, limit: limit, sizes: map[cu.DevPtr]int64{}, reserved: map[string]int64{}, carved: map[cu.DevPtr]bool{}}
}

// granule is the rounding of every allocation (the driver's alignment).
const granule = 256

// release queues p to be freed (safe from any goroutine: finalizers).
func (a *allocator) release(p cu.DevPtr) {
	a.mu.Lock()
	a.dead = append(a.dead, p)
	a.mu.Unlock()
}

// reap frees what release queued, after the queued work that may still
// read it has run.
func (a *allocator) reap() error {
	a.mu.Lock()
	dead := a.dead
	a.dead = nil
	a.mu.Unlock()
	if len(dead) == 0 {
		return nil
	}
	if a.sync != nil {
		if err := a.sync(); err != nil {
			return err
		}
	}
	a.reaps++
	var errs []error
	for _, p := range dead {
		errs = append(errs, a.free(p))
	}
	return errors.Join(errs...)
}

func (a *allocator) alloc(name string, n int64) (cu.DevPtr, error) {
	if n < 0 {
		return 0, fmt.Errorf("cuda: %s: negative size %d", name, n)
	}
	if err := a.reap(); err != nil {
		return 0, err
	}
	n = (max(n, 1) + granule - 1) / granule * granule
	if a.used+n > a.limit {
		// Buffers of finished conversations may be garbage not yet
		// collected: collect, let the finalizers run, reap, retry once.
		runtime.GC()
		for i := 0; i < 100 && a.pending() == 0; i++ {
			runtime.Gosched()
		}
		if err := a.reap(); err != nil {
			return 0, err
		}
	}
	if a.used+n > a.limit {
		return 0, &offload.OOMError{Name: name, Want: n, Used: a.used, Budget: a.limit}
	}
	p, err := a.d.alloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s (%s): %w", name, offload.FormatSize(n), err)
	}
	a.used += n
	a.peak = max(a.peak, a.used)
	a.sizes[p] = n
	a.allocations++
	return p, nil
}

func (a *allocator) free(p cu.DevPtr) error {
	n, ok := a.sizes[p]
	if !ok {
		return fmt.Errorf("cuda: free of %#x, which the backend did not allocate", uint64(p))
	}
	delete(a.sizes, p)
	if a.carved[p] {
		delete(a.carved, p)
		a.pool += n // back into the reservation it was carved from
	} else {
		a.used -= n
	}
	return a.d.free(p)
}

// allocWork allocates one of the backend's own buffers (activations, KV
// rings, the arena, vector weights), from the reservations first.
func (a *allocator) allocWork(name string, n int64) (cu.DevPtr, error) {
	g := (max(n, 1) + granule - 1) / granule * granule
	if g > a.pool {
		return a.alloc(name, n)
	}
	if err := a.reap(); err != nil {
		return 0, err
	}
	p, err := a.d.alloc(g)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s (%s): %w", name, offload.FormatSize(g), err)
	}
	a.pool -= g
	a.sizes[p] = g
	a.carved[p] = true
	a.allocations++
	return p, nil
}

// reserve accounts n bytes under name without backing them.
func (a *allocator) reserve(name string, n int64) error {
	if n < 0 {
		return fmt.Errorf("cuda: reservation %s: negative size %d", name, n)
	}
	if _, ok := a.reserved[name]; ok {
		return fmt.Errorf("cuda: reservation %s exists", name)
	}
	if a.used+n > a.limit {
		return &offload.OOMError{Name: name, Want: n, Used: a.used, Budget: a.limit}
	}
	a.reserved[name] = n
	a.used += n
	a.pool += n
	a.peak = max(a.peak, a.used)
	return nil
}

// unreserve returns a reservation; buffers carved from it and still live
// are counted as plain allocations from then on.
func (a *allocator) unreserve(name string) {
	n, ok := a.reserved[name]
	if !ok {
		return
	}
	delete(a.reserved, name)
	a.used -= n
	a.pool -= n
	if a.pool < 0 {
		// Carved bytes outlive their reservation.
		a.used -= a.pool
		a.pool = 0
		for p := range a.carved {
			delete(a.carved, p)
		}
	}
}

func (a *allocator) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.dead)
}

// freeAll frees every allocation (Close).
func (a *allocator) freeAll() error {
	a.mu.Lock()
	a.dead = nil // freed below with everything else
	a.mu.Unlock()
	var errs []error
	for p := range a.sizes {
		errs = append(errs, a.free(p))
	}
	return errors.Join(errs...)
}

// hostKey identifies a weight's host bytes: the start of its slice and its
// length. The checkpoint is mapped read-only for the life of the process,
// so equal keys are equal bytes.
type hostKey struct {
	p uintptr
	n int
}

func keyOf(b []byte) hostKey {
	if len(b) == 0 {
		return hostKey{}
	}
	return hostKey{uintptr(unsafe.Pointer(&b[0])), len(b)}
}

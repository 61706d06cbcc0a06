package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
)

// NewDry is a CUDA backend on a driver that runs nothing, for tests of the
// backend's and the models' call patterns on machines without a GPU:
// memory is accounted (addresses only), every launch is checked against
// its kernel's signature and the launch limits, and downloads read zeros.
// Values are meaningless; shapes, views, placement and the host's waits
// (DryStats.HostWaits) are the real ones.
func NewDry(o Options, memory int64) (*CUDA, *DryStats, error) {
	d := &dryDriver{next: 1 << 30, stats: &DryStats{Launches: map[string]int{}}}
	c := newOn(o, d)
	if err := c.start(memory); err != nil {
		return nil, nil, err
	}
	return c, d.stats, nil
}

// newOn is a backend on a driver that is not the GPU's (the dry driver,
// the tests' fakes), before start.
func newOn(o Options, d driver) *CUDA {
	return &CUDA{o: o, drv: d, name: "dry run", major: 9, bf16: o.ComputeDType == "bf16", cpuAct: map[[3]int]backend.Acts{}, attendShared: maxAttendShared}
}

// DryStats counts what a dry backend was asked to do.
type DryStats struct {
	mu       sync.Mutex
	Launches map[string]int
	Copies   int // host→device copies
	// Downloads are device→host copies; Syncs the times the host waited
	// for the device (a stream synchronization or an event's): each costs
	// a round trip on a GPU, so the models batch them (a download of
	// every conversation's logits at once).
	Downloads, Syncs int
}

// Count is the number of launches of kernel name.
func (s *DryStats) Count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Launches[name]
}

// HostWaits is the number of device→host copies and host synchronizations
// so far.
func (s *DryStats) HostWaits() (downloads, syncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Downloads, s.Syncs
}

func (s *DryStats) add(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

type dryDriver struct {
	next  cu.DevPtr
	stats *DryStats
}

func (d *dryDriver) alloc(n int64) (cu.DevPtr, error) {
	p := d.next
	d.next += cu.DevPtr((n + 255) &^ 255)
	return p, nil
}
func (d *dryDriver) free(cu.DevPtr) error { return nil }
func (d *dryDriver) copyAsync(dst cu.DevPtr, src []byte) error {
	if dst == 0 {
		return fmt.Errorf("dry: copy to a null address")
	}
	d.stats.add(&d.stats.Copies)
	return nil
}
func (d *dryDriver) newEvent() (event, error)        { return new(int), nil }
func (d *dryDriver) syncEvent(event) error           { d.stats.add(&d.stats.Syncs); return nil }
func (d *dryDriver) register(uintptr, uintptr) error { return nil }
func (d *dryDriver) setCurrent() error               { return nil }
func (d *dryDriver) sync() error                     { d.stats.add(&d.stats.Syncs); return nil }
func (d *dryDriver) memset(cu.DevPtr, int64) error   { return nil }
func (d *dryDriver) copyDtoD(dst, src cu.DevPtr, n int64) error {
	if dst == 0 || src == 0 || n < 0 {
		return fmt.Errorf("dry: device copy of %d bytes %#x → %#x", n, uint64(src), uint64(dst))
	}
	return nil
}
func (d *dryDriver) download(dst []byte, src cu.DevPtr) error {
	if src == 0 {
		return fmt.Errorf("dry: download from a null address")
	}
	d.stats.add(&d.stats.Downloads)
	clear(dst)
	return nil
}
func (d *dryDriver) pin([]byte) error   { return nil }
func (d *dryDriver) unpin([]byte) error { return nil }

// launch checks the launch limits (signatures are checked by CUDA.launch).
func (d *dryDriver) launch(name string, grid, block [3]uint32, shared uint32, params unsafe.Pointer) error {
	threads := block[0] * block[1] * block[2]
	if threads == 0 || threads > 1024 || block[0]%32 != 0 {
		return fmt.Errorf("dry: %s: block %v", name, block)
	}
	if grid[0] > 1<<31-1 || grid[1] > 65535 || grid[2] > 65535 {
		return fmt.Errorf("dry: %s: grid %v", name, grid)
	}
	if shared > maxAttendShared {
		return fmt.Errorf("dry: %s: %d bytes of shared memory", name, shared)
	}
	if params == nil {
		return fmt.Errorf("dry: %s: no parameters", name)
	}
	d.stats.mu.Lock()
	d.stats.Launches[name]++
	d.stats.mu.Unlock()
	return nil
}

func (d *dryDriver) newStream() (stream, error)   { return new(int), nil }
func (d *dryDriver) destroyStream(stream) error   { return nil }
func (d *dryDriver) destroyEvent(event) error     { return nil }
func (d *dryDriver) computeStream() stream        { return d }
func (d *dryDriver) setCompute(stream) error      { return nil }
func (d *dryDriver) recordOn(event, stream) error { return nil }
func (d *dryDriver) waitOn(stream, event) error   { return nil }
func (d *dryDriver) copyOn(s stream, dst cu.DevPtr, src []byte) error {
	return d.copyAsync(dst, src)
}

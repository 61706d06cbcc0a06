package cuda

import (
	"errors"
	"fmt"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/offload"
)

// offloadDevice is the backend's GPU as an offload.Device, so that
// offload's Runtime executes a plan on it (lm.Placed): its allocations and
// reservations go through the backend's allocator (one limit for all the
// device memory pp-offline takes), its copies come from host memory pinned
// on first use, its streams and fences are the driver's. The stream the
// runtime computes on becomes the backend's compute stream
// (UseRuntimeStream), so the runtime's fences order the backend's kernels.
type offloadDevice struct {
	c *CUDA
}

// OffloadDevice is c's GPU as an offload.Device.
func (c *CUDA) OffloadDevice() offload.Device { return &offloadDevice{c} }

// UseRuntimeStream makes s (offload.Runtime.ComputeStream) the stream
// every op is queued on, after what was queued so far.
func (c *CUDA) UseRuntimeStream(s offload.Stream) error {
	defer c.enter()()
	return c.drv.setCompute(s)
}

// errClosed is what the device answers once its backend is closed (a
// runtime closed after the backend: its buffers are already freed).
var errClosed = errors.New("cuda: the backend is closed")

func (d *offloadDevice) Budget() int64 { return d.c.mem.limit }
func (d *offloadDevice) Used() int64   { return d.c.mem.used }
func (d *offloadDevice) Peak() int64   { return d.c.mem.peak }

func (d *offloadDevice) Alloc(name string, n int64) (offload.Buffer, error) {
	if d.c.closed {
		return nil, errClosed
	}
	defer d.c.enter()()
	p, err := d.c.mem.alloc(name, n)
	if err != nil {
		return nil, err
	}
	return &Buffer{Ptr: p, N: n}, nil
}

func (d *offloadDevice) buf(b offload.Buffer) (*Buffer, error) {
	x, ok := b.(*Buffer)
	if !ok || x == nil {
		return nil, fmt.Errorf("cuda: a %T is not this device's buffer", b)
	}
	return x, nil
}

func (d *offloadDevice) Free(b offload.Buffer) error {
	x, err := d.buf(b)
	if err != nil {
		return err
	}
	if d.c.closed {
		return nil // freed with the backend
	}
	defer d.c.enter()()
	return d.c.mem.free(x.Ptr)
}

func (d *offloadDevice) Reserve(name string, n int64) error {
	if d.c.closed {
		return errClosed
	}
	return d.c.mem.reserve(name, n)
}

func (d *offloadDevice) Unreserve(name string) {
	if !d.c.closed {
		d.c.mem.unreserve(name)
	}
}

func (d *offloadDevice) NewStream() (offload.Stream, error) {
	if d.c.closed {
		return nil, errClosed
	}
	defer d.c.enter()()
	return d.c.drv.newStream()
}

func (d *offloadDevice) DestroyStream(s offload.Stream) error {
	if d.c.closed {
		return nil
	}
	defer d.c.enter()()
	if s == d.c.drv.computeStream() {
		return nil // the backend's compute stream now: it outlives the runtime
	}
	return d.c.drv.destroyStream(s)
}

func (d *offloadDevice) NewFence() (offload.Fence, error) {
	if d.c.closed {
		return nil, errClosed
	}
	defer d.c.enter()()
	return d.c.drv.newEvent()
}

func (d *offloadDevice) DestroyFence(f offload.Fence) error {
	if d.c.closed {
		return nil
	}
	defer d.c.enter()()
	return d.c.drv.destroyEvent(f)
}

// CopyAsync queues src's copy into dst at off on s. src (a unit's packed
// bytes, unchanged for the runtime's life) is pinned on first use so that
// the copy is asynchronous.
func (d *offloadDevice) CopyAsync(s offload.Stream, dst offload.Buffer, off int64, src []byte) error {
	x, err := d.buf(dst)
	if err != nil {
		return err
	}
	if off < 0 || off+int64(len(src)) > x.N {
		return fmt.Errorf("cuda: copy of %d bytes at %d into a buffer of %d", len(src), off, x.N)
	}
	if d.c.closed {
		return errClosed
	}
	defer d.c.enter()()
	d.c.rc.pin(src)
	return d.c.drv.copyOn(s, x.Ptr+cu.DevPtr(off), src)
}

func (d *offloadDevice) Record(f offload.Fence, s offload.Stream) error {
	if d.c.closed {
		return errClosed
	}
	defer d.c.enter()()
	return d.c.drv.recordOn(f, s)
}

func (d *offloadDevice) Wait(f offload.Fence) error {
	if d.c.closed {
		return errClosed
	}
	defer d.c.enter()()
	return d.c.drv.syncEvent(f)
}

func (d *offloadDevice) StreamWait(s offload.Stream, f offload.Fence) error {
	if d.c.closed {
		return errClosed
	}
	defer d.c.enter()()
	return d.c.drv.waitOn(s, f)
}

var _ offload.Device = (*offloadDevice)(nil)

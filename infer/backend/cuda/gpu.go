package cuda

import (
	"fmt"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
)

// driver is everything the backend asks of the GPU: device (memory,
// copies, events) and the compute stream's other work. *gpu implements it
// with the driver API; the tests run every op of the backend on a fake
// that checks each launch against the kernel signatures.
type driver interface {
	device
	setCurrent() error
	sync() error // the compute stream
	memset(p cu.DevPtr, n int64) error
	copyDtoD(dst, src cu.DevPtr, n int64) error
	download(dst []byte, src cu.DevPtr) error // queued on the compute stream
	pin(b []byte) error                       // read-write (the upload arena)
	unpin(b []byte) error
	launch(name string, grid, block [3]uint32, shared uint32, params unsafe.Pointer) error

	// Streams for offload.Device: a new one, the compute stream, making s
	// the compute stream (after what the old one queued), and work on a
	// given stream.
	newStream() (stream, error)
	destroyStream(s stream) error
	destroyEvent(e event) error
	computeStream() stream
	setCompute(s stream) error
	copyOn(s stream, dst cu.DevPtr, src []byte) error
	recordOn(e event, s stream) error
	waitOn(s stream, e event) error
}

// stream is a driver's stream handle.
type stream any

// gpu is the driver side: one context, the compute stream and the loaded
// kernels. (Copy streams are offload.Runtime's: OffloadDevice.NewStream.)
type gpu struct {
	ctx     cu.Context
	compute cu.Stream
	events  []cu.Event // every event the backend created
	fn      map[string]cu.Function
}

func (g *gpu) setCurrent() error { return cu.SetCurrent(g.ctx) }
func (g *gpu) sync() error       { return g.compute.Synchronize() }
func (g *gpu) memset(p cu.DevPtr, n int64) error {
	return cu.MemsetAsync(p, 0, n, g.compute)
}
func (g *gpu) copyDtoD(dst, src cu.DevPtr, n int64) error {
	return cu.CopyDtoDAsync(dst, src, n, g.compute)
}
func (g *gpu) download(dst []byte, src cu.DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return cu.CopyDtoHAsync(unsafe.Pointer(&dst[0]), src, int64(len(dst)), g.compute)
}
func (g *gpu) pin(b []byte) error   { return cu.HostRegister(b, false) }
func (g *gpu) unpin(b []byte) error { return cu.HostUnregister(b) }
func (g *gpu) launch(name string, grid, block [3]uint32, shared uint32, params unsafe.Pointer) error {
	f, ok := g.fn[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %s", name)
	}
	return f.Launch(grid, block, shared, g.compute, params)
}

func (g *gpu) alloc(n int64) (cu.DevPtr, error) { return cu.MemAlloc(n) }
func (g *gpu) free(p cu.DevPtr) error           { return cu.MemFree(p) }

func (g *gpu) copyAsync(dst cu.DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return cu.CopyHtoDAsync(dst, unsafe.Pointer(&src[0]), int64(len(src)), g.compute)
}

func (g *gpu) newEvent() (event, error) {
	e, err := cu.NewEvent()
	if err != nil {
		return nil, err
	}
	g.events = append(g.events, e)
	return e, nil
}

func (g *gpu) syncEvent(e event) error {
	ev, ok := e.(cu.Event)
	if !ok {
		return fmt.Errorf("cuda: sync on a foreign event %T", e)
	}
	return ev.Synchronize()
}

// register pins the host range [addr, addr+n) read-only for the device (a
// read-only mapping needs it), else read-write (devices without read-only
// registration).
func (g *gpu) register(addr, n uintptr) error {
	if err := cu.HostRegisterRange(addr, n, true); err != nil {
		if err2 := cu.HostRegisterRange(addr, n, false); err2 != nil {
			return fmt.Errorf("%v; read-write: %v", err, err2)
		}
	}
	return nil
}

func (g *gpu) newStream() (stream, error) { return cu.NewStream() }
func (g *gpu) destroyStream(s stream) error {
	cs, ok := s.(cu.Stream)
	if !ok {
		return fmt.Errorf("cuda: destroy of a foreign stream %T", s)
	}
	if cs == g.compute {
		return nil // the backend's own: destroyed with the context
	}
	return cs.Destroy()
}
func (g *gpu) destroyEvent(e event) error {
	ev, ok := e.(cu.Event)
	if !ok {
		return fmt.Errorf("cuda: destroy of a foreign event %T", e)
	}
	return ev.Destroy()
}
func (g *gpu) computeStream() stream { return g.compute }
func (g *gpu) setCompute(s stream) error {
	cs, ok := s.(cu.Stream)
	if !ok {
		return fmt.Errorf("cuda: a foreign stream %T", s)
	}
	if err := g.compute.Synchronize(); err != nil {
		return err
	}
	g.compute = cs
	return nil
}
func (g *gpu) copyOn(s stream, dst cu.DevPtr, src []byte) error {
	cs, ok := s.(cu.Stream)
	if !ok {
		return fmt.Errorf("cuda: a foreign stream %T", s)
	}
	if len(src) == 0 {
		return nil
	}
	return cu.CopyHtoDAsync(dst, unsafe.Pointer(&src[0]), int64(len(src)), cs)
}

// handles are e and s as the driver's, or an error for foreign ones.
func handles(e event, s stream) (cu.Event, cu.Stream, error) {
	ev, ok1 := e.(cu.Event)
	cs, ok2 := s.(cu.Stream)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("cuda: event %T and stream %T are not the driver's", e, s)
	}
	return ev, cs, nil
}

func (g *gpu) recordOn(e event, s stream) error {
	ev, cs, err := handles(e, s)
	if err != nil {
		return err
	}
	return ev.Record(cs)
}

func (g *gpu) waitOn(s stream, e event) error {
	ev, cs, err := handles(e, s)
	if err != nil {
		return err
	}
	return cs.Wait(ev)
}

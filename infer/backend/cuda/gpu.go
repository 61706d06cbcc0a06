package cuda

import (
	"fmt"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
)

// gpu is the driver side of device: one context, a compute stream and a
// copy stream.
type gpu struct {
	ctx             cu.Context
	compute, copier cu.Stream
	events          []cu.Event // every event the backend created
}

func (g *gpu) alloc(n int64) (cu.DevPtr, error) { return cu.MemAlloc(n) }
func (g *gpu) free(p cu.DevPtr) error           { return cu.MemFree(p) }

func (g *gpu) stream(copy bool) cu.Stream {
	if copy {
		return g.copier
	}
	return g.compute
}

func (g *gpu) copyAsync(dst cu.DevPtr, src []byte, copy bool) error {
	if len(src) == 0 {
		return nil
	}
	return cu.CopyHtoDAsync(dst, unsafe.Pointer(&src[0]), int64(len(src)), g.stream(copy))
}

func (g *gpu) newEvent() (event, error) {
	e, err := cu.NewEvent()
	if err != nil {
		return nil, err
	}
	g.events = append(g.events, e)
	return e, nil
}

func (g *gpu) record(e event, copy bool) error {
	ev, ok := e.(cu.Event)
	if !ok {
		return fmt.Errorf("cuda: record of a foreign event %T", e)
	}
	return ev.Record(g.stream(copy))
}

func (g *gpu) wait(copy bool, e event) error {
	ev, ok := e.(cu.Event)
	if !ok {
		return fmt.Errorf("cuda: wait on a foreign event %T", e)
	}
	return g.stream(copy).Wait(ev)
}

func (g *gpu) syncEvent(e event) error {
	ev, ok := e.(cu.Event)
	if !ok {
		return fmt.Errorf("cuda: sync on a foreign event %T", e)
	}
	return ev.Synchronize()
}

// register pins b read-only for the device (a read-only mapping needs
// it), else read-write (devices without read-only registration).
func (g *gpu) register(b []byte) error {
	if err := cu.HostRegister(b, true); err != nil {
		if err2 := cu.HostRegister(b, false); err2 != nil {
			return fmt.Errorf("%v; read-write: %v", err, err2)
		}
	}
	return nil
}

package cuda

import (
	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
)

// arenaBytes is the initial size of the upload arena.
const arenaBytes = 8 << 20

// ArenaBytes is the device memory the backend takes for its upload arena
// when it starts (a planner's budget leaves it out).
const ArenaBytes = arenaBytes

// arena carries the small uploads of every op (row positions, attention
// descriptors, gathered embeddings, activations) without a host sync: a
// ring of pinned host memory mirrored by a ring of device memory at the
// same offsets. An upload copies into the next host bytes and queues their
// async copy on the compute stream, so the kernels queued after it read
// them in order. Bytes are reused only after the arena wrapped, and it
// wraps after a stream synchronisation, so a queued copy never reads
// overwritten bytes.
type arena struct {
	c       *CUDA
	host    []byte
	dev     cu.DevPtr
	head    int
	pinned  bool
	scratch []backend.Acts
	wraps   int // wraps so far (each waits for the queued work)
}

func newArena(c *CUDA, n int) (*arena, error) {
	a := &arena{c: c}
	return a, a.resize(n)
}

func (a *arena) resize(n int) error {
	if a.host != nil {
		if err := a.c.drv.sync(); err != nil {
			return err
		}
		if a.pinned {
			_ = a.c.drv.unpin(a.host)
		}
		if err := a.c.mem.free(a.dev); err != nil {
			return err
		}
	}
	p, err := a.c.mem.allocWork("upload arena", int64(n))
	if err != nil {
		return err
	}
	a.host, a.dev, a.head = make([]byte, n), p, 0
	// Pinned, the copies are truly asynchronous; pageable (registration
	// refused), the driver stages them, which is slower but as correct.
	a.pinned = a.c.drv.pin(a.host) == nil
	return nil
}

// take reserves n bytes (256-aligned) and returns their offset.
func (a *arena) take(n int) int {
	n = (n + 255) &^ 255
	if n > len(a.host) {
		fail(a.resize(max(2*len(a.host), n)))
	}
	if a.head+n > len(a.host) {
		fail(a.c.drv.sync())
		a.head = 0
		a.wraps++
	}
	off := a.head
	a.head += n
	return off
}

// reserve makes the next takes of n bytes in all come from one stretch
// (no wrap or growth between them: the addresses of one op's uploads stay
// valid together).
func (a *arena) reserve(n int) {
	if n > len(a.host) {
		fail(a.resize(max(2*len(a.host), n+4096)))
	}
	if a.head+n > len(a.host) {
		fail(a.c.drv.sync())
		a.head = 0
		a.wraps++
	}
}

// uploadTemp queues b's copy into the arena's device ring and returns its
// device address, valid for the work queued until the arena wraps.
func (a *arena) uploadTemp(b []byte) cu.DevPtr {
	off := a.take(len(b))
	copy(a.host[off:], b)
	d := a.dev + cu.DevPtr(off)
	fail(a.c.drv.copyAsync(d, a.host[off:off+len(b)]))
	return d
}

// upload queues b's copy to dst through the arena.
func (a *arena) upload(dst cu.DevPtr, b []byte) {
	off := a.take(len(b))
	copy(a.host[off:], b)
	fail(a.c.drv.copyAsync(dst, a.host[off:off+len(b)]))
}

// download copies view src into dst (row-major) once the queued work ran.
func (a *arena) download(dst []byte, src backend.Acts) {
	copy(dst, a.fetch(src, len(dst)))
}

// fetch copies the first n bytes of view src (row-major) into the arena's
// host ring, with one device→host copy and one wait for the queued work,
// and returns them (valid until the next take).
func (a *arena) fetch(src backend.Acts, n int) []byte {
	off := a.take(n)
	p := ptr(src)
	if !contiguous(src) {
		// Pack the rows into the arena's device ring first.
		a.c.copy2d(a.dev+cu.DevPtr(off), src.Cols, p, ld(src), src.Rows, src.Cols)
		p = a.dev + cu.DevPtr(off)
	}
	fail(a.c.drv.download(a.host[off:off+n], p))
	fail(a.c.drv.sync())
	return a.host[off : off+n]
}

// gather copies the blocks one after another into the arena's host ring
// (n bytes in all) and queues one copy of them to device address to (0:
// the arena's device ring): it returns where they land, valid for the
// work queued until the arena wraps.
func (a *arena) gather(blocks [][]float32, n int, to cu.DevPtr) cu.DevPtr {
	off := a.take(n)
	at := off
	for _, b := range blocks {
		at += copy(a.host[at:], f32bytes(b))
	}
	if to == 0 {
		to = a.dev + cu.DevPtr(off)
	}
	fail(a.c.drv.copyAsync(to, a.host[off:off+n]))
	return to
}

package offload

import (
	"errors"
	"fmt"
	"sync"
)

// ErrOutOfMemory is matched (errors.Is) by every allocation refused for
// lack of device memory.
var ErrOutOfMemory = errors.New("out of device memory")

// OOMError says which allocation did not fit.
type OOMError struct {
	Name               string
	Want, Used, Budget int64
}

func (e *OOMError) Error() string {
	return fmt.Sprintf("device: %s needs %s, %s of %s already used: %v",
		e.Name, FormatSize(e.Want), FormatSize(e.Used), FormatSize(e.Budget), ErrOutOfMemory)
}

// Is makes errors.Is(err, ErrOutOfMemory) true.
func (e *OOMError) Is(target error) bool { return target == ErrOutOfMemory }

// SimDevice is a simulated accelerator for machines without one: "device"
// buffers are host RAM, held under a hard byte budget. An allocation that
// would exceed the budget fails (with an *OOMError); the budget is never
// exceeded, and the high-water mark is recorded. Copies into device buffers
// really copy the bytes, asynchronously, like a DMA engine would. It is
// safe for concurrent use.
type SimDevice struct {
	mu       sync.Mutex
	budget   int64
	used     int64
	peak     int64
	reserved map[string]int64
	live     int
}

// NewSimDevice returns a simulated device with budget bytes of memory.
func NewSimDevice(budget int64) *SimDevice {
	return &SimDevice{budget: budget, reserved: map[string]int64{}}
}

// Budget is the device's memory size.
func (d *SimDevice) Budget() int64 { return d.budget }

// Used is the memory currently allocated or reserved.
func (d *SimDevice) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Peak is the most memory ever allocated or reserved at once.
func (d *SimDevice) Peak() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// Live is the number of buffers allocated and not freed.
func (d *SimDevice) Live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live
}

func (d *SimDevice) take(name string, n int64) error {
	if n < 0 {
		return fmt.Errorf("device: %s: negative size %d", name, n)
	}
	if d.used+n > d.budget {
		return &OOMError{Name: name, Want: n, Used: d.used, Budget: d.budget}
	}
	d.used += n
	d.peak = max(d.peak, d.used)
	return nil
}

// Buffer is a device allocation.
type Buffer struct {
	name  string
	data  []byte
	dev   *SimDevice
	freed bool
}

// Alloc allocates n bytes of device memory, or fails without allocating.
func (d *SimDevice) Alloc(name string, n int64) (*Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.take(name, n); err != nil {
		return nil, err
	}
	d.live++
	return &Buffer{name: name, data: make([]byte, n), dev: d}, nil
}

// Free releases a buffer; freeing twice is an error.
func (d *SimDevice) Free(b *Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b == nil || b.dev != d {
		return fmt.Errorf("device: freeing a buffer of another device")
	}
	if b.freed {
		return fmt.Errorf("device: %s freed twice", b.name)
	}
	b.freed = true
	d.used -= int64(len(b.data))
	d.live--
	b.data = nil
	return nil
}

// Reserve accounts n bytes under name without backing them (memory the
// executor manages itself: KV cache, activations, workspaces).
func (d *SimDevice) Reserve(name string, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.reserved[name]; dup {
		return fmt.Errorf("device: %s reserved twice", name)
	}
	if err := d.take(name, n); err != nil {
		return err
	}
	d.reserved[name] = n
	return nil
}

// Unreserve returns a reservation.
func (d *SimDevice) Unreserve(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.used -= d.reserved[name]
	delete(d.reserved, name)
}

// Name is the buffer's name.
func (b *Buffer) Name() string { return b.name }

// Len is the buffer's size.
func (b *Buffer) Len() int64 { return int64(len(b.data)) }

// Bytes is the buffer's memory (nil once freed).
func (b *Buffer) Bytes() []byte { return b.data }

// Upload allocates a buffer of len(src) bytes, copies src into it and
// returns it once the copy has landed: the device copy of a unit.
func (d *SimDevice) Upload(name string, src []byte) (*Buffer, error) {
	b, err := d.Alloc(name, int64(len(src)))
	if err != nil {
		return nil, err
	}
	c, err := d.CopyAsync(b, src)
	if err != nil {
		d.Free(b)
		return nil, err
	}
	c.Wait()
	return b, nil
}

// Copy is an asynchronous host→device copy in flight.
type Copy struct {
	done chan struct{}
	n    int
}

// Wait blocks until the copy has landed and returns the bytes copied.
func (c *Copy) Wait() int {
	<-c.done
	return c.n
}

// CopyAsync starts copying src into the start of dst and returns at once;
// Wait on the result before reading dst. dst must be at least len(src) long.
func (d *SimDevice) CopyAsync(dst *Buffer, src []byte) (*Copy, error) {
	if dst == nil || dst.freed || dst.dev != d {
		return nil, fmt.Errorf("device: copy into a freed or foreign buffer")
	}
	if len(src) > len(dst.data) {
		return nil, fmt.Errorf("device: copying %d bytes into %s of %d bytes", len(src), dst.name, len(dst.data))
	}
	c := &Copy{done: make(chan struct{})}
	data := dst.data
	go func() {
		c.n = copy(data, src)
		close(c.done)
	}()
	return c, nil
}

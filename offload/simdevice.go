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

// SimDevice is a simulated accelerator for machines without one, a Device:
// "device" buffers are host RAM (SimBuffer, a HostBuffer), held under a
// hard byte budget. An allocation that would exceed the budget fails (with
// an *OOMError); the budget is never exceeded, and the high-water mark is
// recorded. Each stream is a goroutine that runs its work in order, as a
// DMA engine or a compute queue would: copies really copy the bytes,
// asynchronously, fences complete when their stream reaches them, and a
// stream told to wait for a fence stops there until it completes. It is
// safe for concurrent use.
type SimDevice struct {
	mu       sync.Mutex
	budget   int64
	used     int64
	peak     int64
	reserved map[string]int64
	live     int
	streams  int
}

var _ Device = (*SimDevice)(nil)

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

// Streams is the number of streams created and not destroyed.
func (d *SimDevice) Streams() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.streams
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

// SimBuffer is a SimDevice allocation.
type SimBuffer struct {
	name  string
	data  []byte
	dev   *SimDevice
	freed bool
}

// Alloc allocates n bytes of device memory, or fails without allocating.
func (d *SimDevice) Alloc(name string, n int64) (Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.take(name, n); err != nil {
		return nil, err
	}
	d.live++
	return &SimBuffer{name: name, data: make([]byte, n), dev: d}, nil
}

// ownedBy is handle x as d's T (a buffer, stream or fence of d).
func ownedBy[T interface {
	comparable
	owner() *SimDevice
}](d *SimDevice, x any, what string) (T, error) {
	v, ok := x.(T)
	var zero T
	if !ok || v == zero || v.owner() != d {
		return zero, fmt.Errorf("device: a %s of another device", what)
	}
	return v, nil
}

func (b *SimBuffer) owner() *SimDevice { return b.dev }
func (s *simStream) owner() *SimDevice { return s.dev }
func (f *simFence) owner() *SimDevice  { return f.dev }

func (d *SimDevice) own(b Buffer) (*SimBuffer, error) { return ownedBy[*SimBuffer](d, b, "buffer") }
func (d *SimDevice) stream(s Stream) (*simStream, error) {
	return ownedBy[*simStream](d, s, "stream")
}
func (d *SimDevice) fence(f Fence) (*simFence, error) { return ownedBy[*simFence](d, f, "fence") }

// Free releases a buffer; freeing twice is an error.
func (d *SimDevice) Free(b Buffer) error {
	sb, err := d.own(b)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if sb.freed {
		return fmt.Errorf("device: %s freed twice", sb.name)
	}
	sb.freed = true
	d.used -= int64(len(sb.data))
	d.live--
	sb.data = nil
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
func (b *SimBuffer) Name() string { return b.name }

// Len is the buffer's size.
func (b *SimBuffer) Len() int64 { return int64(len(b.data)) }

// Bytes is the buffer's memory (nil once freed): host RAM.
func (b *SimBuffer) Bytes() []byte { return b.data }

// simStream runs the work enqueued on it, in order, on its own goroutine.
type simStream struct {
	dev    *SimDevice
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []func()
	closed bool
	exited chan struct{}
}

// NewStream starts a stream.
func (d *SimDevice) NewStream() (Stream, error) {
	s := &simStream{dev: d, exited: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	d.mu.Lock()
	d.streams++
	d.mu.Unlock()
	go s.run()
	return s, nil
}

func (s *simStream) run() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		op := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		op()
	}
}

func (s *simStream) enqueue(op func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("device: enqueueing on a destroyed stream")
	}
	s.queue = append(s.queue, op)
	s.cond.Signal()
	return nil
}

// DestroyStream lets the work enqueued on s finish, then stops it.
func (d *SimDevice) DestroyStream(s Stream) error {
	ss, err := d.stream(s)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return fmt.Errorf("device: stream destroyed twice")
	}
	ss.closed = true
	ss.cond.Signal()
	ss.mu.Unlock()
	<-ss.exited
	d.mu.Lock()
	d.streams--
	d.mu.Unlock()
	return nil
}

// simFence is a fence: done is closed when its current recording has
// completed.
type simFence struct {
	dev  *SimDevice
	mu   sync.Mutex
	done chan struct{}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewFence makes a fence (complete until first recorded).
func (d *SimDevice) NewFence() (Fence, error) { return &simFence{dev: d, done: closedChan}, nil }

// DestroyFence releases a fence (nothing to do on the simulated device).
func (d *SimDevice) DestroyFence(f Fence) error {
	_, err := d.fence(f)
	return err
}

func (f *simFence) current() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// CopyAsync enqueues the copy of src into dst at off on s and returns at
// once.
func (d *SimDevice) CopyAsync(s Stream, dst Buffer, off int64, src []byte) error {
	ss, err := d.stream(s)
	if err != nil {
		return err
	}
	sb, err := d.own(dst)
	if err != nil {
		return err
	}
	d.mu.Lock()
	freed := sb.freed
	data := sb.data
	d.mu.Unlock()
	if freed {
		return fmt.Errorf("device: copy into %s, freed", sb.name)
	}
	if off < 0 || off+int64(len(src)) > int64(len(data)) {
		return fmt.Errorf("device: copying %d bytes at %d into %s of %d bytes", len(src), off, sb.name, len(data))
	}
	return ss.enqueue(func() { copy(data[off:], src) })
}

func (d *SimDevice) streamFence(s Stream, f Fence) (*simStream, *simFence, error) {
	ss, err := d.stream(s)
	if err != nil {
		return nil, nil, err
	}
	sf, err := d.fence(f)
	return ss, sf, err
}

// Record enqueues f on s.
func (d *SimDevice) Record(f Fence, s Stream) error {
	ss, sf, err := d.streamFence(s, f)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	// Enqueue first, then publish, under the fence's lock: a wait issued
	// after Record returns sees this recording.
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if err := ss.enqueue(func() { close(done) }); err != nil {
		return err
	}
	sf.done = done
	return nil
}

// Wait blocks until f's current recording has completed.
func (d *SimDevice) Wait(f Fence) error {
	sf, err := d.fence(f)
	if err != nil {
		return err
	}
	<-sf.current()
	return nil
}

// StreamWait makes s wait, from now on, for f's current recording.
func (d *SimDevice) StreamWait(s Stream, f Fence) error {
	ss, sf, err := d.streamFence(s, f)
	if err != nil {
		return err
	}
	done := sf.current()
	return ss.enqueue(func() { <-done })
}

// Upload allocates a buffer of len(src) bytes, copies src into it and
// returns it once the copy has landed (on a stream of its own).
func (d *SimDevice) Upload(name string, src []byte) (*SimBuffer, error) {
	b, err := d.Alloc(name, int64(len(src)))
	if err != nil {
		return nil, err
	}
	s, _ := d.NewStream()
	defer d.DestroyStream(s) // waits for the copy
	if err := d.CopyAsync(s, b, 0, src); err != nil {
		d.Free(b)
		return nil, err
	}
	return b.(*SimBuffer), nil
}

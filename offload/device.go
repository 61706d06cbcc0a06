package offload

// Buffer is a device allocation. Its method set is backend.Buffer's, so
// that it can be bound as a weight's Dev (backend.Weight.Dev, at
// DevOffset) without offload importing the backend seam.
type Buffer interface {
	Len() int64
}

// HostBuffer is a device buffer the host can address: SimDevice's (its
// memory is host RAM), or a device's host-mapped memory. Runtime hands its
// bytes out as View.Host, so the CPU backend can compute from them.
type HostBuffer interface {
	Buffer
	Bytes() []byte
}

// Stream is a device's in-order queue of work (CUDA: CUstream). What is
// enqueued on one stream runs in order; streams run concurrently unless
// ordered with fences.
type Stream any

// Fence is a device event (CUDA: CUevent): recorded on a stream, it
// completes when the stream reaches it. A fence may be recorded again; a
// wait applies to the recording current when the wait was issued, and a
// fence never recorded is complete.
type Fence any

// Device is what Runtime needs of an accelerator: memory under a budget,
// streams, asynchronous host→device copies and fences. Each method maps to
// one CUDA driver-API call:
//
//	Alloc / Free       cuMemAlloc / cuMemFree (Reserve, Unreserve: accounting only)
//	NewStream          cuStreamCreate          DestroyStream  cuStreamDestroy
//	NewFence           cuEventCreate           DestroyFence   cuEventDestroy
//	CopyAsync          cuMemcpyHtoDAsync (src in pinned host memory)
//	Record             cuEventRecord
//	Wait               cuEventSynchronize
//	StreamWait         cuStreamWaitEvent
//
// Allocations and reservations never exceed Budget: one that would fails
// with an error matching ErrOutOfMemory and changes nothing. The enqueueing
// calls (CopyAsync, Record, StreamWait) return at once. SimDevice is the
// implementation for machines without an accelerator.
type Device interface {
	// Budget is the device's memory; Used what is allocated or reserved
	// now; Peak the most ever allocated or reserved at once.
	Budget() int64
	Used() int64
	Peak() int64
	// Alloc allocates n bytes of device memory, or fails without
	// allocating.
	Alloc(name string, n int64) (Buffer, error)
	// Free releases a buffer of this device (once). Work already enqueued
	// on it must have completed.
	Free(b Buffer) error
	// Reserve accounts n bytes under name without backing them (memory the
	// executor manages itself: KV cache, activations, workspaces);
	// Unreserve returns it.
	Reserve(name string, n int64) error
	Unreserve(name string)

	NewStream() (Stream, error)
	DestroyStream(s Stream) error
	NewFence() (Fence, error)
	DestroyFence(f Fence) error
	// CopyAsync enqueues on s the copy of src into dst at byte offset off
	// and returns at once; src must stay unchanged until the copy has
	// completed (a fence recorded after it).
	CopyAsync(s Stream, dst Buffer, off int64, src []byte) error
	// Record enqueues f on s: f completes when everything enqueued on s
	// before it has.
	Record(f Fence, s Stream) error
	// Wait blocks the host until f's current recording has completed.
	Wait(f Fence) error
	// StreamWait makes the work enqueued on s from now on wait until f's
	// current recording has completed (device-side ordering; the host does
	// not block).
	StreamWait(s Stream, f Fence) error
}

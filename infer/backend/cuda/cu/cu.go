// Package cu is the part of the CUDA driver API pp-offline uses, loaded at
// run time from libcuda.so.1 (the NVIDIA driver) with purego: no cgo, no
// CUDA toolkit, one binary for machines with and without a GPU. Load
// reports a missing driver or device as an error value; nothing here
// exits or panics for lack of one.
package cu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoDriver is matched (errors.Is) when libcuda.so.1 cannot be loaded.
var ErrNoDriver = errors.New("no NVIDIA driver")

// ErrNoDevice is matched when the driver loads but reports no device.
var ErrNoDevice = errors.New("no CUDA device")

// Result is a CUresult.
type Result int32

// Error is a failed driver call.
type Error struct {
	Call string
	Code Result
	Name string
}

func (e *Error) Error() string { return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code) }

// Handles of the driver API (opaque).
type (
	Device   int32
	Context  uintptr
	Module   uintptr
	Function uintptr
	Stream   uintptr
	Event    uintptr
	DevPtr   uint64
)

// Device attributes used (CUdevice_attribute).
const (
	AttrMultiprocessorCount    = 16
	AttrComputeCapabilityMajor = 75
	AttrComputeCapabilityMinor = 76
	AttrMemoryClockRate        = 36
	AttrGlobalMemoryBusWidth   = 37
	AttrMaxSharedPerBlockOptin = 97
)

const (
	memHostRegisterPortable = 1
	memHostRegisterReadOnly = 8
	streamNonBlocking       = 1
	eventDisableTiming      = 2
)

var (
	once    sync.Once
	loadErr error

	cuInit                    func(flags uint32) Result
	cuDriverGetVersion        func(v *int32) Result
	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGet               func(d *Device, ordinal int32) Result
	cuDeviceGetName           func(name *byte, n int32, d Device) Result
	cuDeviceGetAttribute      func(v *int32, attr int32, d Device) Result
	cuDevicePrimaryCtxRetain  func(c *Context, d Device) Result
	cuDevicePrimaryCtxRelease func(d Device) Result
	cuCtxSetCurrent           func(c Context) Result
	cuMemGetInfo              func(free, total *uint64) Result
	cuMemAlloc                func(p *DevPtr, n uint64) Result
	cuMemFree                 func(p DevPtr) Result
	cuMemHostRegister         func(addr uintptr, n uint64, flags uint32) Result
	cuMemHostUnregister       func(p unsafe.Pointer) Result
	cuMemcpyHtoD              func(dst DevPtr, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src DevPtr, n uint64) Result
	cuMemcpyHtoDAsync         func(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) Result
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) Result
	cuMemcpyDtoDAsync         func(dst, src DevPtr, n uint64, s Stream) Result
	cuMemsetD8Async           func(dst DevPtr, v uint8, n uint64, s Stream) Result
	cuStreamCreate            func(s *Stream, flags uint32) Result
	cuStreamSynchronize       func(s Stream) Result
	cuStreamDestroy           func(s Stream) Result
	cuEventDestroy            func(e Event) Result
	cuStreamWaitEvent         func(s Stream, e Event, flags uint32) Result
	cuEventCreate             func(e *Event, flags uint32) Result
	cuEventRecord             func(e Event, s Stream) Result
	cuEventSynchronize        func(e Event) Result
	cuModuleLoadData          func(m *Module, image unsafe.Pointer) Result
	cuModuleGetFunction       func(f *Function, m Module, name string) Result
	cuLaunchKernel            func(f Function, gx, gy, gz, bx, by, bz, shared uint32, s Stream, params unsafe.Pointer, extra unsafe.Pointer) Result
	cuFuncSetAttribute        func(f Function, attr int32, v int32) Result
	cuGetErrorName            func(r Result, s **byte) Result
)

// Load opens libcuda.so.1 (or $PP_OFFLINE_LIBCUDA), binds the functions and runs cuInit, once. It
// returns ErrNoDriver, ErrNoDevice or the driver's error; never exits.
func Load() error {
	once.Do(func() { loadErr = load() })
	return loadErr
}

func check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	name := "CUDA_ERROR"
	var s *byte
	if cuGetErrorName != nil && cuGetErrorName(r, &s) == 0 && s != nil {
		name = cstring(s)
	}
	return &Error{Call: call, Code: r, Name: name}
}

func cstring(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// DriverVersion is the driver's CUDA version (e.g. 12040).
func DriverVersion() (int, error) {
	var v int32
	return int(v), check("cuDriverGetVersion", cuDriverGetVersion(&v))
}

// DeviceCount is the number of devices.
func DeviceCount() (int, error) {
	var n int32
	return int(n), check("cuDeviceGetCount", cuDeviceGetCount(&n))
}

// GetDevice is device ordinal i.
func GetDevice(i int) (Device, error) {
	var d Device
	return d, check("cuDeviceGet", cuDeviceGet(&d, int32(i)))
}

// Name is the device's name.
func (d Device) Name() (string, error) {
	buf := make([]byte, 256)
	if err := check("cuDeviceGetName", cuDeviceGetName(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cstring(&buf[0]), nil
}

// Attribute is a device attribute.
func (d Device) Attribute(a int) (int, error) {
	var v int32
	return int(v), check("cuDeviceGetAttribute", cuDeviceGetAttribute(&v, int32(a), d))
}

// PrimaryContext retains the device's primary context and makes it current
// on the calling OS thread.
func (d Device) PrimaryContext() (Context, error) {
	var c Context
	if err := check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&c, d)); err != nil {
		return 0, err
	}
	return c, SetCurrent(c)
}

// ReleasePrimaryContext releases what PrimaryContext retained.
func (d Device) ReleasePrimaryContext() error {
	return check("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(d))
}

// SetCurrent makes c current on the calling OS thread.
func SetCurrent(c Context) error { return check("cuCtxSetCurrent", cuCtxSetCurrent(c)) }

// MemInfo is the free and total memory of the current context's device.
func MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = check("cuMemGetInfo", cuMemGetInfo(&f, &t))
	return int64(f), int64(t), err
}

// MemAlloc allocates n bytes of device memory.
func MemAlloc(n int64) (DevPtr, error) {
	var p DevPtr
	return p, check("cuMemAlloc", cuMemAlloc(&p, uint64(n)))
}

// MemFree frees what MemAlloc returned.
func MemFree(p DevPtr) error { return check("cuMemFree", cuMemFree(p)) }

// HostRegister page-locks b so that copies from and to it run at full
// PCIe speed, asynchronously. readOnly: the device only reads it (the
// mapped checkpoint, a read-only mapping).
func HostRegister(b []byte, readOnly bool) error {
	if len(b) == 0 {
		return nil
	}
	flags := uint32(memHostRegisterPortable)
	if readOnly {
		flags |= memHostRegisterReadOnly
	}
	return check("cuMemHostRegister", cuMemHostRegister(uintptr(unsafe.Pointer(&b[0])), uint64(len(b)), flags))
}

// HostRegisterRange is HostRegister for the host addresses [addr, addr+n)
// (whole pages around Go objects: no Go slice may span them).
func HostRegisterRange(addr, n uintptr, readOnly bool) error {
	if n == 0 {
		return nil
	}
	flags := uint32(memHostRegisterPortable)
	if readOnly {
		flags |= memHostRegisterReadOnly
	}
	return check("cuMemHostRegister", cuMemHostRegister(addr, uint64(n), flags))
}

// HostUnregister undoes HostRegister.
func HostUnregister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return check("cuMemHostUnregister", cuMemHostUnregister(unsafe.Pointer(&b[0])))
}

// CopyHtoD copies n bytes from host p to device dst (synchronous).
func CopyHtoD(dst DevPtr, p unsafe.Pointer, n int64) error {
	return check("cuMemcpyHtoD", cuMemcpyHtoD(dst, p, uint64(n)))
}

// CopyDtoH copies n bytes from device src to host p (synchronous).
func CopyDtoH(p unsafe.Pointer, src DevPtr, n int64) error {
	return check("cuMemcpyDtoH", cuMemcpyDtoH(p, src, uint64(n)))
}

// CopyHtoDAsync queues a copy on s. From pageable memory it returns once
// the source is staged (reusable); from pinned memory the source must stay
// untouched until the stream passes the copy.
func CopyHtoDAsync(dst DevPtr, p unsafe.Pointer, n int64, s Stream) error {
	return check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(dst, p, uint64(n), s))
}

// CopyDtoHAsync queues a copy to host memory on s.
func CopyDtoHAsync(p unsafe.Pointer, src DevPtr, n int64, s Stream) error {
	return check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(p, src, uint64(n), s))
}

// CopyDtoDAsync queues a device-to-device copy on s.
func CopyDtoDAsync(dst, src DevPtr, n int64, s Stream) error {
	return check("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(dst, src, uint64(n), s))
}

// MemsetAsync queues setting n bytes at dst to v on s.
func MemsetAsync(dst DevPtr, v byte, n int64, s Stream) error {
	return check("cuMemsetD8Async", cuMemsetD8Async(dst, v, uint64(n), s))
}

// NewStream creates a non-blocking stream.
func NewStream() (Stream, error) {
	var s Stream
	return s, check("cuStreamCreate", cuStreamCreate(&s, streamNonBlocking))
}

// Synchronize waits until s has run everything queued on it.
func (s Stream) Synchronize() error { return check("cuStreamSynchronize", cuStreamSynchronize(s)) }

// Destroy destroys s (its queued work still runs).
func (s Stream) Destroy() error { return check("cuStreamDestroy", cuStreamDestroy(s)) }

// Destroy destroys e.
func (e Event) Destroy() error { return check("cuEventDestroy", cuEventDestroy(e)) }

// Wait makes s wait for e's last record before running later work.
func (s Stream) Wait(e Event) error { return check("cuStreamWaitEvent", cuStreamWaitEvent(s, e, 0)) }

// NewEvent creates an event without timing.
func NewEvent() (Event, error) {
	var e Event
	return e, check("cuEventCreate", cuEventCreate(&e, eventDisableTiming))
}

// Record records e on s.
func (e Event) Record(s Stream) error { return check("cuEventRecord", cuEventRecord(e, s)) }

// Synchronize waits for e's last record.
func (e Event) Synchronize() error { return check("cuEventSynchronize", cuEventSynchronize(e)) }

// LoadModule loads a PTX (NUL-terminated) or cubin image; the driver JITs
// PTX for the device.
func LoadModule(image []byte) (Module, error) {
	if len(image) == 0 || image[len(image)-1] != 0 {
		image = append(append([]byte(nil), image...), 0)
	}
	var m Module
	return m, check("cuModuleLoadData", cuModuleLoadData(&m, unsafe.Pointer(&image[0])))
}

// Function is the kernel called name in m.
func (m Module) Function(name string) (Function, error) {
	var f Function
	if err := check("cuModuleGetFunction("+name+")", cuModuleGetFunction(&f, m, name)); err != nil {
		return 0, err
	}
	return f, nil
}

// SetMaxDynamicShared lets f use up to n bytes of dynamic shared memory.
func (f Function) SetMaxDynamicShared(n int) error {
	return check("cuFuncSetAttribute", cuFuncSetAttribute(f, 8, int32(n))) // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
}

// Launch queues f on s; params points to an array of pointers to the
// arguments' values (the kernelParams of cuLaunchKernel).
func (f Function) Launch(grid, block [3]uint32, shared uint32, s Stream, params unsafe.Pointer) error {
	return check("cuLaunchKernel", cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, params, nil))
}

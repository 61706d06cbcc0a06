//go:build !nocuda && !windows && !darwin

package cu

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/ebitengine/purego"
)

// The binary links the system's dynamic loader for this (purego's
// dlopen): a build with -tags nocuda leaves the binding out and is fully
// static, for systems without glibc's loader (and without a GPU).

func load() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: the CUDA backend is built for Linux only", ErrNoDriver)
	}
	lib := "libcuda.so.1"
	if p := os.Getenv("PP_OFFLINE_LIBCUDA"); p != "" {
		lib = p // another driver library (tests: a missing one)
	}
	// dlopen's reason comes from dlerror, which is per OS thread: the
	// goroutine must not move between the two calls (it did once in CI,
	// leaving the message empty).
	runtime.LockOSThread()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	runtime.UnlockOSThread()
	if err != nil {
		why := err.Error()
		if why == "" {
			why = lib + ": cannot be loaded"
		}
		return fmt.Errorf("%w (%s)", ErrNoDriver, why)
	}
	syms := []struct {
		fn   any
		name string
	}{
		{&cuInit, "cuInit"}, {&cuDriverGetVersion, "cuDriverGetVersion"},
		{&cuDeviceGetCount, "cuDeviceGetCount"}, {&cuDeviceGet, "cuDeviceGet"},
		{&cuDeviceGetName, "cuDeviceGetName"}, {&cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"}, {&cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&cuCtxSetCurrent, "cuCtxSetCurrent"}, {&cuMemGetInfo, "cuMemGetInfo_v2"},
		{&cuMemAlloc, "cuMemAlloc_v2"}, {&cuMemFree, "cuMemFree_v2"},
		{&cuMemHostRegister, "cuMemHostRegister_v2"}, {&cuMemHostUnregister, "cuMemHostUnregister"},
		{&cuMemcpyHtoD, "cuMemcpyHtoD_v2"}, {&cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
		{&cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"}, {&cuMemsetD8Async, "cuMemsetD8Async"},
		{&cuStreamCreate, "cuStreamCreate"}, {&cuStreamSynchronize, "cuStreamSynchronize"},
		{&cuStreamDestroy, "cuStreamDestroy_v2"}, {&cuEventDestroy, "cuEventDestroy_v2"},
		{&cuStreamWaitEvent, "cuStreamWaitEvent"}, {&cuEventCreate, "cuEventCreate"},
		{&cuEventRecord, "cuEventRecord"}, {&cuEventSynchronize, "cuEventSynchronize"},
		{&cuModuleLoadData, "cuModuleLoadData"}, {&cuModuleGetFunction, "cuModuleGetFunction"},
		{&cuLaunchKernel, "cuLaunchKernel"}, {&cuFuncSetAttribute, "cuFuncSetAttribute"},
		{&cuGetErrorName, "cuGetErrorName"},
	}
	for _, s := range syms {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			return fmt.Errorf("%w: libcuda.so.1 has no %s (driver too old?)", ErrNoDriver, s.name)
		}
		purego.RegisterFunc(s.fn, p)
	}
	if err := check("cuInit", cuInit(0)); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == 100 { // CUDA_ERROR_NO_DEVICE
			return fmt.Errorf("%w (cuInit: %s)", ErrNoDevice, e.Name)
		}
		return err
	}
	var n int32
	if err := check("cuDeviceGetCount", cuDeviceGetCount(&n)); err != nil {
		return err
	}
	if n == 0 {
		return ErrNoDevice
	}
	return nil
}

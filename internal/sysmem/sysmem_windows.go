//go:build windows

package sysmem

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/windows"
)

// rlimInfinity stands for "no limit"; Windows has no RLIMIT_AS.
const rlimInfinity = ^uint64(0)

// On Windows there is no /proc, no cgroup and no RLIMIT_AS: the one bound
// read is the machine's available physical memory (GlobalMemoryStatusEx's
// ullAvailPhys), reported as MemAvailable. A job object's memory limit
// (the Windows counterpart of a cgroup's) is not read yet.
var system = env{rlimitAS: func() (uint64, error) {
	return 0, errors.New("RLIMIT_AS does not exist on Windows")
}}

// memoryStatusEx is MEMORYSTATUSEX.
type memoryStatusEx struct {
	length               uint32
	memoryLoad           uint32
	totalPhys            uint64
	availPhys            uint64
	totalPageFile        uint64
	availPageFile        uint64
	totalVirtual         uint64
	availVirtual         uint64
	availExtendedVirtual uint64
}

var globalMemoryStatusEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

// memAvailable is the available physical memory (the path, a Linux file,
// is not read).
func memAvailable(string) (int64, error) {
	m := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	if r, _, err := globalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&m))); r == 0 {
		return 0, err
	}
	if m.availPhys > 1<<62 {
		m.availPhys = 1 << 62
	}
	return int64(m.availPhys), nil
}

package cpu

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// populateOff is set once the kernel has refused MADV_POPULATE_WRITE (it
// came in Linux 5.14): the rings' pages are then faulted in by their
// writes, as without it.
var populateOff atomic.Bool

var pageSize = uintptr(unix.Getpagesize())

// populate faults in, for writing, the pages holding the n bytes at p, in
// one madvise(MADV_POPULATE_WRITE) call: the kernel maps them without a
// page fault each. Contents do not change (pages already there stay as
// they are, new ones are zero), so it is only a matter of speed: on the
// VMs these benchmarks run on a first-touch fault costs ~10 µs a 4 KiB
// page and this call ~1.3 µs a page at 4 pages a call
// (docs/PERFORMANCE.md, "KV ring pages populated ahead"). p must point
// into memory the caller holds; the range is widened to whole pages.
func populate(p unsafe.Pointer, n uintptr) {
	if n == 0 || populateOff.Load() {
		return
	}
	start := uintptr(p) &^ (pageSize - 1)
	end := uintptr(p) + n
	_, _, e := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_POPULATE_WRITE)
	if e == unix.EINVAL || e == unix.ENOSYS || e == unix.EPERM {
		populateOff.Store(true)
	}
}

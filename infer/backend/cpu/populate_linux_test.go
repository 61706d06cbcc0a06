package cpu

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// populate maps exactly the pages of the range it is given (whole pages:
// the first one's start rounded down), in a fresh anonymous mapping whose
// pages are otherwise untouched, and changes no content.
func TestPopulateMapsThePages(t *testing.T) {
	ps := int(pageSize)
	const pages = 16
	// A kernel answers the advice on an unmapped page with ENOMEM (EINVAL
	// before Linux 5.14); user-mode emulation (qemu-user, the arm64 CI
	// step) takes it as a hint and returns success without mapping
	// anything, so there is nothing to test.
	if g, err := unix.Mmap(-1, 0, ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON); err == nil {
		addr := uintptr(unsafe.Pointer(&g[0]))
		unix.Munmap(g)
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(ps), unix.MADV_POPULATE_WRITE); e == 0 {
			t.Skip("madvise succeeds on an unmapped page: an emulator, not a kernel, answers it")
		}
	}
	b, err := unix.Mmap(-1, 0, pages*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Skip("no anonymous mapping here:", err)
	}
	defer unix.Munmap(b)
	resident := func() []bool {
		v := make([]byte, pages)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&v[0]))); e != 0 {
			t.Skip("mincore:", e)
		}
		r := make([]bool, pages)
		for i := range v {
			r[i] = v[i]&1 != 0
		}
		return r
	}
	for i, r := range resident() {
		if r {
			t.Skipf("page %d of a fresh mapping is resident already", i)
		}
	}
	b[10*ps+5] = 7 // a page holding data
	// Pages 3 (from its middle) to 5, and page 10.
	populate(unsafe.Pointer(&b[3*ps+100]), uintptr(3*ps-100))
	populate(unsafe.Pointer(&b[10*ps]), 1)
	if populateOff.Load() {
		t.Skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
	}
	want := map[int]bool{3: true, 4: true, 5: true, 10: true}
	for i, r := range resident() {
		if r != want[i] {
			t.Errorf("page %d resident %v, want %v", i, r, want[i])
		}
	}
	for i, v := range b {
		if v != 0 && i != 10*ps+5 || i == 10*ps+5 && v != 7 {
			t.Fatalf("byte %d is %d after populate", i, v)
		}
	}
}

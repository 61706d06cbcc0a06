//go:build windows

package weights

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapFile maps the first size bytes of fd read-only: a read-only file
// mapping (CreateFileMapping) and a view of it (MapViewOfFile). The
// mapping's handle is closed at once; the view keeps it alive until
// unmapFile.
func mapFile(fd *os.File, size int64) ([]byte, error) {
	if size <= 0 || uint64(size) > uint64(^uintptr(0)>>1) {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	h, err := windows.CreateFileMapping(windows.Handle(fd.Fd()), nil, windows.PAGE_READONLY, uint32(uint64(size)>>32), uint32(size), nil)
	if err != nil {
		return nil, err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	windows.CloseHandle(h)
	if err != nil {
		return nil, err
	}
	// addr is memory outside Go's heap that the view holds until
	// UnmapViewOfFile; read it as a pointer without a uintptr conversion.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), int(size)), nil
}

// unmapFile unmaps the view mapFile made.
func unmapFile(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	return windows.UnmapViewOfFile(uintptr(unsafe.Pointer(&data[0])))
}

// anonBytes returns size bytes of zeroed heap memory and false (Windows has
// no hint for large pages without a privilege; see mmap_unix.go).
func anonBytes(size int) ([]byte, bool) { return make([]byte, size), false }

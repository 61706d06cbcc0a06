//go:build unix

package weights

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of fd read-only and shared, and asks
// the kernel for large page-cache folios where it can give them
// (adviseMapping).
func mapFile(fd *os.File, size int64) ([]byte, error) {
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err == nil {
		adviseMapping(data)
	}
	return data, err
}

// unmapFile unmaps what mapFile or anonBytes mapped.
func unmapFile(data []byte) error { return unix.Munmap(data) }

// anonBytes returns size bytes of zeroed anonymous memory, mapped outside
// Go's heap and advised like a weight mapping (adviseMapping), and true; or
// heap memory and false when the mapping is refused.
func anonBytes(size int) ([]byte, bool) {
	if size <= 0 {
		return make([]byte, size), false
	}
	data, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, size), false
	}
	adviseMapping(data)
	return data, true
}

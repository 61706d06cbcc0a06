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

// unmapFile unmaps what mapFile mapped.
func unmapFile(data []byte) error { return unix.Munmap(data) }

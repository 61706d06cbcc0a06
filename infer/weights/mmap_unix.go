//go:build unix

package weights

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of fd read-only and shared.
func mapFile(fd *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

// unmapFile unmaps what mapFile mapped.
func unmapFile(data []byte) error { return unix.Munmap(data) }

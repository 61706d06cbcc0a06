//go:build unix

package hub

import "golang.org/x/sys/unix"

// freeSpace is the space an unprivileged process may still write in dir's
// filesystem.
func freeSpace(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	free := uint64(st.Bavail) * uint64(st.Bsize)
	if free > 1<<62 {
		free = 1 << 62
	}
	return int64(free), true
}

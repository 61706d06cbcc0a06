//go:build unix

package fileio

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// The guard's system calls on Unix (see guard.go); guard_windows.go has
// the Windows ones.

// openNoBlock opens path for reading without waiting for a named pipe's
// writer (O_NONBLOCK; clearNonblock clears it once the file is known to be
// regular).
func openNoBlock(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// clearNonblock makes f's reads blocking again.
func clearNonblock(f *os.File) error {
	return unix.SetNonblock(int(f.Fd()), false)
}

// openNoFollow opens a temporary file for the sweep: not through a link,
// without waiting.
func openNoFollow(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// accessDir: the process may create files in dir (access(2) W_OK|X_OK).
func accessDir(dir string) error {
	return unix.Access(dir, unix.W_OK|unix.X_OK)
}

// accessWrite: the process may write p (access(2) W_OK).
func accessWrite(p string) error {
	return unix.Access(p, unix.W_OK)
}

// createTemp creates a new temporary file, failing if it exists.
func createTemp(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// lockNB takes f's exclusive flock without waiting.
func lockNB(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// lockHeld: lockNB failed because another process holds the lock.
func lockHeld(err error) bool {
	return errors.Is(err, unix.EWOULDBLOCK)
}

// flockUnsupported: a file system without flock (some network ones). The
// file is then written unlocked; a sweep, whose own flock fails the same
// way, never removes it.
func flockUnsupported(err error) bool {
	return errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL)
}

// DirOf is the folder in which the system opens path: the path up to its
// last name, as given. Unlike filepath.Dir it keeps "..": Unix takes each
// ".." on the folder reached so far, after any link, so
// "out/link/../a.wav" is in the parent of link's target, not in out,
// where a textual Clean would put it.
func DirOf(path string) string {
	i := len(path) - 1
	for i > 0 && os.IsPathSeparator(path[i]) { // trailing separators
		i--
	}
	for i >= 0 && !os.IsPathSeparator(path[i]) { // the name
		i--
	}
	if i < 0 {
		return "."
	}
	for i > 0 && os.IsPathSeparator(path[i-1]) { // separators before it
		i--
	}
	if i == 0 {
		return path[:1] // the root
	}
	return path[:i]
}

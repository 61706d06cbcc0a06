//go:build windows

package fileio

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// The guard's system calls on Windows (see guard.go; guard_unix.go has the
// Unix ones). Windows has no named pipes in the file system (they live
// under \\.\pipe\), so an open never waits for a writer. Locks are
// LockFileEx byte-range locks, which Windows drops when the process ends,
// as flock's are dropped on Unix. The temporary files are opened with
// FILE_SHARE_DELETE so that they can be renamed over their output and
// removed while open and locked, as on Unix.

func openNoBlock(path string) (*os.File, error) { return os.Open(path) }

func clearNonblock(*os.File) error { return nil }

// openNoFollow opens a temporary file for the sweep (the sweep has
// already skipped anything but a regular file, links included).
func openNoFollow(name string) (*os.File, error) {
	return shareOpen(name, windows.OPEN_EXISTING, windows.GENERIC_READ)
}

// fileAddFile is FILE_ADD_FILE, a directory's right to have files made in
// it (the same bit as FILE_WRITE_DATA on a file).
const fileAddFile = 0x0002

// accessDir asks Windows for a handle on dir with the right to add a file
// to it: the access control list answers, as access(2) does on Unix.
func accessDir(dir string) error {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(p, fileAddFile, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return err
	}
	return windows.CloseHandle(h)
}

// accessWrite refuses a file with the read-only attribute or one the
// process may not open for writing.
func accessWrite(p string) error {
	u, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return err
	}
	a, err := windows.GetFileAttributes(u)
	if err != nil {
		return err
	}
	if a&windows.FILE_ATTRIBUTE_READONLY != 0 {
		return errors.New("read-only attribute")
	}
	h, err := windows.CreateFile(u, windows.FILE_WRITE_DATA, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		return err
	}
	return windows.CloseHandle(h)
}

// createTemp creates a new temporary file, failing if it exists.
func createTemp(name string) (*os.File, error) {
	return shareOpen(name, windows.CREATE_NEW, windows.GENERIC_READ|windows.GENERIC_WRITE)
}

// shareOpen opens name allowing others to read, write, rename and delete
// it while it is open.
func shareOpen(name string, disposition, access uint32) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	h, err := windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, disposition, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_EXISTS) {
			err = os.ErrExist
		} else if errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			err = os.ErrNotExist
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(h), name), nil
}

// lockNB takes an exclusive lock on f's first byte without waiting.
func lockNB(f *os.File) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
}

// lockHeld: lockNB failed because another process holds the lock.
func lockHeld(err error) bool { return errors.Is(err, windows.ERROR_LOCK_VIOLATION) }

// flockUnsupported: a file system without byte-range locks. The file is
// then written unlocked; a sweep, whose own lock fails the same way, never
// removes it.
func flockUnsupported(err error) bool {
	return errors.Is(err, windows.ERROR_NOT_SUPPORTED) || errors.Is(err, windows.ERROR_INVALID_FUNCTION)
}

// DirOf is the folder in which the system opens path. Windows removes
// ".." from a path by its text before it looks at the file system (Win32
// path normalisation), so filepath.Dir's textual Clean is what it does.
func DirOf(path string) string { return filepath.Dir(path) }

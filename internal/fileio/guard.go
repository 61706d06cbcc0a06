package fileio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckOutputs refuses, before any work, outputs that would destroy
// something: an output that is one of the run's inputs (compared by device
// and inode, so another path to the same file — a link, "./x" — is caught;
// `--output-wav model.safetensors` once destroyed the checkpoint), two
// outputs that are the same file, and an existing target that is not a
// regular file (renaming over /dev/null would replace the device) or is
// read-only (the user protected it). Inputs that do not exist are ignored
// (their own checks report them).
func CheckOutputs(outputs, inputs []string) error {
	type seen struct {
		path string
		st   os.FileInfo
	}
	var ins []seen
	for _, p := range inputs {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			ins = append(ins, seen{p, st})
		}
	}
	var outs []seen
	for _, p := range outputs {
		for _, o := range outs {
			if filepath.Clean(o.path) == filepath.Clean(p) {
				return fmt.Errorf("%s: given as two outputs", p)
			}
		}
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			outs = append(outs, seen{p, nil})
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, PathErr(err))
		}
		if st.Mode()&os.ModeSymlink != 0 {
			if st, err = os.Stat(p); err != nil {
				return fmt.Errorf("%s: a broken symbolic link: %w", p, PathErr(err))
			}
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s: exists and is not a regular file (%s): pp-offline does not write over it", p, describeMode(st.Mode()))
		}
		// By the mode bits, not access(2): as root everything is writable,
		// but a file made read-only was protected on purpose.
		if st.Mode().Perm()&0o222 == 0 || unix.Access(p, unix.W_OK) != nil {
			return fmt.Errorf("%s: exists and is read-only: pp-offline does not replace it (remove it or choose another output)", p)
		}
		for _, in := range ins {
			if os.SameFile(st, in.st) {
				return fmt.Errorf("%s: is the input %s: pp-offline never writes over an input", p, in.path)
			}
		}
		for _, o := range outs {
			if o.st != nil && os.SameFile(st, o.st) {
				return fmt.Errorf("%s and %s are the same file: give two outputs", o.path, p)
			}
		}
		outs = append(outs, seen{p, st})
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeCharDevice != 0, m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

// Lock is held over a run's outputs (LockOutputs) until Unlock.
type Lock struct {
	files []*os.File
	paths []string
}

// LockOutputs takes, without waiting, an exclusive lock for each output
// (an flock on the hidden file ".NAME.lock" beside it), so that two runs
// writing the same outputs cannot mix them: the second fails at once,
// naming the file, and writes nothing. Once the locks are held, temporary
// files left beside the outputs by a killed run (".NAME.tmp*": no living
// run can own them, it would hold the lock) are removed.
func LockOutputs(outputs ...string) (*Lock, error) {
	l := &Lock{}
	for _, p := range outputs {
		f, err := lockFile(lockPath(p))
		if err != nil {
			l.Unlock()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s: another pp-offline run is writing this output now (lock %s held); not started", p, lockPath(p))
			}
			return nil, fmt.Errorf("%s: cannot lock the output: %w", p, PathErr(err))
		}
		l.files, l.paths = append(l.files, f), append(l.paths, lockPath(p))
		RemoveStaleTemps(p)
	}
	return l, nil
}

func lockPath(p string) string { return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".lock") }

// lockFile opens and flocks path; a lock file that was removed (by the
// holder's Unlock) between our open and our flock is opened again, so two
// runs never both hold a lock.
func lockFile(path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, err
		}
		fst, err1 := f.Stat()
		pst, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fst, pst) {
			return f, nil
		}
		f.Close()
	}
}

// Unlock releases the locks and removes the lock files.
func (l *Lock) Unlock() {
	if l == nil {
		return
	}
	for i, f := range l.files {
		os.Remove(l.paths[i]) // while still held: a waiting opener sees the change (lockFile)
		f.Close()
	}
	l.files, l.paths = nil, nil
}

// RemoveStaleTemps removes the temporary files WriteAllAtomic leaves beside
// output p when its process is killed between writing and renaming.
func RemoveStaleTemps(p string) {
	dir := filepath.Dir(p)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() && IsTempOf(p, e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// IsTempOf reports whether name (a file name in output's folder) is one of
// WriteAllAtomic's temporary files for output: ".NAME.tmp" and CreateTemp's
// digits.
func IsTempOf(output, name string) bool {
	rest, ok := strings.CutPrefix(name, "."+filepath.Base(output)+".tmp")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

package fileio

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The output guard. Every file pp-offline writes goes through this
// package's writers (WriteAtomic, WriteAllAtomic, WriteStreamAtomic), and
// each of them refuses, before it writes and again just before it renames,
// a target that
//   - is a file the run reads (registered with AddInputs, or opened with
//     OpenInput / ReadFileLimit), compared by device and inode so that a
//     link or another path to it is caught;
//   - exists and is not a regular file (a device, a FIFO, a socket, a
//     directory: renaming over /dev/null would replace the device);
//   - exists and is read-only (the user protected it).
// Commands also call CheckOutput / CheckOutputs before any work, so that
// a bad output costs nothing.
//
// Temporary files live in a folder of their own, TempDir, inside the
// output's folder, named "NAME.<pid>.<random>.tmp", and each is held under
// an flock by the process writing it. The sweep of a killed run's
// temporaries (SweepTemps) removes only a file that is in that folder, has
// that name, is a regular file, is no input of the run, and whose lock no
// living process holds: a user's file named like a temporary beside an
// output is never touched.

// TempDir is the folder, inside an output's folder, that holds the
// temporary files and locks of the outputs written there; it is removed
// when it is empty.
const TempDir = ".pp-offline-tmp"

// nameMax is NAME_MAX on Linux; tempSuffix is the longest suffix a
// temporary file adds to an output's name (".<pid ≤ 10 digits>.<8 hex>.tmp").
const (
	nameMax    = 255
	pathMax    = 4096
	tempSuffix = 1 + 10 + 1 + 16 + 4
)

var inputs struct {
	sync.Mutex
	files []input
}

type input struct {
	path string
	st   os.FileInfo
}

// AddInputs registers files the run reads, so that no writer of this
// process ever replaces one. Paths that do not exist (yet) are ignored;
// links are followed.
func AddInputs(paths ...string) {
	inputs.Lock()
	defer inputs.Unlock()
	for _, p := range paths {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		inputs.files = append(inputs.files, input{p, st})
	}
}

func addInputInfo(p string, st os.FileInfo) {
	inputs.Lock()
	inputs.files = append(inputs.files, input{p, st})
	inputs.Unlock()
}

// ResetInputs forgets the registered inputs (tests).
func ResetInputs() {
	inputs.Lock()
	inputs.files = nil
	inputs.Unlock()
}

// inputOf returns the registered input that st is, if any.
func inputOf(st os.FileInfo) (string, bool) {
	inputs.Lock()
	defer inputs.Unlock()
	for _, in := range inputs.files {
		if os.SameFile(st, in.st) {
			// Still that file? (An input removed since may have left its
			// inode number to a new file.)
			if now, err := os.Stat(in.path); err == nil && os.SameFile(now, in.st) {
				return in.path, true
			}
		}
	}
	return "", false
}

// IsInput reports whether path is (by device and inode) a registered input.
func IsInput(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	_, ok := inputOf(st)
	return ok
}

// OpenInput opens a file the run reads without ever blocking (a named
// pipe's open waits for a writer: O_NONBLOCK, cleared once the file is
// known to be regular), refuses anything but a regular file (links are
// followed) and registers it as an input. Errors are one line naming path.
func OpenInput(path string) (*os.File, error) {
	f, err := openNoBlock(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: is %s, not a file", path, inputKind(st.Mode()))
	}
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	addInputInfo(path, st)
	return f, nil
}

// CheckInput refuses, without opening it, an input that is not a regular
// file (links followed): a named pipe would block its reader, a device is
// not a file. It registers the input. Errors are one line naming path.
func CheckInput(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: is %s, not a file", path, inputKind(st.Mode()))
	}
	addInputInfo(path, st)
	return nil
}

// CheckOutput is the up-front check of one output path: its folder exists,
// is a folder and can be written; its name leaves room for the temporary
// file's (NAME_MAX); and checkTarget. Errors are one line naming path.
func CheckOutput(path string) error {
	if path == "" {
		return errors.New("an output path is empty")
	}
	if err := checkName(path); err != nil {
		return err
	}
	dir := DirOf(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: output directory %s does not exist", path, dir)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	if err := accessDir(dir); err != nil {
		return fmt.Errorf("%s: cannot write in %s: %v", path, dir, err)
	}
	_, err = checkTarget(path)
	return err
}

// checkName refuses an output whose name, or its temporary file's, is
// longer than the system allows: found now, not after hours of work.
func checkName(path string) error {
	base := filepath.Base(path)
	if len(base)+tempSuffix > nameMax {
		return fmt.Errorf("%s: the file name is %d bytes, more than the %d an output may have (its temporary file adds %d to the %d a name may have)", clipName(path), len(base), nameMax-tempSuffix, tempSuffix, nameMax)
	}
	if abs, err := filepath.Abs(path); err == nil && len(abs)+len(TempDir)+2+tempSuffix >= pathMax {
		return fmt.Errorf("%s: the path is %d bytes, too long for its temporary file (%d at most)", clipName(path), len(abs), pathMax-1-len(TempDir)-2-tempSuffix)
	}
	return nil
}

func clipName(p string) string {
	if len(p) > 80 {
		return p[:40] + "…" + p[len(p)-30:]
	}
	return p
}

// checkTarget refuses an existing target that is not a regular file, is
// read-only or is an input; it returns the target's info (nil: it does
// not exist).
func checkTarget(p string) (os.FileInfo, error) {
	st, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, PathErr(err))
	}
	if st.Mode()&os.ModeSymlink != 0 {
		if st, err = os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: a broken symbolic link: %w", p, PathErr(err))
		}
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: exists and is not a regular file (%s): pp-offline does not write over it", p, describeMode(st.Mode()))
	}
	if in, ok := inputOf(st); ok {
		if filepath.Clean(in) == filepath.Clean(p) {
			return nil, fmt.Errorf("%s: is an input of this run: pp-offline never writes over an input", p)
		}
		return nil, fmt.Errorf("%s: is the input %s: pp-offline never writes over an input", p, in)
	}
	// By the mode bits, not access(2) alone: as root everything is
	// writable, but a file made read-only was protected on purpose.
	if st.Mode().Perm()&0o222 == 0 || accessWrite(p) != nil {
		return nil, fmt.Errorf("%s: exists and is read-only: pp-offline does not replace it (remove it or choose another output)", p)
	}
	return st, nil
}

// CheckOutputs registers inputs (AddInputs) and checks every output
// (CheckOutput) and that no two outputs are the same file, however named
// (sameOutput). Inputs that do not exist are ignored (their own checks
// report them).
func CheckOutputs(outputs, inputs []string) error {
	AddInputs(inputs...)
	var outs []outputID
	for _, p := range outputs {
		if err := CheckOutput(p); err != nil {
			return err
		}
		st, _ := checkTarget(p)
		id := identify(p, st)
		for _, o := range outs {
			if !sameOutput(o, id) {
				continue
			}
			if filepath.Clean(o.path) == filepath.Clean(p) {
				return fmt.Errorf("%s: given as two outputs", p)
			}
			return fmt.Errorf("%s and %s are the same file: give two outputs", o.path, p)
		}
		outs = append(outs, id)
	}
	return nil
}

// SameOutput reports whether output paths a and b name one file, as
// CheckOutputs compares them (existing or not, however named).
func SameOutput(a, b string) bool {
	sa, _ := checkTarget(a)
	sb, _ := checkTarget(b)
	return sameOutput(identify(a, sa), identify(b, sb))
}

// outputID is the file an output path names, as the system would open
// it: an existing file by its device and inode (links and hard links to
// it compare equal); a file not made yet by the device and inode of the
// folder it would be made in (DirOf, resolved by the system: a link to
// the folder, a bind mount of it, or ".." after a link compare as that
// folder) and its name. Comparing cleaned path strings would miss the
// first two and take "out/link/../a.wav" for "out/a.wav".
type outputID struct {
	path string
	file os.FileInfo // the file; nil when it does not exist
	dir  os.FileInfo // its folder, when the file does not exist
	name string
}

// identify is p's outputID; st is p's (links followed), nil when p does
// not exist.
func identify(p string, st os.FileInfo) outputID {
	id := outputID{path: p, file: st}
	if st == nil {
		id.dir, _ = os.Stat(DirOf(p))
		id.name = filepath.Base(p)
	}
	return id
}

// sameOutput: a and b are one file. What cannot be known (a folder that
// cannot be stat'ed) is not the same.
func sameOutput(a, b outputID) bool {
	if a.file != nil || b.file != nil {
		return a.file != nil && b.file != nil && os.SameFile(a.file, b.file)
	}
	return a.dir != nil && b.dir != nil && os.SameFile(a.dir, b.dir) && sameName(a.name, b.name)
}

// sameName is name equality as the file system compares names (namesFold).
func sameName(a, b string) bool {
	return a == b || namesFold && strings.EqualFold(a, b)
}

// inputKind words a non-regular input's type.
func inputKind(m os.FileMode) string {
	if m&os.ModeNamedPipe != 0 {
		return "a pipe (opening one waits for a writer)"
	}
	return describeMode(m)
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

// temp is a temporary file of this process, open and flocked.
type temp struct {
	f    *os.File
	path string
}

func (t *temp) remove() {
	os.Remove(t.path) // while still locked: a sweeper never sees it unlocked
	t.f.Close()
	os.Remove(filepath.Dir(t.path)) // the folder, when it is empty
}

// tempDirPath is the temporary folder of output p, in the folder the
// system writes p to. A folder given with ".." after a name is resolved
// first (EvalSymlinks takes links and ".." as the system does), since the
// Joins and Dirs made on the temporary files' paths remove ".." by the
// text: "out/link/../a.wav" has its temporary files and lock beside the
// file it replaces, where another run writing that file looks for them.
func tempDirPath(p string) string {
	d := DirOf(p)
	if dotDotAfterName(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
	}
	return filepath.Join(d, TempDir)
}

// dotDotAfterName: path has a ".." that follows a name, the ".." that
// filepath.Clean removes by the text (a leading one it keeps).
func dotDotAfterName(path string) bool {
	named := false // the last element other than "." is a name
	for _, e := range strings.FieldsFunc(path, isSeparator) {
		switch e {
		case ".":
		case "..":
			if named {
				return true
			}
		default:
			named = true
		}
	}
	return false
}

func isSeparator(r rune) bool { return r < 0x80 && os.IsPathSeparator(uint8(r)) }

// tempDirOf returns (creating it) the temporary folder beside output p.
func tempDirOf(p string) (string, error) {
	d := tempDirPath(p)
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	st, err := os.Lstat(d)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a folder (pp-offline keeps its temporary files there)", d)
	}
	return d, nil
}

// newTemp creates and locks a new temporary file for output p. A folder
// removed by another process between our mkdir and our create is made
// again.
func newTemp(p string) (*temp, error) {
	var lastErr error
	for try := 0; try < 8; try++ {
		d, err := tempDirOf(p)
		if err != nil {
			return nil, err
		}
		var rnd [8]byte
		rand.Read(rnd[:])
		name := filepath.Join(d, filepath.Base(p)+"."+strconv.Itoa(os.Getpid())+"."+hex.EncodeToString(rnd[:])+".tmp")
		f, err := createTemp(name)
		if errors.Is(err, os.ErrNotExist) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := lockNB(f); err != nil && !flockUnsupported(err) {
			f.Close()
			os.Remove(name)
			return nil, err
		}
		// A sweeper may have taken it for stale between create and flock.
		fst, err1 := f.Stat()
		pst, err2 := os.Stat(name)
		if err1 != nil || err2 != nil || !os.SameFile(fst, pst) {
			f.Close()
			lastErr = os.ErrNotExist
			continue
		}
		return &temp{f, name}, nil
	}
	return nil, lastErr
}

// isTempName reports whether name is a temporary file's name of output
// base: "base.<pid>.<16 hex>.tmp".
func isTempName(base, name string) bool {
	rest, ok := cutNamePrefix(name, base+".")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".tmp")
	if !ok {
		return false
	}
	pid, rnd, ok := strings.Cut(rest, ".")
	if !ok || pid == "" || len(rnd) != 16 {
		return false
	}
	for _, c := range pid {
		if c < '0' || c > '9' {
			return false
		}
	}
	_, err := hex.DecodeString(rnd)
	return err == nil
}

// namesFold: the usual file systems of Windows (NTFS) and macOS (APFS,
// HFS+) match names without regard to case, so there "A.WAV" and "a.wav"
// are one output and a run locking one must see the other's lock. (On a
// case-sensitive volume of those systems this is merely cautious.)
const namesFold = runtime.GOOS == "windows" || runtime.GOOS == "darwin"

// cutNamePrefix is strings.CutPrefix as the file system compares names.
func cutNamePrefix(name, prefix string) (string, bool) {
	if len(name) < len(prefix) {
		return name, false
	}
	if head := name[:len(prefix)]; head == prefix || namesFold && strings.EqualFold(head, prefix) {
		return name[len(prefix):], true
	}
	return name, false
}

// errHeld: a temporary file's lock is held by a living process.
var errHeld = errors.New("held by a running process")

// sweep removes the stale temporary files of output p (see SweepTemps);
// with held, a temporary file another process holds is an error.
func sweep(p string, mine *temp) (removed []string, err error) {
	d := tempDirPath(p)
	st, err := os.Lstat(d)
	if err != nil || !st.IsDir() {
		return nil, nil
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, nil
	}
	base := filepath.Base(p)
	for _, e := range ents {
		name := filepath.Join(d, e.Name())
		if !e.Type().IsRegular() || !isTempName(base, e.Name()) || (mine != nil && name == mine.path) {
			continue
		}
		f, err := openNoFollow(name)
		if err != nil {
			continue
		}
		fst, err := f.Stat()
		if err != nil || !fst.Mode().IsRegular() {
			f.Close()
			continue
		}
		if _, isIn := inputOf(fst); isIn {
			f.Close()
			continue
		}
		if err := lockNB(f); err != nil {
			f.Close()
			if lockHeld(err) {
				return removed, errHeld
			}
			continue
		}
		// Still the file we locked (not replaced since)?
		if pst, err := os.Lstat(name); err == nil && os.SameFile(fst, pst) {
			if os.Remove(name) == nil {
				removed = append(removed, name)
			}
		}
		f.Close()
	}
	os.Remove(d) // when empty
	return removed, nil
}

// SweepTemps removes the temporary files a killed run left for output p:
// only files in TempDir beside it, named as this package names them,
// regular, no input of the run, and not locked by a living process. It
// returns what it removed.
func SweepTemps(p string) []string {
	r, _ := sweep(p, nil)
	return r
}

// Lock is held over a run's outputs (LockOutputs) until Unlock.
type Lock struct {
	temps []*temp
	outs  []string
}

// LockOutputs takes, without waiting, an exclusive hold on each output, so
// that two runs writing the same outputs cannot mix them: the second fails
// at once, naming the file, and writes nothing. The hold is a locked,
// empty temporary file in TempDir (removed by Unlock; after a SIGKILL the
// kernel drops the lock and the next run's sweep removes the file), so no
// lock file outlives a run that ends. Temporary files of killed runs are
// removed (SweepTemps).
func LockOutputs(outputs ...string) (*Lock, error) {
	l := &Lock{}
	for _, p := range outputs {
		if err := checkName(p); err != nil {
			l.Unlock()
			return nil, err
		}
		t, err := newTemp(p)
		if err != nil {
			l.Unlock()
			return nil, fmt.Errorf("%s: cannot lock the output: %w", p, PathErr(err))
		}
		l.temps, l.outs = append(l.temps, t), append(l.outs, p)
		if _, err := sweep(p, t); errors.Is(err, errHeld) {
			l.Unlock()
			return nil, fmt.Errorf("%s: another pp-offline run is writing this output now (its temporary file in %s is locked); not started", p, tempDirPath(p))
		}
	}
	return l, nil
}

// Unlock releases the hold and removes its files.
func (l *Lock) Unlock() {
	if l == nil {
		return
	}
	for _, t := range l.temps {
		t.remove()
	}
	l.temps, l.outs = nil, nil
}

// CheckTarget is the guard's check of one output whose folder may not
// exist yet: its name's length and checkTarget. Errors name path.
func CheckTarget(path string) error {
	if err := checkName(path); err != nil {
		return err
	}
	_, err := checkTarget(path)
	return err
}

// TryLock takes f's exclusive lock without waiting: flock on Unix,
// LockFileEx on the file's first byte on Windows (the locks Python's
// filelock takes, so the two exclude each other). held reports that
// another process holds it (or that the call was interrupted: try again);
// closing f releases it.
func TryLock(f *os.File) (held bool, err error) {
	err = lockNB(f)
	switch {
	case err == nil:
		return false, nil
	case lockHeld(err) || errors.Is(err, syscall.EINTR):
		return true, nil
	}
	return false, err
}

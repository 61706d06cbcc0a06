//go:build unix

package fileio

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckOutputs(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	in := filepath.Join(dir, "model.safetensors")
	os.WriteFile(in, []byte("weights"), 0o644)
	hard := filepath.Join(dir, "hard.wav")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.wav")
	os.Symlink(in, sym)
	ro := filepath.Join(dir, "ro.json")
	os.WriteFile(ro, []byte("[]"), 0o444)
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	ok1, ok2 := filepath.Join(dir, "out.wav"), filepath.Join(dir, "out.json")
	os.WriteFile(ok2, []byte("old"), 0o644) // an old output is replaced
	inputs := []string{in, filepath.Join(dir, "missing.wav")}
	if err := CheckOutputs([]string{ok1, ok2}, inputs); err != nil {
		t.Fatalf("good outputs: %v", err)
	}
	long := filepath.Join(dir, strings.Repeat("x", 250)+".wav")
	for _, c := range []struct {
		outs []string
		want string
	}{
		{[]string{in, ok2}, "is an input"},
		{[]string{"./" + filepath.Base(in), ok2}, "is the input"}, // relative to the test's directory: see below
		{[]string{hard, ok2}, "is the input"},
		{[]string{sym, ok2}, "is the input"},
		{[]string{"/dev/null", ok2}, "not a regular file (a device)"},
		{[]string{fifo, ok2}, "not a regular file (a named pipe)"},
		{[]string{dir, ok2}, "not a regular file (a directory)"},
		{[]string{ro, ok1}, "read-only"},
		{[]string{ok1, ok1}, "two outputs"},
		{[]string{long, ok1}, "the file name is 254 bytes"},
		{[]string{filepath.Join(dir, "no", "x.wav"), ok1}, "does not exist"},
	} {
		if strings.HasPrefix(c.outs[0], "./") {
			wd, _ := os.Getwd()
			os.Chdir(dir)
			err := CheckOutputs(c.outs, nil)
			os.Chdir(wd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want %q", c.outs, err, c.want)
			}
			continue
		}
		err := CheckOutputs(c.outs, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.outs[0][:min(20, len(c.outs[0]))]) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want %q", c.outs, err, c.want)
		}
	}
	// Two names of one new output file.
	os.WriteFile(ok1, nil, 0o644)
	other := filepath.Join(dir, "other.wav")
	os.Link(ok1, other)
	if err := CheckOutputs([]string{ok1, other}, nil); err == nil || !strings.Contains(err.Error(), "same file") {
		t.Errorf("hard-linked outputs: %v", err)
	}
	if b, _ := os.ReadFile(in); string(b) != "weights" {
		t.Fatal("the input was touched")
	}
}

// Every writer refuses a registered input (through a link too), a
// non-regular target and a read-only one, and leaves the target as it was.
func TestWritersGuard(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	in := filepath.Join(dir, "model.safetensors")
	os.WriteFile(in, []byte("weights"), 0o644)
	sym := filepath.Join(dir, "report.json")
	os.Symlink(in, sym)
	AddInputs(in)
	ro := filepath.Join(dir, "ro.json")
	os.WriteFile(ro, []byte("keep"), 0o444)
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	writers := map[string]func(p string) error{
		"WriteAtomic": func(p string) error { return WriteAtomic(p, []byte("x")) },
		"WriteAllAtomic": func(p string) error {
			return WriteAllAtomic(File{filepath.Join(dir, "ok.wav"), nil}, File{p, []byte("x")})
		},
		"WriteStreamAtomic": func(p string) error {
			return WriteStreamAtomic(p, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
		},
	}
	for name, w := range writers {
		for target, want := range map[string]string{in: "is an input", sym: "is the input", ro: "read-only", fifo: "named pipe", "/dev/null": "a device", dir: "a directory"} {
			err := w(target)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), target) {
				t.Errorf("%s(%s): %v, want %q", name, target, err, want)
			}
		}
	}
	if b, _ := os.ReadFile(in); string(b) != "weights" {
		t.Fatal("the input was replaced")
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep" {
		t.Fatal("the read-only file was replaced")
	}
	if st, _ := os.Lstat(fifo); st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatal("the FIFO was replaced")
	}
	if _, err := os.Stat(filepath.Join(dir, "ok.wav")); err == nil {
		t.Fatal("WriteAllAtomic wrote one file of a refused pair")
	}
	if _, err := os.Stat(filepath.Join(dir, TempDir)); err == nil {
		t.Fatal("temporary folder left")
	}
}

// A second run cannot take the outputs a first holds; the hold comes back
// after Unlock; stale temporary files of a killed run are removed by the
// next run that takes the lock; a user's files named like temporaries
// (beside the output, or inside the folder but an input) are kept; no
// lock or temporary file stays behind.
func TestLockOutputs(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.wav"), filepath.Join(dir, "a.json")
	tdir := filepath.Join(dir, TempDir)
	os.Mkdir(tdir, 0o755)
	stale := filepath.Join(tdir, "a.wav.12345.0123456789abcdef.tmp")
	os.WriteFile(stale, []byte("half"), 0o600)
	userBeside := filepath.Join(dir, ".a.wav.tmp12345") // the old pattern: a user's file now
	os.WriteFile(userBeside, []byte("mine"), 0o644)
	input := filepath.Join(tdir, "a.json.1.fedcba9876543210.tmp")
	os.WriteFile(input, []byte("an input"), 0o644)
	AddInputs(input)
	other := filepath.Join(tdir, "b.wav.1.0123456789abcdef.tmp")
	os.WriteFile(other, []byte("another output's"), 0o600)
	l, err := LockOutputs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temporary file left")
	}
	for _, p := range []string{userBeside, input, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed", p)
		}
	}
	if _, err := LockOutputs(b); err == nil || !strings.Contains(err.Error(), "another pp-offline run is writing") {
		t.Fatalf("second lock: %v", err)
	}
	// A write while held: its temporary file is locked too, not swept.
	if err := WriteAtomic(a, []byte("A")); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	l2, err := LockOutputs(b, a)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l2.Unlock()
	if ents, _ := os.ReadDir(tdir); len(ents) != 2 { // input, other
		t.Errorf("left in the temporary folder: %v", ents)
	}
	os.Remove(input)
	os.Remove(other)
	if got := SweepTemps(a); len(got) != 0 {
		t.Errorf("swept %v from nothing", got)
	}
	if _, err := os.Stat(tdir); !os.IsNotExist(err) {
		t.Errorf("empty temporary folder left")
	}
}

// OpenInput never blocks on a FIFO and refuses it; ReadFileLimit too.
func TestOpenInputFIFO(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.wav")
	syscall.Mkfifo(fifo, 0o644)
	link := filepath.Join(dir, "link.wav")
	os.Symlink(fifo, link)
	done := make(chan error, 3)
	go func() {
		_, err := OpenInput(fifo)
		done <- err
		_, err = OpenInput(link)
		done <- err
		_, err = ReadFileLimit(link, 10)
		done <- err
	}()
	for i := 0; i < 3; i++ {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "is a pipe") {
				t.Fatalf("%v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
	}
	reg := filepath.Join(dir, "a.wav")
	os.WriteFile(reg, []byte("RIFF"), 0o644)
	f, err := OpenInput(reg)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !IsInput(reg) {
		t.Fatal("an opened input is not registered")
	}
}

// A temporary's name is matched to its output as the file system matches
// names: regardless of case on Windows and macOS, exactly elsewhere.
func TestTempNameCase(t *testing.T) {
	const tmp = "A.WAV.123.0123456789abcdef.tmp"
	if !isTempName("A.WAV", tmp) {
		t.Fatal("own name not matched")
	}
	if got := isTempName("a.wav", tmp); got != namesFold {
		t.Fatalf("isTempName(a.wav, %s) = %v on %s", tmp, got, runtime.GOOS)
	}
	if isTempName("a.wa", tmp) || isTempName("a.wav", "b.wav.123.0123456789abcdef.tmp") {
		t.Fatal("another output's temporary matched")
	}
}

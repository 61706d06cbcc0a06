package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputs(t *testing.T) {
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
	ok1, ok2 := filepath.Join(dir, "out.wav"), filepath.Join(dir, "out.json")
	os.WriteFile(ok2, []byte("old"), 0o644) // an old output is replaced
	inputs := []string{in, filepath.Join(dir, "missing.wav")}
	if err := CheckOutputs([]string{ok1, ok2}, inputs); err != nil {
		t.Fatalf("good outputs: %v", err)
	}
	for _, c := range []struct {
		outs []string
		want string
	}{
		{[]string{in, ok2}, "is the input"},
		{[]string{"./" + filepath.Base(in), ok2}, "is the input"}, // relative to the test's directory: see below
		{[]string{hard, ok2}, "is the input"},
		{[]string{sym, ok2}, "is the input"},
		{[]string{"/dev/null", ok2}, "not a regular file (a device)"},
		{[]string{dir, ok2}, "not a regular file (a directory)"},
		{[]string{ro, ok1}, "read-only"},
		{[]string{ok1, ok1}, "two outputs"},
	} {
		if strings.HasPrefix(c.outs[0], "./") {
			wd, _ := os.Getwd()
			os.Chdir(dir)
			err := CheckOutputs(c.outs, []string{filepath.Base(in)})
			os.Chdir(wd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want %q", c.outs, err, c.want)
			}
			continue
		}
		err := CheckOutputs(c.outs, inputs)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.outs[0]) {
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

// A second run cannot take the outputs a first holds; the lock comes back
// after Unlock; stale temporary files of a killed run are removed by the
// next run that takes the lock, and lock files do not stay behind.
func TestLockOutputs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.wav"), filepath.Join(dir, "a.json")
	stale := filepath.Join(dir, ".a.wav.tmp12345")
	os.WriteFile(stale, []byte("half"), 0o600)
	keep := filepath.Join(dir, ".b.wav.tmp1")
	os.WriteFile(keep, []byte("another output's"), 0o600)
	l, err := LockOutputs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temporary file left")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Error("another output's temporary file removed")
	}
	if _, err := LockOutputs(b); err == nil || !strings.Contains(err.Error(), "another pp-offline run is writing") {
		t.Fatalf("second lock: %v", err)
	}
	l.Unlock()
	l2, err := LockOutputs(b, a)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l2.Unlock()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("lock file %s left behind", e.Name())
		}
	}
}

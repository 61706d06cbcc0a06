package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The guard on Windows (guard_test.go has the Unix tests; these run under
// wine in scripts/test-windows.sh): LockFileEx locks, the identity of a
// file by volume and file index whatever the path's spelling, the
// read-only attribute, and replacing an output through a rename.

func TestWindowsLockOutputs(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.wav")
	l, err := LockOutputs(a)
	if err != nil {
		t.Fatal(err)
	}
	// Names differing in case are one file there.
	for _, p := range []string{a, filepath.ToSlash(a), `\\?\` + a, filepath.Join(dir, "A.WAV")} {
		if _, err := LockOutputs(p); err == nil || !strings.Contains(err.Error(), "another pp-offline run is writing") || !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("second lock of %s: %v", p, err)
		}
	}
	// A write while held replaces the output.
	if err := WriteAtomic(a, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(a, []byte("AA")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(a); string(got) != "AA" {
		t.Fatalf("output %q", got)
	}
	l.Unlock()
	l2, err := LockOutputs(a)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l2.Unlock()
	if _, err := os.Stat(filepath.Join(dir, TempDir)); !os.IsNotExist(err) {
		t.Errorf("temporary folder left: %v", err)
	}
}

// TryLock is per handle on Windows: a second handle on the same file in
// the same process is refused until the first is closed.
func TestWindowsTryLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	f1, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if held, err := TryLock(f1); held || err != nil {
		t.Fatalf("first lock: %v %v", held, err)
	}
	if held, err := TryLock(f2); !held || err != nil {
		t.Fatalf("second handle: held %v, %v", held, err)
	}
	f1.Close()
	if held, err := TryLock(f2); held || err != nil {
		t.Fatalf("after the first handle closed: %v %v", held, err)
	}
}

// An input is recognised by its volume and file index, not by its path:
// another case, forward slashes or the \\?\ prefix name the same file.
func TestWindowsInputOtherSpellings(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wav")
	os.WriteFile(in, []byte("input"), 0o644)
	if err := CheckOutputs(nil, []string{in}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "IN.WAV"), filepath.ToSlash(in), `\\?\` + in} {
		err := CheckOutputs([]string{p}, nil)
		if err == nil || !strings.Contains(err.Error(), "pp-offline never writes over an input") {
			t.Errorf("%s: %v", p, err)
		}
		if !IsInput(p) {
			t.Errorf("%s: not taken for the input", p)
		}
	}
	if got, _ := os.ReadFile(in); string(got) != "input" {
		t.Fatalf("input changed: %q", got)
	}
	// Two spellings of one output are one file.
	out := filepath.Join(dir, "out.wav")
	os.WriteFile(out, nil, 0o644)
	if err := CheckOutputs([]string{out, filepath.Join(dir, "OUT.wav")}, nil); err == nil || !strings.Contains(err.Error(), "the same file") {
		t.Errorf("two spellings of one output: %v", err)
	}
}

// A file with the read-only attribute is not replaced.
func TestWindowsReadOnlyAttribute(t *testing.T) {
	defer ResetInputs()
	p := filepath.Join(t.TempDir(), "ro.json")
	os.WriteFile(p, []byte("keep"), 0o644)
	if err := os.Chmod(p, 0o444); err != nil { // sets FILE_ATTRIBUTE_READONLY
		t.Fatal(err)
	}
	defer os.Chmod(p, 0o644)
	if err := CheckOutput(p); err == nil || !strings.Contains(err.Error(), "read-only") || !strings.HasPrefix(err.Error(), p+": ") {
		t.Fatalf("read-only output: %v", err)
	}
	if err := WriteAtomic(p, []byte("new")); err == nil {
		t.Fatal("read-only output replaced")
	}
	if got, _ := os.ReadFile(p); string(got) != "keep" {
		t.Fatalf("read-only output changed: %q", got)
	}
}

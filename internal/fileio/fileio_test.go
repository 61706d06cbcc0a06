package fileio

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestWriteAllAtomic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.wav"), filepath.Join(dir, "b.json")
	if err := WriteAllAtomic(File{a, []byte("A")}, File{b, []byte("B")}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{a: "A", b: "B"} {
		got, _ := os.ReadFile(p)
		st, _ := os.Stat(p)
		if string(got) != want || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o644) { // Windows has no mode bits
			t.Fatalf("%s: %q, mode %v", p, got, st.Mode())
		}
	}
	// The second file cannot be renamed (its target is a directory): the
	// first is removed again and no temporary file stays.
	c, d := filepath.Join(dir, "c.wav"), filepath.Join(dir, "d")
	os.Mkdir(d, 0o755)
	os.WriteFile(filepath.Join(d, "x"), nil, 0o644)
	err := WriteAllAtomic(File{c, []byte("C")}, File{d, []byte("D")})
	if err == nil || !strings.HasPrefix(err.Error(), d+": ") {
		t.Fatalf("got %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 { // a.wav, b.json, d/
		t.Fatalf("left %d entries", len(ents))
	}
	// A missing directory: one line naming the file, nothing written.
	err = WriteAtomic(filepath.Join(dir, "no", "e"), nil)
	if err == nil || !errors.Is(err, os.ErrNotExist) || strings.Count(err.Error(), ".tmp") != 0 {
		t.Fatalf("got %v", err)
	}
}

func TestWriteAtomicOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	for _, s := range []string{"first", "second"} {
		if err := WriteAtomic(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != s {
			t.Errorf("content %q, want %q", b, s)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files left in the directory", len(ents))
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "r.json"), nil); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

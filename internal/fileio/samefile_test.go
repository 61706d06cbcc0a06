//go:build unix

package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkedTree makes dir/x/sub, dir/out, the link dir/out/link → ../x/sub
// and the link dir/outlink → out: dir/out/link/../a.wav is, for the
// system, dir/x/a.wav (the link's target, then ..), not dir/out/a.wav.
func linkedTree(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{"x/sub", "out"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../x/sub", filepath.Join(dir, "out", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("out", filepath.Join(dir, "outlink")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDirOf(t *testing.T) {
	for in, want := range map[string]string{
		"a.wav": ".", "x/a.wav": "x", "/a.wav": "/", "/": "/", "": ".",
		"x//a.wav": "x", "x/a.wav/": "x", "out/link/../a.wav": "out/link/..", "//a": "/",
	} {
		if got := DirOf(in); got != want {
			t.Errorf("DirOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// Two names of one output that does not exist yet are refused naming
// both, whether they meet through ".." after a link or through a linked
// folder; two files that only look alike once ".." is removed by the text
// are two outputs.
func TestCheckOutputsOneNewFileTwoNames(t *testing.T) {
	defer ResetInputs()
	dir := linkedTree(t)
	j := func(p string) string { return dir + "/" + p } // as given: no Clean
	for _, c := range [][2]string{
		{j("x/a.wav"), j("out/link/../a.wav")},
		{j("out/a.wav"), j("outlink/a.wav")},
		{j("out/link/../a.wav"), j("x/sub/../a.wav")},
	} {
		err := CheckOutputs(c[:], nil)
		if err == nil || !strings.Contains(err.Error(), c[0]+" and "+c[1]+" are the same file") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v", c, err)
		}
	}
	if err := CheckOutputs([]string{j("out/a.wav"), j("out/link/../a.wav")}, nil); err != nil {
		t.Errorf("out/a.wav and x/a.wav are two files: %v", err)
	}
	if err := CheckOutputs([]string{j("out/a.wav"), j("out/a.wav")}, nil); err == nil || !strings.Contains(err.Error(), "given as two outputs") {
		t.Errorf("one name twice: %v", err)
	}
	// The folder is the one the system opens: out/new exists, x/new not.
	os.Mkdir(j("out/new"), 0o755)
	if err := CheckOutput(j("out/link/../new/a.wav")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("x/new/a.wav: %v", err)
	}
}

// An output named with ".." after a link has its lock and temporary
// files beside the file it replaces, so another run writing that file by
// its plain name sees the lock.
func TestLockThroughDotDot(t *testing.T) {
	defer ResetInputs()
	dir := linkedTree(t)
	plain, odd := dir+"/x/a.wav", dir+"/out/link/../a.wav"
	l, err := LockOutputs(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockOutputs(odd); err == nil || !strings.Contains(err.Error(), "another pp-offline run is writing") {
		t.Errorf("second lock through ..: %v", err)
	}
	l.Unlock()
	if err := WriteAtomic(odd, []byte("A")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(plain); err != nil || string(b) != "A" {
		t.Errorf("x/a.wav: %q, %v", b, err)
	}
	for _, d := range []string{"out", "x", "x/sub"} {
		if _, err := os.Stat(filepath.Join(dir, d, TempDir)); !os.IsNotExist(err) {
			t.Errorf("temporary folder left in %s", d)
		}
	}
}

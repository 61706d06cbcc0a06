package voices

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"NATF0.pt", "NATM1.pt", "custom.WAV", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "sub.pt"), 0o755)
	other := filepath.Join(t.TempDir(), "mine.wav")
	os.WriteFile(other, []byte("x"), 0o644)

	// A basename inside the directory, as offline.py joins it.
	if p, err := Resolve("NATF0.pt", dir); err != nil || p != filepath.Join(dir, "NATF0.pt") {
		t.Errorf("NATF0.pt: %q, %v", p, err)
	}
	// An absolute path: os.path.join keeps it as is.
	if p, err := Resolve(other, dir); err != nil || p != other {
		t.Errorf("absolute: %q, %v", p, err)
	}
	// A direct path, no directory.
	if p, err := Resolve(other, ""); err != nil || p != other {
		t.Errorf("direct: %q, %v", p, err)
	}
	// A relative path to a file outside the directory (relative to the
	// working directory).
	rel := "../testdata/tiny/voices/TINYF0.wav"
	if p, err := Resolve(rel, dir); err != nil || p != rel {
		t.Errorf("relative direct path: %q, %v", p, err)
	}

	_, err := Resolve("NATF9.pt", dir)
	want := `voice prompt "NATF9.pt" not found in ` + strconv.Quote(dir) + ` (tried ` + filepath.Join(dir, "NATF9.pt") + `, NATF9.pt); available: NATF0.pt, NATM1.pt, custom.WAV`
	if err == nil || err.Error() != want {
		t.Errorf("missing voice:\n got %v\nwant %s", err, want)
	}
	if _, err := Resolve("sub.pt", dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := Resolve("", dir); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := Resolve("x.pt", ""); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("no dir: %v", err)
	}
	if _, err := Resolve("x.pt", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing dir: %v", err)
	}
	empty := t.TempDir()
	if _, err := Resolve("x.pt", empty); err == nil || !strings.HasSuffix(err.Error(), "it holds no .pt or .wav files") {
		t.Errorf("empty dir: %v", err)
	}
	if got := List(dir); strings.Join(got, ",") != "NATF0.pt,NATM1.pt,custom.WAV" {
		t.Errorf("List = %v", got)
	}
	// The fixtures' voice directory.
	if p, err := Resolve("TINYF0.pt", "../testdata/tiny/voices"); err != nil || !IsEmbeddings(p) {
		t.Errorf("fixture: %q %v", p, err)
	}
	if p, err := Resolve("TINYF0.wav", "../testdata/tiny/voices"); err != nil || IsEmbeddings(p) {
		t.Errorf("fixture wav: %q %v", p, err)
	}
}

func TestIsEmbeddings(t *testing.T) {
	for p, want := range map[string]bool{
		"NATF0.pt": true, "voices/NATF0.pt": true, "X.PT": true, "a.b.pt": true,
		"NATF0.wav": false, "x.pt.wav": false, "pt": false, ".pt/x.wav": false, "x.pth": false, "": false,
	} {
		if got := IsEmbeddings(p); got != want {
			t.Errorf("IsEmbeddings(%q) = %v", p, got)
		}
	}
}

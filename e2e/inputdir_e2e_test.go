package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --input-dir takes every file the reader takes, by content, whatever its
// name (a FLAC named .dat included), and lists what it skips. The FLAC
// copy of a WAV gives the WAV's outputs; MP3 and Ogg files (made with lame
// and oggenc when they are installed) are run too.
func TestBatchInputDirAnyFormat(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	writeClip(t, filepath.Join(in, "a.wav"), 1920*4)
	writeFLAC(t, filepath.Join(in, "a.wav"), filepath.Join(in, "b.flac"))
	writeFLAC(t, filepath.Join(in, "a.wav"), filepath.Join(in, "c.dat"))
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not audio"), 0o644)
	want := []string{"a.json", "a.wav", "b.json", "b.wav", "c.json", "c.wav"}
	if _, err := exec.LookPath("lame"); err == nil {
		if o, err := exec.Command("lame", "--quiet", "-b", "64", filepath.Join(in, "a.wav"), filepath.Join(in, "d.mp3")).CombinedOutput(); err != nil {
			t.Fatalf("lame: %v %s", err, o)
		}
		want = append(want, "d.json", "d.wav")
	}
	if _, err := exec.LookPath("oggenc"); err == nil {
		if o, err := exec.Command("oggenc", "--quiet", "-o", filepath.Join(in, "e.ogg"), filepath.Join(in, "a.wav")).CombinedOutput(); err != nil {
			t.Fatalf("oggenc: %v %s", err, o)
		}
		want = append(want, "e.json", "e.wav")
	}
	_, stderr, code := run(t, batchArgs("--input-dir", in, "--output-dir", out, "--greedy")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := outputsOf(t, out); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if !strings.Contains(stderr, "skipping") || !strings.Contains(stderr, "notes.txt") {
		t.Fatalf("the skipped file is not listed:\n%s", stderr)
	}
	for _, name := range []string{"b", "c"} {
		for _, ext := range []string{".wav", ".json"} {
			a, _ := os.ReadFile(filepath.Join(out, "a"+ext))
			b, _ := os.ReadFile(filepath.Join(out, name+ext))
			if !bytes.Equal(a, b) {
				t.Fatalf("%s%s (FLAC) differs from a%s (the same samples as WAV)", name, ext, ext)
			}
		}
	}
}

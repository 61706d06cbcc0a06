package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
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

// --input-dir runs every .wav file: one that is not audio (random bytes,
// empty) is an item that fails alone, in the report, with its error, as
// a manifest's bad input_wav does (exit 1), never a skipped file; a file
// of another name is taken by content only (notes.txt is skipped).
func TestBatchInputDirBadWAVsFail(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	rep := filepath.Join(t.TempDir(), "report.json")
	writeClip(t, filepath.Join(in, "good.wav"), 1920*3)
	noise := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(noise)
	os.WriteFile(filepath.Join(in, "bad.wav"), noise, 0o644)
	os.WriteFile(filepath.Join(in, "empty.wav"), nil, 0o644)
	os.WriteFile(filepath.Join(in, "cut.flac"), noise[:100], 0o644) // named as audio, no FLAC inside
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not audio"), 0o644)
	_, stderr, code := run(t, batchArgs("--input-dir", in, "--output-dir", out, "--report", rep, "--greedy")...)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	if got := outputsOf(t, out); strings.Join(got, " ") != "good.json good.wav" {
		t.Fatalf("outputs %v", got)
	}
	if l := grepLine(stderr, "skipping"); !strings.Contains(l, "notes.txt") || strings.Contains(l, ".wav") {
		t.Fatalf("want notes.txt alone skipped, got %q:\n%s", l, stderr)
	}
	r := readReport(t, rep)
	status := map[string]string{}
	for _, it := range r.Items {
		name := filepath.Base(it.InputWAV)
		status[name] = it.Status
		if it.Status == "failed" && !strings.Contains(it.Reason, name) {
			t.Errorf("%s: the reason does not name the file: %q", name, it.Reason)
		}
		if it.Status == "failed" && !strings.Contains(stderr, "failed "+it.InputWAV+": ") {
			t.Errorf("%s: its failure is not logged:\n%s", name, stderr)
		}
	}
	want := map[string]string{"bad.wav": "failed", "cut.flac": "failed", "empty.wav": "failed", "good.wav": "ok"}
	if fmt.Sprint(status) != fmt.Sprint(want) || r.Counts.OK != 1 || r.Counts.Failed != 3 {
		t.Fatalf("report: %v %+v, want %v", status, r.Counts, want)
	}
}

// A folder whose only .wav files are not audio still runs them (each
// fails: exit 1), not "no audio files" (exit 2).
func TestBatchInputDirOnlyBadWAVs(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(in, "empty.wav"), nil, 0o644)
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not audio"), 0o644)
	_, stderr, code := run(t, batchArgs("--input-dir", in, "--output-dir", out, "--greedy")...)
	if code != 1 || !strings.Contains(stderr, "failed "+filepath.Join(in, "empty.wav")+": ") || !strings.Contains(grepLine(stderr, "skipping"), "notes.txt") {
		t.Fatalf("exit %d, want 1 with empty.wav failed and notes.txt skipped:\n%s", code, stderr)
	}
}

// --input-dir D --output-dir D with WAV outputs of a FLAC input: the rerun
// (the documented resume: the same command) takes a.flac alone, skips the
// a.wav it wrote, and writes nothing again; the WAV was not made an input
// of the run by the look at its content (which would refuse its write).
func TestBatchInputDirRerunInPlace(t *testing.T) {
	in := t.TempDir()
	src := filepath.Join(t.TempDir(), "src.wav")
	writeClip(t, src, 1920*3)
	writeFLAC(t, src, filepath.Join(in, "a.flac"))
	args := batchArgs("--input-dir", in, "--output-dir", in, "--greedy")
	for i, want := range []string{"1 ok", "1 skipped"} {
		_, stderr, code := run(t, args...)
		if code != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("run %d: exit %d, want 0 and %q:\n%s", i+1, code, want, stderr)
		}
	}
	if got := outputsOf(t, in); strings.Join(got, " ") != "a.flac a.json a.wav" {
		t.Fatalf("folder %v", got)
	}
}

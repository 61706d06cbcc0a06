package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/batchjob"
)

// resumeJob is a one-item batch whose settings a test changes between runs:
// the manifest line's fields and extra flags; the model files are copies,
// so that one can be touched.
type resumeJob struct {
	dir, out, rep string
	fields        map[string]any
	flags         []string
	model         string // the copy of model.safetensors
}

func newResumeJob(t *testing.T) *resumeJob {
	dir := t.TempDir()
	j := &resumeJob{dir: dir, out: filepath.Join(dir, "out"), rep: filepath.Join(dir, "report.json"),
		fields: map[string]any{"input_wav": "a.wav", "seed": 5}}
	writeClip(t, filepath.Join(dir, "a.wav"), 1920*3)
	j.model = filepath.Join(dir, "model.safetensors")
	data, err := os.ReadFile(tiny + "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(j.model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return j
}

// run runs the batch and returns its log and report.
func (j *resumeJob) run(t *testing.T, extra ...string) (string, *batchjob.Report) {
	t.Helper()
	line, _ := json.Marshal(j.fields)
	manifest := filepath.Join(j.dir, "jobs.jsonl")
	if err := os.WriteFile(manifest, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	args := batchArgs(append([]string{"--manifest", manifest, "--output-dir", j.out, "--report", j.rep}, append(j.flags, extra...)...)...)
	args = setFlag(args, "--moshi-weight", j.model)
	_, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	return stderr, readReport(t, j.rep)
}

// Resume by fingerprint: an unchanged rerun skips the item and leaves its
// outputs alone; a change of any setting that made them redoes it, saying
// which in one line, and the rerun after that skips it again.
func TestBatchResumeByFingerprint(t *testing.T) {
	j := newResumeJob(t)
	wav := filepath.Join(j.out, "a.wav")
	if _, r := j.run(t); r.Counts.OK != 1 {
		t.Fatalf("first run: %+v", r.Counts)
	}
	if _, err := os.Stat(batchjob.FingerprintPath(wav)); err != nil {
		t.Fatalf("no fingerprint beside the outputs: %v", err)
	}
	skipped := func(step string, extra ...string) {
		t.Helper()
		before, _ := os.ReadFile(wav)
		st0, _ := os.Stat(wav)
		log, r := j.run(t, extra...)
		st1, _ := os.Stat(wav)
		after, _ := os.ReadFile(wav)
		if r.Counts.Skipped != 1 || r.Counts.OK != 0 || !strings.Contains(log, "skipping 1 items") || strings.Contains(log, "redoing") {
			t.Fatalf("%s: unchanged rerun not skipped: %+v\n%s", step, r.Counts, log)
		}
		if !bytes.Equal(before, after) || !st0.ModTime().Equal(st1.ModTime()) {
			t.Fatalf("%s: a skipped item's output was rewritten", step)
		}
	}
	redone := func(step, why string, extra ...string) {
		t.Helper()
		log, r := j.run(t, extra...)
		if r.Counts.OK != 1 || r.Counts.Skipped != 0 {
			t.Fatalf("%s: not redone: %+v\n%s", step, r.Counts, log)
		}
		if want := "redoing " + wav + ": " + why; !strings.Contains(log, want+"\n") {
			t.Fatalf("%s: log lacks %q:\n%s", step, want, log)
		}
		skipped(step+", then unchanged", extra...)
	}
	skipped("unchanged")

	j.fields["seed"] = 6
	redone("seed", "seed changed")
	j.fields["greedy"] = true
	j.fields["temp_text"] = 0.5
	redone("greedy and temp_text", "greedy, temp_text changed")
	j.fields["temp_audio"] = 0.6
	redone("temp_audio", "temp_audio changed")
	j.fields["topk_audio"] = 7
	redone("topk_audio", "topk_audio changed")
	j.fields["topk_text"] = 3
	redone("topk_text", "topk_text changed")
	j.fields["text_prompt"] = "You like tea."
	redone("text prompt", "the text prompt changed")
	j.fields["voice_prompt"] = "TINYF0-bf16.pt"
	redone("voice", "the voice prompt changed")
	j.fields["output_format"] = "float32"
	redone("output format", "output_format changed")
	writeClip(t, filepath.Join(j.dir, "a.wav"), 1920*4)
	redone("input", "the input changed")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(j.model, later, later); err != nil {
		t.Fatal(err)
	}
	redone("model file", "the model file (--moshi-weight) changed")
	j.flags = []string{"--weights", "q8_0"}
	redone("--weights", "--weights changed")
	j.flags = append(j.flags, "--compute-dtype", "bf16")
	redone("--compute-dtype", "--compute-dtype changed")
	j.flags = append(j.flags, "--kv-dtype", "bf16")
	redone("--kv-dtype", "--kv-dtype changed")

	// Another version's fingerprint, and none (an older version's outputs).
	fpPath := batchjob.FingerprintPath(wav)
	var fp batchjob.Fingerprint
	data, _ := os.ReadFile(fpPath)
	if err := json.Unmarshal(data, &fp); err != nil {
		t.Fatal(err)
	}
	fp.Version = "0.0.1 (commit 0000000)"
	data = fp.Encode()
	os.WriteFile(fpPath, data, 0o644)
	redone("version", "pp-offline's version changed")
	os.Remove(fpPath)
	redone("no fingerprint", "no fingerprint (written by an older version)")

	// --force redoes an item whose fingerprint matches.
	if log, r := j.run(t, "--force"); r.Counts.OK != 1 || strings.Contains(log, "skipping") {
		t.Fatalf("--force: %+v\n%s", r.Counts, log)
	}
}

// The redone outputs are those of a clean run with the new settings: a
// job whose seed changed equals a fresh job with that seed.
func TestBatchRedoneEqualsCleanRun(t *testing.T) {
	j := newResumeJob(t)
	j.run(t)
	j.fields["seed"] = 11
	j.run(t)
	k := newResumeJob(t)
	k.fields["seed"] = 11
	k.run(t)
	for _, name := range []string{"a.wav", "a.json"} {
		a, _ := os.ReadFile(filepath.Join(j.out, name))
		b, _ := os.ReadFile(filepath.Join(k.out, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("%s: redone output differs from a clean run", name)
		}
	}
	fa, _ := os.Open(batchjob.FingerprintPath(filepath.Join(j.out, "a.wav")))
	defer fa.Close()
	da, _ := io.ReadAll(fa)
	var fp batchjob.Fingerprint
	if err := json.Unmarshal(da, &fp); err != nil || fp.Seed != 11 {
		t.Fatalf("fingerprint %s: %v", da, err)
	}
}

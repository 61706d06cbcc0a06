package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/batchjob"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"gopkg.in/yaml.v3"
)

// The batch tests run `pp-offline batch` on the tiny fixtures and compare
// every output with a run of the main command on the same item.

// batchArgs are the model flags of the tiny fixtures, for `pp-offline batch`.
func batchArgs(extra ...string) []string {
	wd, _ := os.Getwd()
	t := filepath.Join(wd, tiny)
	args := []string{"batch",
		"--config", t + "/config.json", "--moshi-weight", t + "/model.safetensors",
		"--mimi-weight", t + "/mimi.safetensors", "--tokenizer", t + "/tokenizer.model",
		"--device", "cpu", "--voice-prompt-dir", t + "/voices", "--voice-prompt", "TINYF0.pt",
	}
	return append(args, extra...)
}

// writeClip writes the first n samples of the tiny input (repeated to reach
// n when it is longer) as a 24 kHz WAV.
func writeClip(t *testing.T, path string, n int) {
	t.Helper()
	x := readPCM(t, tiny+"input.wav")
	y := make([]float32, n)
	for i := range y {
		y[i] = x[i%len(x)]
	}
	var b bytes.Buffer
	if err := audio.EncodePCM16(&b, y, 24000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// batchItem is one manifest line of the tests and what the main command needs to run it alone.
type batchItem struct {
	name    string // input stem
	samples int
	voice   string // voice_prompt of the line ("" = the default TINYF0.pt)
	fields  map[string]any
	flags   []string // the same settings for the main command
}

func (b batchItem) line(dir string) string {
	m := map[string]any{"input_wav": b.name + ".wav"}
	for k, v := range b.fields {
		m[k] = v
	}
	if b.voice != "" {
		m["voice_prompt"] = b.voice
	}
	js, _ := json.Marshal(m)
	return string(js)
}

// mixedItems: lengths from 3 frames to 2× the fixture, .pt (f32, bf16),
// WAV and path voices, greedy and seeded sampling, no text prompt, the
// other output formats.
func mixedItems() []batchItem {
	return []batchItem{
		{name: "full", samples: 73200, fields: map[string]any{"greedy": true}, flags: []string{"--greedy"}},
		{name: "short", samples: 1920*9 + 700, voice: "TINYF0.wav", fields: map[string]any{"greedy": true}, flags: []string{"--greedy", "--voice-prompt", "TINYF0.wav"}},
		{name: "mid", samples: 1920 * 23, voice: "TINYF0-bf16.pt", fields: map[string]any{"seed": 11}, flags: []string{"--seed", "11", "--voice-prompt", "TINYF0-bf16.pt"}},
		{name: "tiny3", samples: 1920 * 3, fields: map[string]any{"seed": 3, "temp_audio": 0.5, "topk_text": 5}, flags: []string{"--seed", "3", "--temp-audio", "0.5", "--topk-text", "5"}},
		{name: "long", samples: 73200 * 2, voice: "voices/V.pt", fields: map[string]any{"greedy": true, "text_prompt": ""}, flags: []string{"--greedy", "--text-prompt", "", "--voice-prompt", "VOICEPATH"}},
		{name: "rich", samples: 1920*17 + 5, fields: map[string]any{"greedy": true, "output_format": "float32", "output_text_format": "rich"},
			flags: []string{"--greedy", "--output-format", "float32", "--output-text-format", "rich"}},
	}
}

// writeJob writes the inputs and the manifest of items into dir.
func writeJob(t *testing.T, dir string, items []batchItem) string {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "voices"), 0o755)
	pt, _ := os.ReadFile(tiny + "voices/TINYF0.pt")
	os.WriteFile(filepath.Join(dir, "voices/V.pt"), pt, 0o644)
	var lines []string
	for _, it := range items {
		writeClip(t, filepath.Join(dir, it.name+".wav"), it.samples)
		lines = append(lines, it.line(dir))
	}
	p := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	return p
}

// single runs the main command on one item and returns its two outputs.
func single(t *testing.T, dir string, it batchItem) [2][]byte {
	t.Helper()
	out := t.TempDir()
	args := setFlag(tinyArgs(out, "--quiet"), "--input-wav", filepath.Join(dir, it.name+".wav"))
	for i := 0; i < len(it.flags); i++ {
		f := it.flags[i]
		if f == "--greedy" {
			args = append(args, f)
			continue
		}
		v := it.flags[i+1]
		i++
		if v == "VOICEPATH" {
			v = filepath.Join(dir, it.voice)
		}
		args = setFlag(args, f, v)
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("single run of %s: exit %d: %s", it.name, code, stderr)
	}
	w, _ := os.ReadFile(filepath.Join(out, "out.wav"))
	j, _ := os.ReadFile(filepath.Join(out, "out.json"))
	return [2][]byte{w, j}
}

// readReport reads a --report file.
func readReport(t *testing.T, p string) *batchjob.Report {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var r batchjob.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return &r
}

// outputsOf lists the files of dir (recursively), sorted, but the items'
// fingerprints (resume_e2e_test.go tests those).
func outputsOf(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !batchjob.IsFingerprintName(d.Name()) {
			r, _ := filepath.Rel(dir, p)
			names = append(names, r)
		}
		return nil
	})
	sort.Strings(names)
	return names
}

func TestBatchMatchesSingleRuns(t *testing.T) {
	dir := t.TempDir()
	items := mixedItems()
	manifest := writeJob(t, dir, items)
	want := map[string][2][]byte{}
	for _, it := range items {
		want[it.name] = single(t, dir, it)
	}
	for _, B := range []string{"1", "3", "8"} {
		t.Run("B="+B, func(t *testing.T) {
			out := t.TempDir()
			rep := filepath.Join(t.TempDir(), "report.json")
			_, stderr, code := run(t, batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", B, "--report", rep)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.Count(stderr, "loading moshi") != 1 {
				t.Fatalf("the LM was not loaded exactly once:\n%s", stderr)
			}
			for _, it := range items {
				w, _ := os.ReadFile(filepath.Join(out, it.name+".wav"))
				j, _ := os.ReadFile(filepath.Join(out, it.name+".json"))
				if !bytes.Equal(w, want[it.name][0]) || !bytes.Equal(j, want[it.name][1]) {
					t.Errorf("%s: batch output differs from the single run (wav %d vs %d bytes)", it.name, len(w), len(want[it.name][0]))
				}
			}
			if got := outputsOf(t, out); len(got) != 2*len(items) {
				t.Fatalf("outputs %v", got)
			}
			r := readReport(t, rep)
			// The batch is never larger than the items to run.
			if r.Counts.OK != len(items) || r.BatchSize != min(atoi(B), len(items)) || r.Finished == nil {
				t.Fatalf("report %+v", r.Counts)
			}
			for i, e := range r.Items {
				if e.Status != "ok" || e.Line != i+1 || e.Frames == 0 || e.Seed == nil {
					t.Fatalf("report item %+v", e)
				}
			}
			if *r.Items[2].Seed != 11 {
				t.Fatalf("seed %d, want 11", *r.Items[2].Seed)
			}
		})
	}
	// The default batch size is chosen, and said why.
	_, stderr, code := run(t, batchArgs("--manifest", manifest, "--output-dir", t.TempDir())...)
	if code != 0 || !strings.Contains(stderr, "per conversation") || !strings.Contains(stderr, "threads ") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

func wdTiny(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, tiny)
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// A manifest with a bad line is refused before anything loads, naming the line.
func TestBatchBadManifest(t *testing.T) {
	dir := t.TempDir()
	writeClip(t, filepath.Join(dir, "a.wav"), 1920*3)
	ok := `{"input_wav": "a.wav", "output_wav": "o/a.wav", "output_text": "o/a.json"}`
	for _, c := range []struct{ line, want string }{
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "temperature": 1}`, `jobs.jsonl:3: unknown key "temperature"`},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "greedy": "yes"}`, `jobs.jsonl:3: "greedy": want a boolean, got a string "yes"`},
		{`{"input_wav": "a.wav", "output_wav": "o/a.wav", "output_text": "o/b.json"}`, `jobs.jsonl:3: output_wav `},
		{`{"input_wav": "a.wav", "output_wav": "a.wav", "output_text": "o/b.json"}`, `jobs.jsonl:3: output_wav ` + filepath.Join(dir, "a.wav") + ` is the input_wav of line 1`},
		{`not json`, `jobs.jsonl:3: not a JSON object`},
	} {
		p := filepath.Join(dir, "jobs.jsonl")
		os.WriteFile(p, []byte(ok+"\n\n"+c.line+"\n"), 0o644)
		// The weights do not exist: a run that got as far as loading would say so.
		_, stderr, code := run(t, append(batchArgs("--manifest", p), "--moshi-weight", filepath.Join(dir, "nope.safetensors"))...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "nope.safetensors") || strings.Contains(stderr, "panic") {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.line, code, stderr, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "o")); err == nil {
			t.Errorf("%s: output folder made", c.line)
		}
	}
	os.WriteFile(filepath.Join(dir, "jobs.jsonl"), []byte(`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "`+filepath.Join(wdTiny(t), "tokenizer.model")+`"}`), 0o644)
	if _, stderr, code := run(t, batchArgs("--manifest", filepath.Join(dir, "jobs.jsonl"))...); code != 2 || !strings.Contains(stderr, "--tokenizer") {
		t.Errorf("output over the tokenizer: exit %d %s", code, stderr)
	}
	if _, stderr, code := run(t, batchArgs("--manifest", filepath.Join(dir, "jobs.jsonl"), "--no-such-flag")...); code != 2 {
		t.Errorf("unknown flag: exit %d %s", code, stderr)
	}
	if _, stderr, code := run(t, batchArgs("--input-dir", dir)...); code != 2 || !strings.Contains(stderr, "--output-dir") {
		t.Errorf("--input-dir alone: exit %d %s", code, stderr)
	}
}

// An item with a bad WAV fails alone; the others are written; exit 1.
func TestBatchBadItemFailsAlone(t *testing.T) {
	dir := t.TempDir()
	writeClip(t, filepath.Join(dir, "a.wav"), 1920*5)
	writeClip(t, filepath.Join(dir, "c.wav"), 1920*7)
	os.WriteFile(filepath.Join(dir, "b.wav"), []byte("RIFF....not really a wav file at all"), 0o644)
	lines := []string{
		`{"input_wav": "a.wav", "greedy": true}`,
		`{"input_wav": "b.wav", "greedy": true}`,
		`{"input_wav": "c.wav", "greedy": true}`,
	}
	p := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	out, rep := filepath.Join(dir, "out"), filepath.Join(dir, "report.json")
	_, stderr, code := run(t, batchArgs("--manifest", p, "--output-dir", out, "--report", rep, "--batch-size", "3")...)
	if code != 1 || !strings.Contains(stderr, "jobs.jsonl:2 ("+filepath.Join(dir, "b.wav")+"): ") || strings.Contains(stderr, "panic") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if got := outputsOf(t, out); strings.Join(got, " ") != "a.json a.wav c.json c.wav" {
		t.Fatalf("outputs %v", got)
	}
	// Off a terminal: a timestamped line per finished item.
	if m := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+ \[info\] ok \S*jobs\.jsonl:[13] `).FindAllString(stderr, -1); len(m) != 2 {
		t.Fatalf("want a timestamped line per written item:\n%s", stderr)
	}
	r := readReport(t, rep)
	if r.Counts.OK != 2 || r.Counts.Failed != 1 || r.Items[1].Status != "failed" || !strings.Contains(r.Items[1].Reason, "b.wav") {
		t.Fatalf("report %+v", r.Counts)
	}
	// A rerun skips the two and fails the bad one again.
	_, stderr, code = run(t, batchArgs("--manifest", p, "--output-dir", out, "--report", rep)...)
	if r := readReport(t, rep); code != 1 || r.Counts.Skipped != 2 || r.Counts.Failed != 1 {
		t.Fatalf("rerun: exit %d, %+v\n%s", code, r.Counts, stderr)
	}
}

// Shards 0/3, 1/3, 2/3 (by flag, by Slurm's and Kubernetes' variables)
// together cover the manifest exactly once.
func TestBatchShards(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 7 {
		writeClip(t, filepath.Join(dir, fmt.Sprintf("in%d.wav", i)), 1920*(2+i))
		lines = append(lines, fmt.Sprintf(`{"input_wav": "in%d.wav", "greedy": true}`, i))
	}
	p := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	out := filepath.Join(dir, "out")
	seen := map[int]int{}
	for i, how := range []struct {
		flags []string
		env   []string
		log   string
	}{
		{[]string{"--shard", "0/3"}, nil, "--shard 0/3"},
		{nil, []string{"SLURM_ARRAY_TASK_ID=5", "SLURM_ARRAY_TASK_MIN=4", "SLURM_ARRAY_TASK_COUNT=3"}, "Slurm array task 5"},
		{[]string{"--shard-count", "3"}, []string{"JOB_COMPLETION_INDEX=2"}, "Kubernetes Indexed Job"},
	} {
		rep := filepath.Join(dir, fmt.Sprintf("report%d.json", i))
		cmd := exec.Command(binPath, append(batchArgs("--manifest", p, "--output-dir", out, "--report", rep), how.flags...)...)
		cmd.Env = append(os.Environ(), how.env...)
		var e bytes.Buffer
		cmd.Stderr = &e
		if err := cmd.Run(); err != nil || !strings.Contains(e.String(), how.log) || !strings.Contains(e.String(), fmt.Sprintf("shard %d/3", i)) {
			t.Fatalf("shard %d: %v\n%s", i, err, e.String())
		}
		for _, it := range readReport(t, rep).Items {
			if it.Status != "ok" || it.Index%3 != i {
				t.Fatalf("shard %d ran %+v", i, it)
			}
			seen[it.Index]++
		}
	}
	for i := range 7 {
		if seen[i] != 1 {
			t.Fatalf("item %d run %d times (%v)", i, seen[i], seen)
		}
	}
	if got := outputsOf(t, out); len(got) != 14 {
		t.Fatalf("outputs %v", got)
	}
}

// --input-dir: every WAV (with --recursive, of subfolders too), outputs at
// the same relative paths, identical to single runs.
func TestBatchInputDir(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(in, "sub"), 0o755)
	writeClip(t, filepath.Join(in, "a.wav"), 1920*4)
	writeClip(t, filepath.Join(in, "sub", "b.wav"), 1920*6)
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("x"), 0o644)
	_, stderr, code := run(t, batchArgs("--input-dir", in, "--output-dir", out, "--recursive", "--greedy")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := outputsOf(t, out); strings.Join(got, " ") != "a.json a.wav sub/b.json sub/b.wav" {
		t.Fatalf("outputs %v", got)
	}
	want := single(t, filepath.Join(in, "sub"), batchItem{name: "b", flags: []string{"--greedy"}})
	w, _ := os.ReadFile(filepath.Join(out, "sub/b.wav"))
	j, _ := os.ReadFile(filepath.Join(out, "sub/b.json"))
	if !bytes.Equal(w, want[0]) || !bytes.Equal(j, want[1]) {
		t.Fatal("sub/b differs from its single run")
	}
}

// longJob writes n identical inputs of secs seconds (greedy: every output is
// the same) and returns the manifest, the output folder and the expected outputs.
func longJob(t *testing.T, n int, secs float64) (manifest, out string, want [2][]byte) {
	dir := t.TempDir()
	var lines []string
	for i := range n {
		writeClip(t, filepath.Join(dir, fmt.Sprintf("in%d.wav", i)), int(secs*24000))
		lines = append(lines, fmt.Sprintf(`{"input_wav": "in%d.wav", "greedy": true}`, i))
	}
	manifest = filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(manifest, []byte(strings.Join(lines, "\n")), 0o644)
	return manifest, filepath.Join(dir, "out"), single(t, dir, batchItem{name: "in0", flags: []string{"--greedy"}})
}

// startUntil starts the batch and returns once at least k transcripts are written.
func startUntil(t *testing.T, args []string, out string, k int) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(out, "in*.json"))
		if len(m) >= k {
			return cmd, &e
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no %d outputs appeared:\n%s", k, e.String())
		}
	}
}

// checkAllOutputs: every item's two outputs exactly once, each the expected
// bytes, nothing else (no temporaries) left.
func checkAllOutputs(t *testing.T, out string, n int, want [2][]byte) {
	t.Helper()
	got := outputsOf(t, out)
	if len(got) != 2*n {
		t.Fatalf("%d files in %s: %v", len(got), out, got)
	}
	for i := range n {
		w, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("in%d.wav", i)))
		j, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("in%d.json", i)))
		if !bytes.Equal(w, want[0]) || !bytes.Equal(j, want[1]) {
			t.Fatalf("in%d: output differs from the single run", i)
		}
	}
}

// A job SIGKILLed half way and restarted finishes with every output present
// exactly once, none corrupt, and a right report; stale temporaries are cleaned.
func TestBatchKilledAndResumed(t *testing.T) {
	const n = 8
	manifest, out, want := longJob(t, n, 20)
	rep := filepath.Join(filepath.Dir(manifest), "report.json")
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--report", rep, "--batch-size", "1")
	cmd, _ := startUntil(t, args, out, 2)
	cmd.Process.Kill()
	cmd.Wait()
	// What a kill during a write leaves: a temporary file, and a WAV whose
	// transcript was not renamed yet.
	os.MkdirAll(filepath.Join(out, fileio.TempDir), 0o755)
	os.WriteFile(filepath.Join(out, fileio.TempDir, "in7.wav.4242.0123456789abcdef.tmp"), []byte("RIFF half"), 0o600)
	os.WriteFile(filepath.Join(out, "in7.wav"), want[0], 0o644)
	// Done are the items with a fingerprint, written after their outputs
	// (a kill in between leaves outputs without one: redone).
	done, _ := filepath.Glob(filepath.Join(out, ".in*.wav.fp"))
	if len(done) >= n {
		t.Fatalf("the job finished before it was killed")
	}
	_, stderr, code := run(t, args...)
	if code != 0 || !strings.Contains(stderr, "temporary files of an interrupted run") {
		t.Fatalf("restart: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, n, want)
	r := readReport(t, rep)
	if r.Counts.Skipped != len(done) || r.Counts.OK != n-len(done) || r.Counts.Failed != 0 || r.Counts.NotRun != 0 || r.Interrupted != "" {
		t.Fatalf("report counts %+v (%d done before the kill)", r.Counts, len(done))
	}
	for _, e := range r.Items {
		if (e.Status == "skipped") != (e.Seed == nil) {
			t.Fatalf("report item %+v", e)
		}
	}
}

// SIGTERM: no partial item, the report written, exit 143; a rerun resumes.
func TestBatchSIGTERMResumes(t *testing.T) {
	const n = 6
	manifest, out, want := longJob(t, n, 20)
	rep := filepath.Join(filepath.Dir(manifest), "report.json")
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--report", rep, "--batch-size", "2")
	cmd, e := startUntil(t, args, out, 1)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 || !strings.Contains(e.String(), "rerun to resume") {
		t.Fatalf("exit %v:\n%s", err, e.String())
	}
	r := readReport(t, rep)
	if r.Interrupted != "terminated" || r.Counts.OK < 1 || r.Counts.NotRun < 1 || r.Counts.OK+r.Counts.NotRun != n {
		t.Fatalf("report %+v", r.Counts)
	}
	for _, it := range r.Items {
		_, werr := os.Stat(it.OutputWAV)
		_, jerr := os.Stat(it.OutputText)
		if (it.Status == "ok") != (werr == nil) || (werr == nil) != (jerr == nil) {
			t.Fatalf("%s: status %s but outputs %v %v", it.InputWAV, it.Status, werr, jerr)
		}
	}
	firstOK := r.Counts.OK
	_, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, n, want)
	if r := readReport(t, rep); r.Counts.Skipped != firstOK || r.Counts.OK != n-firstOK {
		t.Fatalf("rerun report %+v", r.Counts)
	}
}

// scripts/k8s-indexed-job.yaml parses as an Indexed Job whose shard count
// matches its completions, and its container command, run here with
// JOB_COMPLETION_INDEX 0..n-1 (and the tiny model's flags), covers the
// manifest exactly once.
func TestKubernetesIndexedJob(t *testing.T) {
	data, err := os.ReadFile("scripts/k8s-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Template       struct {
				Spec struct {
					RestartPolicy string `yaml:"restartPolicy"`
					Containers    []struct {
						Name    string   `yaml:"name"`
						Command []string `yaml:"command"`
						Env     []struct{ Name, Value string }
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if job.APIVersion != "batch/v1" || job.Kind != "Job" || s.CompletionMode != "Indexed" || s.Completions < 2 || len(s.Template.Spec.Containers) != 1 {
		t.Fatalf("not an Indexed Job: %+v", job)
	}
	ctr := s.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	if env[batchjob.ShardEnv] != fmt.Sprint(s.Completions) {
		t.Fatalf("%s=%q, completions %d", batchjob.ShardEnv, env[batchjob.ShardEnv], s.Completions)
	}
	if len(ctr.Command) < 2 || ctr.Command[0] != "pp-offline" || ctr.Command[1] != "batch" {
		t.Fatalf("command %q", ctr.Command)
	}
	// The job's /data volume, here.
	data0 := t.TempDir()
	var lines []string
	for i := range 5 {
		writeClip(t, filepath.Join(data0, fmt.Sprintf("in%d.wav", i)), 1920*(2+i))
		lines = append(lines, fmt.Sprintf(`{"input_wav": "in%d.wav", "greedy": true}`, i))
	}
	os.WriteFile(filepath.Join(data0, "jobs.jsonl"), []byte(strings.Join(lines, "\n")), 0o644)
	seen := map[int]int{}
	for idx := range s.Completions {
		var args []string
		for _, a := range ctr.Command[1:] {
			a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", fmt.Sprint(idx)) // as the kubelet expands it
			if strings.HasPrefix(a, "/data/") {
				a = filepath.Join(data0, strings.TrimPrefix(a, "/data/"))
			}
			args = append(args, a)
		}
		args = append(args, batchArgs()[1:]...) // the model: the tiny fixtures instead of the cache
		cmd := exec.Command(binPath, args...)
		cmd.Env = append(os.Environ(), "JOB_COMPLETION_INDEX="+fmt.Sprint(idx), batchjob.ShardEnv+"="+env[batchjob.ShardEnv], "HF_HUB_OFFLINE=1")
		var e bytes.Buffer
		cmd.Stderr = &e
		if err := cmd.Run(); err != nil || !strings.Contains(e.String(), "Kubernetes Indexed Job") {
			t.Fatalf("index %d: %v\n%s", idx, err, e.String())
		}
		for _, it := range readReport(t, filepath.Join(data0, fmt.Sprintf("report-%d.json", idx))).Items {
			if it.Status != "ok" {
				t.Fatalf("index %d: %+v", idx, it)
			}
			seen[it.Index]++
		}
	}
	for i := range 5 {
		if seen[i] != 1 {
			t.Fatalf("item %d run %d times", i, seen[i])
		}
	}
}

// random-weights writes a model the main command runs (here of the tiny
// shape, with a smaller tokenizer padded to the config's text_card).
func TestRandomWeights(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := run(t, "random-weights", "--config", tiny+"config.json", "--tokenizer", "testdata/tokenizers/char.model", "--output", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	out := t.TempDir()
	args := tinyArgs(out, "--greedy", "-q")
	for flag, f := range map[string]string{"--config": "config.json", "--moshi-weight": "model.safetensors", "--mimi-weight": "mimi.safetensors", "--tokenizer": "tokenizer.model"} {
		args = setFlag(args, flag, filepath.Join(dir, f))
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("main command on random weights: exit %d: %s", code, stderr)
	}
	if got := outputsOf(t, out); len(got) != 2 {
		t.Fatalf("outputs %v", got)
	}
}

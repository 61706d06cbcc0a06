package batchjob

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/internal/fileio"
)

var def = Settings{VoicePrompt: "V.pt", TextPrompt: "hi", Seed: -1, TempAudio: 0.8, TempText: 0.7,
	TopKAudio: 250, TopKText: 25, OutputFormat: "pcm16", OutputTextFormat: "list"}

func writeManifest(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestManifestFieldsAndPaths(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("/abs/a.json is not an absolute path on Windows")
	}
	p := writeManifest(t,
		`{"input_wav": "in/a.wav", "output_wav": "out/a.wav", "output_text": "/abs/a.json", "seed": 7, "greedy": true, "temp_audio": 1, "topk_text": 3, "voice_prompt": "v/X.wav", "text_prompt": "", "output_format": "float32", "output_text_format": "rich"}`,
		``,
		`{"input_wav": "b.wav", "output_wav": "b.wav.out.wav", "output_text": "b.json"}`)
	items, err := ReadManifest(p, def, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	a, b := items[0], items[1]
	if a.InputWAV != filepath.Join(dir, "in/a.wav") || a.OutputText != "/abs/a.json" || a.Seed != 7 || !a.Greedy ||
		a.TempAudio != 1 || a.TopKText != 3 || a.TopKAudio != 250 || !a.VoiceIsPath || a.VoicePrompt != filepath.Join(dir, "v/X.wav") ||
		a.TextPrompt != "" || a.OutputFormat != "float32" || a.OutputTextFormat != "rich" || a.Line != 1 || a.Index != 0 {
		t.Fatalf("item 0: %+v", a)
	}
	if b.Line != 3 || b.Index != 1 || b.VoicePrompt != "V.pt" || b.VoiceIsPath || b.TextPrompt != "hi" || b.Seed != -1 {
		t.Fatalf("item 1: %+v", b)
	}
}

func TestManifestErrorsNameTheLine(t *testing.T) {
	ok := `{"input_wav": "a.wav", "output_wav": "a.out.wav", "output_text": "a.json"}`
	for _, c := range []struct{ line, want string }{
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "colour": 1}`, `:2: unknown key "colour"`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "seed": "7"}`, `:2: "seed": want an integer, got a string "7"`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "seed": 1.5}`, `:2: "seed": want an integer, got 1.5`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "greedy": 1}`, `:2: "greedy": want a boolean`},
		{`{"input_wav": 3}`, `:2: "input_wav": want a string`},
		{`{"output_wav": "b.out.wav", "output_text": "b.json"}`, `:2: "input_wav" is missing`},
		{`{"input_wav": "b.wav", "output_text": "b.json"}`, `:2: "output_wav" is missing`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "output_format": "mp3"}`, `:2: "output_format" must be pcm16, float32 or flac, not "mp3"`},
		{`[1, 2]`, `:2: not a JSON object`},
		{`{"input_wav": "b.wav"`, `:2: not a JSON object`},
		{`{"input_wav": "b.wav", "input_wav": "c.wav"}`, `:2: key "input_wav" given twice`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json"} {}`, `:2: more than one JSON value`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "topk_audio": -1}`, `:2: "topk_audio": want an integer ≥ 1`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "topk_audio": 0}`, `:2: "topk_audio": want an integer ≥ 1 (as --topk-audio), got 0`},
		{`{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "topk_text": 0}`, `:2: "topk_text": want an integer ≥ 1`},
		{`{"input_wav": "b.wav", "output_wav": "` + strings.Repeat("x", MaxLineBytes) + `"}`, `:2: line longer than`},
	} {
		p := writeManifest(t, ok, c.line, ok)
		_, err := ReadManifest(p, def, "")
		var le *LineError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%s: got %v, want %q", c.line[:min(len(c.line), 60)], err, c.want)
		}
	}
	// Above the vocabulary is all of it, as --topk-text 99999999999999.
	if items, err := ReadManifest(writeManifest(t, `{"input_wav": "b.wav", "output_wav": "b.out.wav", "output_text": "b.json", "topk_text": 99999999999999}`), def, ""); err != nil || items[0].TopKText != math.MaxInt32 {
		t.Errorf("huge topk_text: %v", err)
	}
	if _, err := ReadManifest(writeManifest(t, "", " "), def, ""); err == nil || !strings.Contains(err.Error(), "no items") {
		t.Errorf("empty manifest: %v", err)
	}
	// A UTF-8 byte-order mark (Windows editors) is not part of line 1;
	// UTF-16 is named as such.
	if items, err := ReadManifest(writeManifest(t, "\ufeff"+ok, ok), def, ""); err != nil || len(items) != 2 || items[0].Line != 1 {
		t.Errorf("manifest with a BOM: %v", err)
	}
	if _, err := ReadManifest(writeManifest(t, "\xff\xfe{\x00"), def, ""); err == nil || !strings.Contains(err.Error(), ":1: the manifest is UTF-16") {
		t.Errorf("UTF-16 manifest: %v", err)
	}
}

func TestCheckDuplicatesAndInputs(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`, `{"input_wav": "b.wav", "output_wav": "./o.wav", "output_text": "p.json"}`}, ":2: output_wav "},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.wav"}`}, ":1: output_wav and output_text are the same file"},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`, `{"input_wav": "b.wav", "output_wav": "a.wav", "output_text": "p.json"}`}, ":2: output_wav "},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "v/X.pt", "voice_prompt": "v/X.pt"}`}, "is the voice_prompt of line 1"},
	} {
		p := writeManifest(t, c.lines...)
		items, err := ReadManifest(p, def, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(items, p, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.lines, err, c.want)
		}
	}
	p := writeManifest(t, `{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`)
	items, _ := ReadManifest(p, def, "")
	if err := Check(items, p, nil, map[string]string{"--report": filepath.Join(filepath.Dir(p), "o.json")}); err == nil {
		t.Error("report over an output accepted")
	}
}

func TestOutputDirDefaultAndListDir(t *testing.T) {
	in := t.TempDir()
	out := filepath.Join(in, "out")
	for _, f := range []string{"b.wav", "a.WAV", "sub/c.wav", "notes.txt", "out/old.wav", ".hidden.wav"} {
		os.MkdirAll(filepath.Dir(filepath.Join(in, f)), 0o755)
		os.WriteFile(filepath.Join(in, f), nil, 0o644)
	}
	items, err := ListDir(in, out, false, def)
	if err != nil || len(items) != 2 || items[0].InputWAV != filepath.Join(in, "a.WAV") || items[0].OutputWAV != filepath.Join(out, "a.wav") || items[1].OutputText != filepath.Join(out, "b.json") {
		t.Fatalf("flat: %v %+v", err, items)
	}
	items, err = ListDir(in, out, true, def)
	if err != nil || len(items) != 3 || items[2].OutputWAV != filepath.Join(out, "sub/c.wav") || items[2].Index != 2 {
		t.Fatalf("recursive: %v %+v", err, items)
	}
	if err := Check(items, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ListDir(in, in, false, def); err != nil {
		t.Fatal(err)
	} else if items, _ := ListDir(in, in, false, def); Check(items, "", nil, nil) == nil {
		t.Fatal("--output-dir = --input-dir: outputs over inputs accepted")
	}
	p := writeManifest(t, `{"input_wav": "x/a.wav"}`)
	items, err = ReadManifest(p, def, "res")
	if err != nil || items[0].OutputWAV != filepath.Join("res", "a.wav") || items[0].OutputText != filepath.Join("res", "a.json") {
		t.Fatalf("--output-dir default: %v %+v", err, items)
	}
}

func TestShards(t *testing.T) {
	var items []*Item
	for i := range 10 {
		items = append(items, &Item{Index: i})
	}
	seen := map[int]int{}
	for i := range 3 {
		s, err := ParseShard([]string{"0/3", "1/3", "2/3"}[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range s.Select(items) {
			seen[it.Index]++
		}
	}
	if len(seen) != 10 {
		t.Fatalf("covered %v", seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("item %d in %d shards", k, n)
		}
	}
	for _, bad := range []string{"3/3", "-1/3", "1", "a/b", "0/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("--shard %s accepted", bad)
		}
	}
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		flag  string
		count int
		env   func(string) string
		want  string // shard, or "error"
	}{
		{"", 0, env(), "0/1"},
		{"1/4", 0, env("SLURM_ARRAY_TASK_ID", "0", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_COUNT", "3"), "1/4"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "7", "SLURM_ARRAY_TASK_MIN", "5", "SLURM_ARRAY_TASK_COUNT", "3"), "2/3"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_MIN", "5", "SLURM_ARRAY_TASK_COUNT", "3", "SLURM_ARRAY_TASK_STEP", "2"), "2/3"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "8", "SLURM_ARRAY_TASK_MIN", "5", "SLURM_ARRAY_TASK_COUNT", "3"), "error"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "1"), "error"},
		{"", 3, env("JOB_COMPLETION_INDEX", "2"), "2/3"},
		{"", 0, env("JOB_COMPLETION_INDEX", "1", "JOB_COMPLETIONS", "4"), "1/4"},
		{"", 0, env("JOB_COMPLETION_INDEX", "1"), "error"},
		{"", 2, env("JOB_COMPLETION_INDEX", "2"), "error"},
		{"", 2, env(), "error"},
		// --shard-count with a Slurm array: the task id is the shard, so
		// reruns of one task or of a sparse set run the original shards.
		{"", 4, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "2", "SLURM_ARRAY_TASK_MAX", "2", "SLURM_ARRAY_TASK_COUNT", "1"), "2/4"},
		{"", 4, env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "2"), "3/4"},
		{"", 4, env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "2"), "1/4"},
		{"", 4, env("SLURM_ARRAY_TASK_ID", "0", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "4"), "0/4"},
		{"", 4, env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_MIN", "4", "SLURM_ARRAY_TASK_MAX", "4", "SLURM_ARRAY_TASK_COUNT", "1"), "error"},
		{"", 4, env("SLURM_ARRAY_TASK_ID", "-1"), "error"},
		{"0/4", 4, env("SLURM_ARRAY_TASK_ID", "0"), "error"},
		// Without it: a whole dense array as before; a one-task rerun or a
		// sparse array is refused (its count is not the original's).
		{"", 0, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "2", "SLURM_ARRAY_TASK_MAX", "2", "SLURM_ARRAY_TASK_COUNT", "1"), "error"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "2"), "error"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "2", "SLURM_ARRAY_TASK_STEP", "2"), "1/2"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "0", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "0", "SLURM_ARRAY_TASK_COUNT", "1"), "0/1"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "4"), "2/4"},
	} {
		s, err := FindShard(c.flag, c.count, c.env)
		got := s.String()
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("%q %d: got %s (%v), want %s", c.flag, c.count, got, err, c.want)
		}
	}
}

func TestCompleteAndStale(t *testing.T) {
	dir := t.TempDir()
	it := &Item{OutputWAV: filepath.Join(dir, "o.wav"), OutputText: filepath.Join(dir, "o.json")}
	var b bytes.Buffer
	audio.EncodePCM16(&b, make([]float32, 2400), 24000)
	wav := b.Bytes()
	if ok, _ := Complete(it); ok {
		t.Fatal("no files: complete")
	}
	os.WriteFile(it.OutputWAV, wav, 0o644)
	if ok, why := Complete(it); ok || !strings.Contains(why, "o.json") {
		t.Fatalf("no JSON: %v %s", ok, why)
	}
	os.WriteFile(it.OutputText, []byte(`["a", "b"`), 0o644)
	if ok, _ := Complete(it); ok {
		t.Fatal("cut JSON: complete")
	}
	os.WriteFile(it.OutputText, []byte(`["a", "b"]`), 0o644)
	if ok, why := Complete(it); !ok {
		t.Fatal(why)
	}
	if s, err := WAVSeconds(it.OutputWAV, true); err != nil || s != 0.1 {
		t.Fatalf("%v %v", s, err)
	}
	os.WriteFile(it.OutputWAV, wav[:len(wav)-10], 0o644)
	if ok, _ := Complete(it); ok {
		t.Fatal("truncated WAV: complete")
	}
	// The sweep: only fileio's temporaries (its folder, its names, not
	// locked); files merely named like temporaries are kept.
	tdir := filepath.Join(dir, fileio.TempDir)
	os.Mkdir(tdir, 0o755)
	stale := []string{filepath.Join(tdir, "o.wav.77.0123456789abcdef.tmp"), filepath.Join(tdir, "o.json.9.0123456789abcdef.tmp")}
	keep := []string{filepath.Join(dir, ".o.wav.tmp123"), filepath.Join(tdir, "o.wav.tmp1"), filepath.Join(tdir, "other.wav.1.0123456789abcdef.tmp")}
	for _, n := range append(stale, keep...) {
		os.WriteFile(n, nil, 0o644)
	}
	removed, err := CleanStale([]*Item{it})
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, n := range keep {
		if _, err := os.Stat(n); err != nil {
			t.Fatalf("%s removed", n)
		}
	}
}

// Outputs over the manifest, a model file or the report, over a
// non-regular or read-only file, and inputs that are named pipes, are
// refused by Check with one line naming the file.
func TestCheckGuard(t *testing.T) {
	defer fileio.ResetInputs()
	p := writeManifest(t, `{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`)
	dir := filepath.Dir(p)
	model := filepath.Join(dir, "model.safetensors")
	os.WriteFile(model, []byte("w"), 0o644)
	ro := filepath.Join(dir, "ro.json")
	os.WriteFile(ro, []byte("[]"), 0o444)
	fifo := filepath.Join(dir, "fifo.wav")
	mustMkfifo(t, fifo)
	for _, c := range []struct {
		line       string
		ins, outs  map[string]string
		want, name string
	}{
		{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "` + filepath.Base(p) + `"}`, nil, nil, "is the manifest", filepath.Base(p)},
		{`{"input_wav": "a.wav", "output_wav": "model.safetensors", "output_text": "o.json"}`, map[string]string{"--moshi-weight": model}, nil, "is the file of --moshi-weight", "model.safetensors"},
		{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "ro.json"}`, nil, nil, "read-only", "ro.json"},
		{`{"input_wav": "a.wav", "output_wav": "/dev/null", "output_text": "o.json"}`, nil, nil, "not a regular file", "/dev/null"},
		{`{"input_wav": "fifo.wav", "output_wav": "o.wav", "output_text": "o.json"}`, nil, nil, "is a pipe", "fifo.wav"},
		{`{"input_wav": "a.wav", "output_wav": "` + strings.Repeat("n", 240) + `.wav", "output_text": "o.json"}`, nil, nil, "the file name is", "nnnn"},
		{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`, map[string]string{"--moshi-weight": model}, map[string]string{"--report": model}, "--report", "model.safetensors"},
		{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json"}`, nil, map[string]string{"--report": p}, "is the manifest", filepath.Base(p)},
	} {
		os.WriteFile(p, []byte(c.line+"\n"), 0o644)
		items, err := ReadManifest(p, def, "")
		if err != nil {
			t.Fatal(err)
		}
		err = Check(items, p, c.ins, c.outs)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.line[:min(60, len(c.line))], err, c.want)
		}
	}
	// A manifest that is a named pipe is refused at once.
	mfifo := filepath.Join(dir, "jobs-fifo.jsonl")
	mustMkfifo(t, mfifo)
	done := make(chan error)
	go func() { _, err := ReadManifest(mfifo, def, ""); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is a pipe") {
			t.Fatalf("FIFO manifest: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO manifest blocked")
	}
}

// --input-dir given as a link to a folder (no trailing slash) lists that
// folder; a link to a named pipe is not an item; the output folder is not
// descended into when reached through a link inside the input folder.
func TestListDirLinks(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.MkdirAll(filepath.Join(real, "sub"), 0o755)
	for _, f := range []string{"a.wav", "sub/b.wav"} {
		os.WriteFile(filepath.Join(real, f), nil, 0o644)
	}
	mustMkfifo(t, filepath.Join(base, "fifo"))
	os.Symlink(filepath.Join(base, "fifo"), filepath.Join(real, "p.wav"))
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	items, err := ListDir(link, filepath.Join(base, "out"), true, def)
	if err != nil || len(items) != 2 || items[0].InputWAV != filepath.Join(link, "a.wav") || items[1].OutputWAV != filepath.Join(base, "out", "sub", "b.wav") {
		t.Fatalf("%v %+v", err, items)
	}
	// outputs in real/res, given as outlink → real/res: a rerun must not
	// take last run's outputs for inputs.
	os.MkdirAll(filepath.Join(real, "res"), 0o755)
	os.WriteFile(filepath.Join(real, "res", "a.wav"), nil, 0o644)
	outLink := filepath.Join(base, "outlink")
	os.Symlink(filepath.Join(real, "res"), outLink)
	items, err = ListDir(real, outLink, true, def)
	if err != nil || len(items) != 2 {
		t.Fatalf("%v %+v", err, items)
	}
	if err := Check(items, "", nil, nil); err != nil {
		t.Fatal(err)
	}
}

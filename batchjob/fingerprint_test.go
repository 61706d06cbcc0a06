package batchjob

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Every field of a fingerprint is named when it differs; an equal one has
// no change; a round trip through the file keeps it.
func TestFingerprintChanges(t *testing.T) {
	base := Fingerprint{Version: "v", Input: FileID{"a.wav", 10, 1}, Voice: FileID{"V.pt", 5, 2}, TextPrompt: HashString("p"),
		Seed: 1, TempAudio: 0.8, TempText: 0.7, TopKAudio: 250, TopKText: 25, OutputFormat: "pcm16", OutputTextFormat: "list",
		Model: FileID{"m", 1, 1}, Mimi: FileID{"c", 1, 1}, Tokenizer: FileID{"t", 1, 1}, Config: "h", Compute: "f32"}
	if c := base.Changes(&base); c != nil {
		t.Fatalf("equal fingerprints differ in %v", c)
	}
	for _, tc := range []struct {
		what string
		set  func(f *Fingerprint)
	}{
		{"pp-offline's version", func(f *Fingerprint) { f.Version = "w" }},
		{"the input", func(f *Fingerprint) { f.Input.MTime++ }},
		{"the input", func(f *Fingerprint) { f.Input.Name = "b.wav" }},
		{"the voice prompt", func(f *Fingerprint) { f.Voice.Size++ }},
		{"the text prompt", func(f *Fingerprint) { f.TextPrompt = HashString("") }},
		{"seed", func(f *Fingerprint) { f.Seed = -1 }},
		{"greedy", func(f *Fingerprint) { f.Greedy = true }},
		{"temp_audio", func(f *Fingerprint) { f.TempAudio = 0 }},
		{"temp_text", func(f *Fingerprint) { f.TempText = 1 }},
		{"topk_audio", func(f *Fingerprint) { f.TopKAudio = 1 }},
		{"topk_text", func(f *Fingerprint) { f.TopKText = 1 }},
		{"output_format", func(f *Fingerprint) { f.OutputFormat = "float32" }},
		{"output_text_format", func(f *Fingerprint) { f.OutputTextFormat = "rich" }},
		{"output_format", func(f *Fingerprint) { f.OutputFormat = "flac" }},
		{"output_mix", func(f *Fingerprint) { f.OutputMix = "a.mix.wav" }},
		{"the model file (--moshi-weight)", func(f *Fingerprint) { f.Model.Size = 2 }},
		{"the codec file (--mimi-weight)", func(f *Fingerprint) { f.Mimi.MTime = 2 }},
		{"the tokenizer", func(f *Fingerprint) { f.Tokenizer.MTime = 2 }},
		{"the model config", func(f *Fingerprint) { f.Config = "g" }},
		{"--weights", func(f *Fingerprint) { f.Weights = "q8_0" }},
		{"--compute-dtype", func(f *Fingerprint) { f.Compute = "bf16" }},
		{"--kv-dtype", func(f *Fingerprint) { f.KV = "bf16" }},
	} {
		f := base
		tc.set(&f)
		if c := f.Changes(&base); len(c) != 1 || c[0] != tc.what {
			t.Errorf("%s: changes %v", tc.what, c)
		}
	}

	dir := t.TempDir()
	it := &Item{OutputWAV: filepath.Join(dir, "a.wav")}
	if why := Stale(it, &base); why != "no fingerprint (written by an older version)" {
		t.Fatalf("no file: %q", why)
	}
	p := FingerprintPath(it.OutputWAV)
	if p != filepath.Join(dir, ".a.wav.fp") || !IsFingerprintName(filepath.Base(p)) || IsFingerprintName("a.fp") {
		t.Fatalf("path %s", p)
	}
	it.OutputText = filepath.Join(dir, "a.json")
	os.WriteFile(it.OutputWAV, []byte("RIFF audio"), 0o644)
	os.WriteFile(it.OutputText, []byte(`["hi"]`), 0o644)
	os.WriteFile(p, base.Encode(), 0o644) // without its outputs (an older version's)
	if why := Stale(it, &base); !strings.Contains(why, "does not record its outputs") {
		t.Fatalf("fingerprint without outputs: %q", why)
	}
	os.WriteFile(p, base.WithOutputs(it).Encode(), 0o644)
	if why := Stale(it, &base); why != "" {
		t.Fatalf("same fingerprint: %q", why)
	}
	f := base
	f.Seed, f.Greedy = 2, true
	if why := Stale(it, &f); why != "seed, greedy changed" {
		t.Fatalf("changed: %q", why)
	}
	// The transcript rewritten since (the main command, another run, a
	// user), same size: its time tells.
	os.WriteFile(it.OutputText, []byte(`["ho"]`), 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(it.OutputText, later, later)
	if why := Stale(it, &base); !strings.Contains(why, "a.json was rewritten after this job made it") {
		t.Fatalf("rewritten transcript: %q", why)
	}
	// An output_mix asked for now but not when the outputs were made.
	it.OutputMix = filepath.Join(dir, "a.mix.wav")
	os.WriteFile(p, base.WithOutputs(&Item{OutputWAV: it.OutputWAV, OutputText: it.OutputText}).Encode(), 0o644)
	if why := Stale(it, &base); why == "" {
		t.Fatal("a mix missing from the fingerprint's outputs passed")
	}
	it.OutputMix = ""
	// Not ours: garbage, unknown fields, too long, a named pipe (no hang).
	for name, data := range map[string]string{"garbage": "{", "unknown field": `{"colour": 1}`, "long": strings.Repeat(" ", maxFingerprint+1) + "{}"} {
		os.WriteFile(p, []byte(data), 0o644)
		if why := Stale(it, &base); !strings.Contains(why, "is not one this tool writes") {
			t.Errorf("%s: %q", name, why)
		}
	}
	os.Remove(p)
	if runtime.GOOS == "windows" {
		return // Windows has no named pipes in the file system
	}
	if err := mkfifo(p); err != nil {
		t.Fatal(err)
	}
	if why := Stale(it, &base); !strings.Contains(why, "is not one this tool writes") {
		t.Errorf("FIFO: %q", why)
	}
}

func TestIdentifyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.wav")
	if id := IdentifyFile(p); id.Size != -1 || id.Name != "x.wav" {
		t.Fatalf("missing file: %+v", id)
	}
	os.WriteFile(p, []byte("abc"), 0o644)
	a := IdentifyFile(p)
	when := time.Unix(1000, 500) // a multiple of NTFS's 100 ns
	os.Chtimes(p, when, when)
	b := IdentifyFile(p)
	if a.Size != 3 || b.Size != 3 || b.MTime != when.UnixNano() || a == b {
		t.Fatalf("%+v %+v", a, b)
	}
}

// One line an item, or for a reason shared by many, a count.
func TestRedoLines(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	why := map[string]string{"a": "seed changed", "b": "x changed", "c": "x changed", "d": "x changed"}
	got := strings.Join(RedoLines(names, why, 2), "\n")
	want := "redoing a: seed changed\nredoing 3 items: x changed (b, c, …)"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := RedoLines(names, why, 5); len(got) != 4 || got[1] != "redoing b: x changed" {
		t.Fatalf("%q", got)
	}
	if got := RedoLines([]string{"a", "b"}, map[string]string{"a": "r", "b": "r"}, 0); len(got) != 1 {
		t.Fatalf("perReason 0: %q", got)
	}
}

// The grace decision: the longest conversation's frames at the measured
// step, with a margin, against the time left; nothing timed, nothing
// finished.
func TestGraceFits(t *testing.T) {
	for _, c := range []struct {
		frames int
		step   time.Duration
		left   time.Duration
		ok     bool
	}{
		{100, 10 * time.Millisecond, 100 * time.Second, true},
		{1000, 80 * time.Millisecond, 100 * time.Second, false},  // 80 s + 20 s + 2 s = 102 s
		{1000, 70 * time.Millisecond, 100 * time.Second, true},   // 70 + 17.5 + 2 = 89.5 s
		{1000, 100 * time.Millisecond, 100 * time.Second, false}, // 100 s + margin
		{10, 0, 100 * time.Second, false},                        // nothing timed
		{10, time.Millisecond, 0, false},                         // no time left
		{1 << 40, time.Hour, MaxGrace, false},                    // overflow
	} {
		ok, why := GraceFits(2, c.frames, c.step, c.left)
		if ok != c.ok || why == "" || !strings.Contains(why, "2 conversations") {
			t.Errorf("%d frames at %s, %s left: %v (%s)", c.frames, c.step, c.left, ok, why)
		}
	}
}

// --input-dir by content: what accept takes is an item whatever its name;
// the rest is listed as skipped (hidden files aside); by extension without
// accept (audioExts).
func TestListDirAccept(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	for name, data := range map[string]string{"a.flac": "fLaC....", "b.mp3": "ID3.....", "c.wav": "RIFF....", "d.txt": "notes", "e.ogg": "OggS....", ".hidden": "fLaC"} {
		os.WriteFile(filepath.Join(in, name), []byte(data), 0o644)
	}
	mustMkfifo(t, filepath.Join(in, "f.wav"))
	def := Settings{VoicePrompt: "V.pt", OutputFormat: "pcm16", OutputTextFormat: "list"}
	accept := func(h []byte) bool {
		for _, m := range []string{"fLaC", "ID3", "RIFF", "OggS"} {
			if strings.HasPrefix(string(h), m) {
				return true
			}
		}
		return false
	}
	items, skipped, err := ListDirAccept(in, out, false, def, accept)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, filepath.Base(it.InputWAV)+">"+filepath.Base(it.OutputWAV))
	}
	if strings.Join(got, " ") != "a.flac>a.wav b.mp3>b.wav c.wav>c.wav e.ogg>e.wav" || strings.Join(skipped, " ") != "d.txt f.wav" {
		t.Fatalf("items %v, skipped %v", got, skipped)
	}
	// By extension: every name of an audio format (the FIFO f.wav aside,
	// not a regular file).
	items, skipped, _ = ListDirAccept(in, out, false, def, nil)
	if len(items) != 4 || strings.Join(skipped, " ") != "d.txt f.wav" {
		t.Fatalf("by extension: %d items, skipped %v", len(items), skipped)
	}
	if s := SkippedList(append(skipped, "g", "h"), 3); s != "4 files (d.txt, f.wav, g, …)" {
		t.Fatalf("%q", s)
	}
	// A name of an audio format is an item whatever its content (it fails
	// as one when it does not decode); with no such name and nothing
	// accept takes, the folder has no item and the error lists it.
	if items, _, err := ListDirAccept(in, out, false, def, func([]byte) bool { return false }); err != nil || len(items) != 4 {
		t.Fatalf("named as audio, accept refusing all: %d items, %v", len(items), err)
	}
	none := t.TempDir()
	for _, name := range []string{"a.bin", "b.dat", "c.txt", "d.json", "e"} {
		os.WriteFile(filepath.Join(none, name), []byte("RIFF...."), 0o644)
	}
	if _, _, err := ListDirAccept(none, out, false, def, func([]byte) bool { return false }); err == nil || !strings.Contains(err.Error(), "no audio files the reader takes") || !strings.Contains(err.Error(), "skipped: 5 files") {
		t.Fatalf("none: %v", err)
	}
}

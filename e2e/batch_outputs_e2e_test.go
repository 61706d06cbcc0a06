package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/batchjob"
)

// The batch's text_prompt_file, output_mix and output_format flac give what
// the main command's --text-prompt-file, --output-mix and --output-format
// flac give for the same item.

const rolePrompt = "You are a pirate who answers in riddles."

// decodeSamples decodes an audio file (WAV or FLAC) with the reader.
func decodeSamples(t *testing.T, path string) [][]float32 {
	t.Helper()
	c, err := audio.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.Channels
}

func sameSamples(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for c := range a {
		if len(a[c]) != len(b[c]) {
			return false
		}
		for i := range a[c] {
			if a[c][i] != b[c][i] {
				return false
			}
		}
	}
	return true
}

func readAll(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestBatchTextPromptFileMixAndFLAC(t *testing.T) {
	dir := t.TempDir()
	writeClip(t, filepath.Join(dir, "a.wav"), 1920*9+300)
	role := filepath.Join(dir, "role.txt")
	os.WriteFile(role, []byte(rolePrompt+"\n"), 0o644) // the final newline is dropped
	lines := []string{
		`{"input_wav": "a.wav", "output_wav": "o/inline.wav", "output_text": "o/inline.json", "greedy": true, "text_prompt": "` + rolePrompt + `"}`,
		`{"input_wav": "a.wav", "output_wav": "o/file.wav", "output_text": "o/file.json", "greedy": true, "text_prompt_file": "role.txt", "output_mix": "o/file.mix.wav"}`,
		`{"input_wav": "a.wav", "output_wav": "o/f.flac", "output_text": "o/f.json", "greedy": true, "text_prompt_file": "role.txt", "output_format": "flac"}`,
	}
	manifest := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(manifest, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	if _, stderr, code := run(t, batchArgs("--manifest", manifest, "--quiet")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	o := filepath.Join(dir, "o")
	inline := readAll(t, filepath.Join(o, "inline.wav"), filepath.Join(o, "inline.json"))
	file := readAll(t, filepath.Join(o, "file.wav"), filepath.Join(o, "file.json"), filepath.Join(o, "file.mix.wav"))
	if !bytes.Equal(inline[0], file[0]) || !bytes.Equal(inline[1], file[1]) {
		t.Fatal("text_prompt_file gives other outputs than the same text inline")
	}

	// The main command on the same item: --text-prompt-file and --output-mix.
	out := t.TempDir()
	args := setFlag(tinyArgs(out, "--quiet", "--greedy", "--text-prompt-file", role, "--output-mix", filepath.Join(out, "mix.wav")),
		"--input-wav", filepath.Join(dir, "a.wav"))
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("main command: exit %d: %s", code, stderr)
	}
	want := readAll(t, filepath.Join(out, "out.wav"), filepath.Join(out, "out.json"), filepath.Join(out, "mix.wav"))
	for i, what := range []string{"output_wav", "output_text", "output_mix"} {
		if !bytes.Equal(file[i], want[i]) {
			t.Errorf("%s differs from the main command's (%d vs %d bytes)", what, len(file[i]), len(want[i]))
		}
	}
	if mix := decodeSamples(t, filepath.Join(o, "file.mix.wav")); len(mix) != 2 || !sameSamples(mix[1:], decodeSamples(t, filepath.Join(o, "file.wav"))) {
		t.Fatalf("the mix's right channel is not the agent's output")
	}

	// FLAC: the same samples as the WAV of the same item, the same transcript.
	flac := filepath.Join(o, "f.flac")
	if head := readAll(t, flac)[0]; len(head) < 4 || string(head[:4]) != "fLaC" {
		t.Fatalf("%s is not a FLAC file", flac)
	}
	if !sameSamples(decodeSamples(t, flac), decodeSamples(t, filepath.Join(o, "file.wav"))) {
		t.Fatal("the FLAC output decodes to other samples than the WAV of the same item")
	}
	if j := readAll(t, filepath.Join(o, "f.json"))[0]; !bytes.Equal(j, file[1]) {
		t.Fatal("the FLAC item's transcript differs")
	}

	// --input-dir: the flags are every item's defaults (<stem>.flac).
	in, od := filepath.Join(t.TempDir(), "in"), filepath.Join(t.TempDir(), "out")
	os.Mkdir(in, 0o755)
	os.WriteFile(filepath.Join(in, "a.wav"), readAll(t, filepath.Join(dir, "a.wav"))[0], 0o644)
	if _, stderr, code := run(t, batchArgs("--input-dir", in, "--output-dir", od, "--quiet", "--greedy",
		"--text-prompt-file", role, "--output-format", "flac")...); code != 0 {
		t.Fatalf("--input-dir: exit %d: %s", code, stderr)
	}
	got := readAll(t, filepath.Join(od, "a.flac"), filepath.Join(od, "a.json"))
	if !bytes.Equal(got[0], readAll(t, flac)[0]) || !bytes.Equal(got[1], file[1]) {
		t.Fatal("--input-dir with --text-prompt-file and --output-format flac differs from the manifest's item")
	}
}

// Bad combinations are refused before anything loads: exit 2, one line
// naming the manifest line, no output folder made.
func TestBatchOutputsBadCombinations(t *testing.T) {
	dir := t.TempDir()
	writeClip(t, filepath.Join(dir, "a.wav"), 1920*3)
	os.WriteFile(filepath.Join(dir, "role.txt"), []byte("role"), 0o644)
	os.WriteFile(filepath.Join(dir, "latin1.txt"), []byte("caf\xe9"), 0o644)
	ok := `{"input_wav": "a.wav", "output_wav": "o/a.wav", "output_text": "o/a.json"}`
	for _, c := range []struct {
		line, want string
		flags      []string
	}{
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "text_prompt": "x", "text_prompt_file": "role.txt"}`,
			`jobs.jsonl:2: "text_prompt" and "text_prompt_file" exclude each other: give one`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "output_mix": "a.wav"}`,
			`jobs.jsonl:2: output_mix ` + filepath.Join(dir, "a.wav") + ` is the input_wav of line 1: outputs are never written over inputs`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "text_prompt_file": "role.txt", "output_mix": "role.txt"}`,
			`jobs.jsonl:2: output_mix ` + filepath.Join(dir, "role.txt") + ` is the text_prompt_file of line 2`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "output_mix": "o/a.json"}`,
			`jobs.jsonl:2: output_mix ` + filepath.Join(dir, "o/a.json") + ` is also the output_text of line 1`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "text_prompt_file": "nope.txt"}`,
			`jobs.jsonl:2: text_prompt_file ` + filepath.Join(dir, "nope.txt") + `: no such file or directory`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "text_prompt_file": "latin1.txt"}`,
			`jobs.jsonl:2: text_prompt_file ` + filepath.Join(dir, "latin1.txt") + `: not UTF-8 text`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json", "output_format": "wav"}`,
			`jobs.jsonl:2: "output_format" must be pcm16, float32 or flac, not "wav"`, nil},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json"}`,
			`--text-prompt and --text-prompt-file exclude each other: give one`, []string{"--text-prompt", "x", "--text-prompt-file", "role.txt"}},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "role.txt"}`,
			`jobs.jsonl:2: output_text ` + filepath.Join(dir, "role.txt") + ` is the text_prompt_file of line 1`, []string{"--text-prompt-file", filepath.Join(dir, "role.txt")}},
		{`{"input_wav": "a.wav", "output_wav": "o/b.wav", "output_text": "o/b.json"}`,
			`--text-prompt-file ` + filepath.Join(dir, "nope.txt") + `: no such file or directory`, []string{"--text-prompt-file", filepath.Join(dir, "nope.txt")}},
	} {
		p := filepath.Join(dir, "jobs.jsonl")
		os.WriteFile(p, []byte(ok+"\n"+c.line+"\n"), 0o644)
		// The weights do not exist: a run that got as far as loading would say so.
		args := append(batchArgs("--manifest", p), "--moshi-weight", filepath.Join(dir, "nope.safetensors"))
		_, stderr, code := run(t, append(args, c.flags...)...)
		msg := strings.TrimSpace(stderr)
		if code != 2 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "nope.safetensors") {
			t.Errorf("%s %v: exit %d, stderr %q, want one line with %q", c.line, c.flags, code, stderr, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "o")); err == nil {
			t.Errorf("%s: output folder made", c.line)
		}
	}
	// --output-mix is a path per item (output_mix), no batch flag.
	os.WriteFile(filepath.Join(dir, "jobs.jsonl"), []byte(ok+"\n"), 0o644)
	if _, stderr, code := run(t, batchArgs("--manifest", filepath.Join(dir, "jobs.jsonl"), "--output-mix", filepath.Join(dir, "m.wav"))...); code != 2 {
		t.Errorf("--output-mix to batch: exit %d %s", code, stderr)
	}
}

// Changing output_format or output_mix on a rerun redoes the item, saying
// why; the same text given inline instead of by file does not; a changed
// text prompt file does.
func TestBatchRerunRedoesOnOutputChanges(t *testing.T) {
	j := newResumeJob(t)
	j.fields["output_wav"] = "out/a.agent"
	j.fields["text_prompt_file"] = "role.txt"
	wav, mix := filepath.Join(j.dir, "out/a.agent"), filepath.Join(j.dir, "out/a.mix.wav")
	os.WriteFile(filepath.Join(j.dir, "role.txt"), []byte(rolePrompt), 0o644)
	step := func(name, why string) {
		t.Helper()
		log, r := j.run(t)
		if why == "" {
			if r.Counts.Skipped != 1 || strings.Contains(log, "redoing") {
				t.Fatalf("%s: not skipped: %+v\n%s", name, r.Counts, log)
			}
			return
		}
		if r.Counts.OK != 1 {
			t.Fatalf("%s: not redone: %+v\n%s", name, r.Counts, log)
		}
		if want := "redoing " + wav + ": " + why + "\n"; why != "-" && !strings.Contains(log, want) {
			t.Fatalf("%s: log lacks %q:\n%s", name, want, log)
		}
	}
	step("first run", "-")
	step("unchanged", "")
	delete(j.fields, "text_prompt_file")
	j.fields["text_prompt"] = rolePrompt
	step("the same text inline", "")
	j.fields["output_format"] = "flac"
	step("output_format", "output_format changed")
	if b := readAll(t, wav)[0]; string(b[:4]) != "fLaC" {
		t.Fatal("output_format flac did not write a FLAC")
	}
	step("flac, unchanged", "")
	j.fields["output_mix"] = "out/a.mix.wav"
	step("output_mix asked for", "-") // not complete: the mix is missing
	if m := decodeSamples(t, mix); len(m) != 2 || !sameSamples(m[1:], decodeSamples(t, wav)) {
		t.Fatal("the mix is not the agent's output on the right")
	}
	step("mix, unchanged", "")
	os.Remove(mix)
	step("mix removed", "-")
	if _, err := os.Stat(mix); err != nil {
		t.Fatal("the removed mix was not written again")
	}
	delete(j.fields, "text_prompt")
	j.fields["text_prompt_file"] = "role.txt"
	os.WriteFile(filepath.Join(j.dir, "role.txt"), []byte(rolePrompt+" Be brief."), 0o644)
	step("the text prompt file's text", "the text prompt changed")
	delete(j.fields, "output_mix")
	step("output_mix dropped", "output_mix changed")
	if _, err := os.Stat(batchjob.FingerprintPath(wav)); err != nil {
		t.Fatal(err)
	}
	step("unchanged again", "")
	// The transcript rewritten by something else (the main command with
	// other settings, a user): the fingerprint holds the outputs' sizes
	// and times, so the rerun redoes the item instead of keeping it.
	text := filepath.Join(j.dir, "out/a.json")
	os.WriteFile(text, []byte("[]\n"), 0o644)
	step("transcript rewritten", text+" was rewritten after this job made it (its size or time differs from the fingerprint's)")
	step("rewritten and redone, unchanged", "")
}

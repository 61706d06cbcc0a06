package batchjob

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
)

// text_prompt_file and output_mix are paths relative to the manifest; a
// line's text_prompt_file replaces the default text prompt, its text_prompt
// a default --text-prompt-file; output_format flac names .flac outputs
// under --output-dir.
func TestManifestTextPromptFileMixAndFLAC(t *testing.T) {
	p := writeManifest(t,
		`{"input_wav": "a.wav", "text_prompt_file": "p/role.txt", "output_mix": "mix/a.wav"}`,
		`{"input_wav": "b.wav", "output_format": "flac"}`,
		`{"input_wav": "c.wav", "text_prompt": "inline"}`)
	dir := filepath.Dir(p)
	d := def
	d.TextPromptFile = "default.txt"
	d.TextPrompt = ""
	items, err := ReadManifest(p, d, "out")
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := items[0], items[1], items[2]
	if a.TextPromptFile != filepath.Join(dir, "p/role.txt") || a.TextPrompt != "" || a.OutputMix != filepath.Join(dir, "mix/a.wav") {
		t.Fatalf("item 0: %+v", a)
	}
	if b.OutputWAV != filepath.Join("out", "b.flac") || b.OutputText != filepath.Join("out", "b.json") || b.OutputMix != "" ||
		b.TextPromptFile != "default.txt" {
		t.Fatalf("item 1: %+v", b)
	}
	if c.TextPromptFile != "" || c.TextPrompt != "inline" || c.OutputWAV != filepath.Join("out", "c.wav") {
		t.Fatalf("item 2: %+v", c)
	}
	// --input-dir: the defaults are every item's.
	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "x.wav"), nil, 0o644)
	d.OutputFormat = "flac"
	listed, err := ListDir(in, "o", false, d)
	if err != nil || len(listed) != 1 || listed[0].OutputWAV != filepath.Join("o", "x.flac") || listed[0].TextPromptFile != "default.txt" {
		t.Fatalf("%v %+v", err, listed)
	}
}

func TestManifestTextPromptFileErrors(t *testing.T) {
	ok := `{"input_wav": "a.wav", "output_wav": "a.out.wav", "output_text": "a.json"}`
	for _, c := range []struct{ line, want string }{
		{`{"input_wav": "b.wav", "output_wav": "b.o.wav", "output_text": "b.json", "text_prompt": "x", "text_prompt_file": "p.txt"}`,
			`:2: "text_prompt" and "text_prompt_file" exclude each other: give one`},
		{`{"input_wav": "b.wav", "output_wav": "b.o.wav", "output_text": "b.json", "text_prompt_file": ""}`, `:2: "text_prompt_file": must not be empty`},
		{`{"input_wav": "b.wav", "output_wav": "b.o.wav", "output_text": "b.json", "output_mix": 1}`, `:2: "output_mix": want a string`},
		{`{"input_wav": "b.wav", "output_wav": "b.o.wav", "output_text": "b.json", "output_format": "wav"}`, `:2: "output_format" must be pcm16, float32 or flac, not "wav"`},
	} {
		p := writeManifest(t, ok, c.line)
		_, err := ReadManifest(p, def, "")
		var le *LineError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
}

// The mix is an output like the others (no input, no other output, not
// the item's own other files); the text prompt file is an input.
func TestCheckMixAndTextPromptFile(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  []string
	}{
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json", "output_mix": "a.wav"}`},
			[]string{":1: output_mix ", "is the input_wav of line 1: outputs are never written over inputs"}},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json", "output_mix": "o.wav"}`},
			[]string{":1: output_wav and output_mix are the same file"}},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json", "text_prompt_file": "role.txt"}`,
			`{"input_wav": "b.wav", "output_wav": "b.wav.out", "output_text": "b.json", "output_mix": "role.txt"}`},
			[]string{":2: output_mix ", "is the text_prompt_file of line 1"}},
		{[]string{`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json", "output_mix": "m.wav"}`,
			`{"input_wav": "b.wav", "output_wav": "m.wav", "output_text": "b.json"}`},
			[]string{":2: output_wav ", "is also the output_mix of line 1"}},
	} {
		p := writeManifest(t, c.lines...)
		items, err := ReadManifest(p, def, "")
		if err != nil {
			t.Fatal(err)
		}
		err = Check(items, p, nil, nil)
		if err == nil || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%v: got %v, want %q", c.lines, err, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: got %v, want %q", c.lines, err, w)
			}
		}
	}
}

// LoadTextPrompts reads each file once, with the given reader, and names
// the line of the first that fails.
func TestLoadTextPrompts(t *testing.T) {
	items := []*Item{{Line: 1, InputWAV: "a.wav", Settings: Settings{TextPromptFile: "r.txt"}},
		{Line: 2, InputWAV: "b.wav", Settings: Settings{TextPrompt: "inline"}},
		{Line: 3, InputWAV: "c.wav", Settings: Settings{TextPromptFile: "r.txt"}},
		{Line: 5, InputWAV: "d.wav", Settings: Settings{TextPromptFile: "bad.txt"}}}
	reads := map[string]int{}
	read := func(p string) (string, error) {
		reads[p]++
		if p == "bad.txt" {
			return "", fmt.Errorf("%s: not UTF-8 text", p)
		}
		return "role of " + p, nil
	}
	err := LoadTextPrompts(items, "jobs.jsonl", read)
	if err == nil || err.Error() != "jobs.jsonl:5: text_prompt_file bad.txt: not UTF-8 text" {
		t.Fatalf("got %v", err)
	}
	if items[0].TextPrompt != "role of r.txt" || items[2].TextPrompt != "role of r.txt" || items[1].TextPrompt != "inline" || reads["r.txt"] != 1 {
		t.Fatalf("%+v %+v %v", items[0], items[2], reads)
	}
}

// A FLAC output is complete when it decodes whole; a mix when its WAV is.
func TestCompleteFLACAndMix(t *testing.T) {
	dir := t.TempDir()
	it := &Item{OutputWAV: filepath.Join(dir, "o.flac"), OutputText: filepath.Join(dir, "o.json"), OutputMix: filepath.Join(dir, "m.wav")}
	x := make([]float32, 9000)
	for i := range x {
		x[i] = float32(i%200-100) / 128
	}
	var f, m bytes.Buffer
	if err := audio.EncodeFLAC16(&f, [][]float32{x}, 24000); err != nil {
		t.Fatal(err)
	}
	if err := audio.EncodeMix(&m, x, x, 24000); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(it.OutputWAV, f.Bytes(), 0o644)
	os.WriteFile(it.OutputText, []byte(`["a"]`), 0o644)
	if ok, why := Complete(it); ok || !strings.Contains(why, "m.wav") {
		t.Fatalf("no mix: %v %s", ok, why)
	}
	os.WriteFile(it.OutputMix, m.Bytes()[:m.Len()-2], 0o644)
	if ok, why := Complete(it); ok || !strings.Contains(why, "m.wav") {
		t.Fatalf("cut mix: %v %s", ok, why)
	}
	os.WriteFile(it.OutputMix, m.Bytes(), 0o644)
	if ok, why := Complete(it); !ok {
		t.Fatal(why)
	}
	os.WriteFile(it.OutputWAV, f.Bytes()[:f.Len()-7], 0o644)
	if ok, why := Complete(it); ok || !strings.Contains(why, "o.flac") {
		t.Fatalf("cut FLAC: %v %s", ok, why)
	}
	// A temporary of the mix is swept with the others'.
	if n := len(itemOutputs(it)); n != 4 {
		t.Fatalf("%d outputs", n)
	}
}

//go:build unix

package batchjob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// linkedTree makes dir/in/{a,b}.wav, dir/x/sub, dir/out, the link
// dir/out/link → ../x/sub and the link dir/outlink → out:
// dir/out/link/../a.wav is, for the system, dir/x/a.wav (the link's
// target, then ..), not dir/out/a.wav.
func linkedTree(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{"in", "x/sub", "out"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"in/a.wav", "in/b.wav"} {
		os.WriteFile(filepath.Join(dir, f), []byte("RIFF"), 0o644)
	}
	if err := os.Symlink("../x/sub", filepath.Join(dir, "out", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("out", filepath.Join(dir, "outlink")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// One file not made yet, named two ways (".." after a link, a linked
// folder, a folder not made yet under either name), by two items, by
// one item's two outputs or by an item and the report, is refused naming
// both names; two files that only look alike once ".." is removed by the
// text are two files.
func TestCheckOneNewFileTwoNames(t *testing.T) {
	defer fileio.ResetInputs()
	dir := linkedTree(t)
	j := func(p string) string { return dir + "/" + p } // as given: no Clean
	item := func(line int, in, wav, text string) *Item {
		return &Item{Line: line, InputWAV: j(in), OutputWAV: j(wav), OutputText: j(text), Settings: def}
	}
	for _, c := range []struct {
		items []*Item
		outs  map[string]string
		want  string
	}{
		{[]*Item{item(1, "in/a.wav", "x/a.wav", "x/a.json")}, map[string]string{"--report": j("out/link/../a.json")},
			"output_text " + j("x/a.json") + " is also the file of --report " + j("out/link/../a.json")},
		{[]*Item{item(1, "in/a.wav", "out/a.wav", "outlink/a.wav")}, nil,
			"output_wav " + j("out/a.wav") + " and output_text are the same file " + j("outlink/a.wav")},
		{[]*Item{item(1, "in/a.wav", "x/a.wav", "x/a.json"), item(2, "in/b.wav", "out/link/../a.wav", "out/b.json")}, nil,
			":2: output_wav " + j("out/link/../a.wav") + " is also the output_wav " + j("x/a.wav") + " of line 1"},
		{[]*Item{item(1, "in/a.wav", "x/new/a.wav", "x/new/a.json"), item(2, "in/b.wav", "out/link/../new/a.wav", "out/b.json")}, nil,
			":2: output_wav " + j("out/link/../new/a.wav") + " is also the output_wav " + j("x/new/a.wav") + " of line 1"},
	} {
		err := Check(c.items, "jobs.jsonl", nil, c.outs)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v\nwant %q", err, c.want)
		}
	}
	// (Not output_wav: its fingerprint's path, FingerprintPath, is
	// cleaned by the text, so there the two would share one.)
	two := []*Item{item(1, "in/a.wav", "out/a.wav", "out/a.json"), item(2, "in/b.wav", "out/link/../b.wav", "out/link/../a.json")}
	if err := Check(two, "jobs.jsonl", nil, nil); err != nil {
		t.Errorf("out/a.json and x/a.json are two files: %v", err)
	}
	// The folders made are the ones the writer will open.
	if err := PrepareOutputs([]*Item{item(1, "in/a.wav", "out/link/../new2/a.wav", "out/link/../new2/a.json")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(j("x/new2")); err != nil {
		t.Errorf("x/new2 not made: %v", err)
	}
	if _, err := os.Stat(j("out/new2")); err == nil {
		t.Error("out/new2 made")
	}
}

// --input-dir D --output-dir D (or a link to D), run again: the outputs
// the first run wrote beside their inputs are not items (the rerun
// resumes); a genuine input named like another's output stays one.
func TestListDirRerunInPlace(t *testing.T) {
	defer fileio.ResetInputs()
	in := t.TempDir()
	w := func(name, data string) { os.WriteFile(filepath.Join(in, name), []byte(data), 0o644) }
	w("a.wav", "RIFF....")
	w("a.flac", "fLaC....") // a's outputs from the first run
	w("a.json", "[]")
	fp := filepath.Join(in, ".a.flac.fp")
	os.WriteFile(fp, (&Fingerprint{Input: IdentifyFile(filepath.Join(in, "a.wav"))}).Encode(), 0o644)
	w("b.flac", "fLaC....") // a genuine input, no b.wav
	link := filepath.Join(t.TempDir(), "outlink")
	os.Symlink(in, link)
	flac := Settings{VoicePrompt: "V.pt", OutputFormat: "flac", OutputTextFormat: "list"}
	accept := func(h []byte) bool {
		return strings.HasPrefix(string(h), "RIFF") || strings.HasPrefix(string(h), "fLaC")
	}
	list := func(out string) (got, skipped string) {
		items, sk, err := ListDirAccept(in, out, false, flac, accept)
		if err != nil {
			t.Fatal(err)
		}
		var g []string
		for i, it := range items {
			if it.Index != i {
				t.Errorf("%s: index %d, want %d", it.InputWAV, it.Index, i)
			}
			g = append(g, filepath.Base(it.InputWAV)+">"+filepath.Base(it.OutputWAV))
		}
		return strings.Join(g, " "), strings.Join(sk, " ")
	}
	for _, out := range []string{in, link} {
		if got, sk := list(out); got != "a.wav>a.flac b.flac>b.flac" || sk != "a.flac a.json" {
			t.Errorf("output dir %s: items %q, skipped %q", out, got, sk)
		}
	}
	// Without the fingerprint a.flac is not known to be a's output: an
	// item, and Check refuses the pair as before.
	os.Remove(fp)
	if got, _ := list(in); got != "a.flac>a.flac a.wav>a.flac b.flac>b.flac" {
		t.Errorf("without the fingerprint: %q", got)
	}
}

package e2e

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/voices"
)

// pp-offline voice on TINYF0.wav reproduces the reference's TINYF0.pt, and
// the file it writes drives the main job to the reference transcript.
func TestVoiceCommandMatchesReference(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "MINE.pt")
	_, stderr, code := run(t, "voice", "--input-wav", tiny+"voices/TINYF0.wav", "--output", out,
		"--config", tiny+"config.json", "--moshi-weight", tiny+"model.safetensors",
		"--mimi-weight", tiny+"mimi.safetensors", "--tokenizer", tiny+"tokenizer.model", "--device", "cpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := voices.LoadPT(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := voices.LoadPT(tiny + "voices/TINYF0.pt")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Embeddings) != len(want.Embeddings) {
		t.Fatalf("%d embeddings, want %d", len(got.Embeddings), len(want.Embeddings))
	}
	var num, den float64
	for i := range want.Embeddings {
		for j, w := range want.Embeddings[i] {
			d := float64(got.Embeddings[i][j] - w)
			num += d * d
			den += float64(w) * float64(w)
		}
	}
	if rel := math.Sqrt(num / den); rel > 1e-4 {
		t.Fatalf("embeddings rel. err %g", rel)
	}
	for k := range want.Cache {
		for c := range want.Cache[k] {
			if got.Cache[k][c] != want.Cache[k][c] {
				t.Fatalf("cache[%d][%d] = %d, want %d", k, c, got.Cache[k][c], want.Cache[k][c])
			}
		}
	}
	// Used as a voice prompt, it gives the reference run.
	os.Rename(out, filepath.Join(dir, "TINYF0.pt"))
	args := setFlag(tinyArgs(dir, "--greedy", "--quiet"), "--voice-prompt-dir", dir)
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	b, _ := os.ReadFile(tiny + "expected/run_pt/output.json")
	if string(a) != string(b) {
		t.Fatalf("transcript with our voice file differs:\n%s\n%s", a, b)
	}
}

func TestVoiceCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"voice", "--input-wav", tiny + "input.wav", "--output", filepath.Join(dir, "x.wav")}, "must be a .pt file"},
		{[]string{"voice", "--input-wav", "nope.wav", "--output", filepath.Join(dir, "x.pt")}, "nope.wav: no such file"},
		{[]string{"voice", "--input-wav", tiny + "input.wav", "--output", filepath.Join(dir, "no", "x.pt")}, "does not exist"},
	} {
		_, stderr, code := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %d files", len(entries))
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Nothing is tied to the fixture's sizes: a model of another shape (random
// weights written to real files) runs through the main job, deterministically,
// with the output length of the input, for a .pt-free WAV voice prompt too.
func TestOtherModelSizesRun(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dim, cfg.NumHeads, cfg.NumLayers, cfg.Context = 96, 6, 3, 20
	cfg.DepformerDim, cfg.DepformerNumHeads, cfg.DepformerNumLayers, cfg.DepformerDimFeedforward = 48, 3, 1, 100
	cfg.Mimi.Seanet.NFilters, cfg.Mimi.Seanet.Dimension = 4, 24
	cfg.Mimi.Transformer.DModel, cfg.Mimi.Transformer.InputDimension = 24, 24
	cfg.Mimi.Transformer.OutputDimensions = []int{24}
	cfg.Mimi.Transformer.NumHeads, cfg.Mimi.Transformer.Context = 3, 10
	cfg.Mimi.Quantizer.InputDimension, cfg.Mimi.Quantizer.OutputDimension, cfg.Mimi.Quantizer.Dimension = 24, 24, 8
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "config.json")
	os.WriteFile(cfgPath, js, 0o644)

	save := func(name string, f *weights.File) string {
		var ts []*weights.Tensor
		for _, n := range f.Names() {
			tt, _ := f.Get(n)
			ts = append(ts, tt)
		}
		p := filepath.Join(dir, name)
		if err := weights.WriteFile(p, ts, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lmPath := save("model.safetensors", weights.Random(lm.WeightSpecs(&cfg.LM, weights.BF16), 3))
	specs, err := mimi.WeightSpecs(cfg.Mimi)
	if err != nil {
		t.Fatal(err)
	}
	mimiPath := save("mimi.safetensors", weights.Random(specs, 4))

	var outs [][]byte
	for i, voice := range []string{"TINYF0.wav", "TINYF0.wav", "TINYF0.pt"} {
		out := t.TempDir()
		args := tinyArgs(out, "--seed", "5", "-q")
		args = setFlag(args, "--config", cfgPath)
		args = setFlag(args, "--moshi-weight", lmPath)
		args = setFlag(args, "--mimi-weight", mimiPath)
		args = setFlag(args, "--voice-prompt", voice)
		_, stderr, code := run(t, args...)
		if i == 2 {
			// The fixture's .pt holds 64-dimensional embeddings: refused, not a panic.
			if code == 0 || !strings.Contains(stderr, "TINYF0.pt") || !strings.Contains(stderr, "dim") {
				t.Fatalf("64-dim voice file on a 96-dim model: exit %d: %s", code, stderr)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if x := readPCM(t, filepath.Join(out, "out.wav")); len(x) != 73200 {
			t.Fatalf("%d samples", len(x))
		}
		j, _ := os.ReadFile(filepath.Join(out, "out.json"))
		w, _ := os.ReadFile(filepath.Join(out, "out.wav"))
		outs = append(outs, append(j, w...))
	}
	if string(outs[0]) != string(outs[1]) {
		t.Fatal("same seed, different outputs")
	}

	// Quantized at load, greedy, against the bf16 run (the quality table
	// of docs/QUANTIZATION.md logs these): compare runs and gives its
	// verdict; the quantized run is deterministic.
	greedy := func(extra ...string) string {
		out := t.TempDir()
		args := tinyArgs(out, "--greedy", "-q")
		args = setFlag(args, "--config", cfgPath)
		args = setFlag(args, "--moshi-weight", lmPath)
		args = setFlag(args, "--mimi-weight", mimiPath)
		args = setFlag(args, "--voice-prompt", "TINYF0.wav")
		if _, stderr, code := run(t, append(args, extra...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		return out
	}
	ref := greedy()
	for _, format := range []string{"q8_0", "q4_k"} {
		a, b := greedy("--weights", format), greedy("--weights", format)
		wa, _ := os.ReadFile(filepath.Join(a, "out.wav"))
		wb, _ := os.ReadFile(filepath.Join(b, "out.wav"))
		if len(wa) == 0 || string(wa) != string(wb) {
			t.Fatalf("%s: two runs differ", format)
		}
		cmp, _, code := run(t, "compare", "--reference", filepath.Join(ref, "out.wav"), "--candidate", filepath.Join(a, "out.wav"),
			"--reference-text", filepath.Join(ref, "out.json"), "--candidate-text", filepath.Join(a, "out.json"))
		if code > 1 || !strings.Contains(cmp, "verdict") {
			t.Fatalf("compare: exit %d: %s", code, cmp)
		}
		t.Logf("other shape %s vs bf16 (whole run, greedy): %s", format, strings.TrimSpace(cmp))
	}
}

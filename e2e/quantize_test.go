package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// quantize writes a file the loader maps (format, source sha256 and tool
// version in its metadata); the main job on it gives exactly the outputs of
// --weights on the float checkpoint (the same blocks), on every kernel
// variant and thread count; and `compare` against the float run reports
// what a user should expect (logged: docs/QUANTIZATION.md).
func TestQuantizeAndRun(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"q8_0", "q4_k"} {
		qf := filepath.Join(dir, "model-"+format+".safetensors")
		out, stderr, code := run(t, "quantize", "--moshi-weight", tiny+"model.safetensors", "--format", format, "--output", qf, "-q")
		if code != 0 {
			t.Fatalf("quantize %s: exit %d: %s", format, code, stderr)
		}
		if !strings.Contains(out, "tensors quantized to "+format) {
			t.Errorf("quantize output %q", out)
		}
		f, err := weights.Open(qf)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := fileSHA256Test(tiny + "model.safetensors")
		if f.Metadata[weights.MetaFormat] != weights.QuantFormat || f.Metadata[weights.MetaQuant] != format || f.Metadata[weights.MetaSourceSHA256] != sum || f.Metadata[weights.MetaToolVersion] == "" {
			t.Errorf("metadata %v", f.Metadata)
		}
		in, _ := f.Get("transformer.layers.0.self_attn.in_proj_weight")
		if want := map[string]weights.DType{"q8_0": weights.Q8_0, "q4_k": weights.Q4_K}[format]; in.DType != want {
			t.Errorf("in_proj is %s", in.DType)
		}
		f.Close()

		outs := map[string][]byte{}
		runJob := func(name string, env []string, extra ...string) {
			t.Helper()
			d := filepath.Join(dir, format+"-"+name)
			os.MkdirAll(d, 0o755)
			cmd := exec.Command(binPath, tinyArgs(d, append([]string{"--seed", "42", "-q"}, extra...)...)...)
			cmd.Env = append(os.Environ(), env...)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", format, name, err, b)
			}
			wav, _ := os.ReadFile(filepath.Join(d, "out.wav"))
			txt, _ := os.ReadFile(filepath.Join(d, "out.json"))
			outs[name] = append(wav, txt...)
		}
		runJob("file", nil, "--moshi-weight", qf)
		runJob("load", nil, "--weights", format)
		runJob("file-portable-1", []string{"PP_OFFLINE_KERNEL=portable"}, "--moshi-weight", qf, "--threads", "1")
		runJob("file-2", nil, "--moshi-weight", qf, "--threads", "2")
		for _, n := range []string{"load", "file-portable-1", "file-2"} {
			if !bytes.Equal(outs[n], outs["file"]) {
				t.Errorf("%s: run %s differs from the run on the quantized file", format, n)
			}
		}
		runJob("bf16", nil)
		d := func(n string) string { return filepath.Join(dir, format+"-"+n) }
		cmp, _, code := run(t, "compare", "--reference", d("bf16")+"/out.wav", "--candidate", d("file")+"/out.wav",
			"--reference-text", d("bf16")+"/out.json", "--candidate-text", d("file")+"/out.json")
		if code > 1 {
			t.Fatalf("compare: exit %d: %s", code, cmp)
		}
		t.Logf("tiny %s vs bf16 (whole run, seed 42): %s", format, strings.TrimSpace(cmp))
	}
	// Bad values are one-line errors before anything loads.
	if _, stderr, code := run(t, "quantize", "--moshi-weight", tiny+"model.safetensors", "--format", "q2_k", "--output", filepath.Join(dir, "x.safetensors")); code == 0 || !strings.Contains(stderr, "q2_k") {
		t.Errorf("--format q2_k: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, tinyArgs(dir, "--weights", "q3")...); code == 0 || !strings.Contains(stderr, "--weights") {
		t.Errorf("--weights q3: exit %d, %s", code, stderr)
	}
	// A quantized file is not quantized again.
	if _, stderr, code := run(t, "quantize", "--moshi-weight", filepath.Join(dir, "model-q8_0.safetensors"), "--format", "q4_k", "--output", filepath.Join(dir, "y.safetensors")); code == 0 || !strings.Contains(stderr, "float checkpoint") {
		t.Errorf("requantize: exit %d, %s", code, stderr)
	}
}

// bench --weights reads fewer weight bytes per frame than bf16. The tiny
// model is no measure of the ratio: its depformer audio heads (linears.*,
// kept in bf16) are half of its frame, and its narrow rows pad q4_K's
// 256-element super-blocks (the 1.3B and 7B figures are in
// docs/QUANTIZATION.md).
func TestBenchWeights(t *testing.T) {
	bytesPerFrame := func(extra ...string) float64 {
		args := append([]string{"bench", "--config", tiny + "config.json", "--frames", "2", "--warmup", "1", "--memory-mib", "8", "--json", "-q", "--threads", "1"}, extra...)
		out, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var m struct {
			B float64 `json:"weight_bytes_per_frame"`
		}
		if err := jsonUnmarshal(lines[len(lines)-1], &m); err != nil {
			t.Fatal(err)
		}
		return m.B
	}
	bf, q8 := bytesPerFrame(), bytesPerFrame("--weights", "q8_0")
	if r := q8 / bf; r > 0.85 || r < 0.5 {
		t.Errorf("q8_0 reads %.3f× the bf16 bytes per frame", r)
	}
}

func fileSHA256Test(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(b)), nil
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

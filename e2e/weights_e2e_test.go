package e2e

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkpoint with one NaN or infinite weight (it used to run to exit 0
// with an all-padding transcript) is refused at load, in one line naming
// the file and the tensor; nothing is written.
func TestNonFiniteWeightRefused(t *testing.T) {
	src, err := os.ReadFile(tiny + "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(src)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(src[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	var ti struct {
		DType   string `json:"dtype"`
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr["text_linear.weight"], &ti); err != nil || ti.DType != "BF16" {
		t.Fatalf("text_linear.weight: %s %v", ti.DType, err)
	}
	for _, c := range []struct {
		name string
		bits uint16 // a bf16 value
	}{{"NaN", 0x7FC0}, {"+Inf", 0x7F80}} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), src...)
			at := 8 + int(n) + ti.Offsets[0] + 2*77 // element 77: row 1, column 13
			binary.LittleEndian.PutUint16(b[at:], c.bits)
			dir := t.TempDir()
			model := filepath.Join(dir, "model.safetensors")
			if err := os.WriteFile(model, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			_, stderr, code := run(t, setFlag(tinyArgs(out), "--moshi-weight", model)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != 1 || !strings.Contains(last, model) || !strings.Contains(last, "text_linear.weight") || strings.Contains(stderr, "goroutine ") {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Fatalf("outputs left: %v", ents)
			}
			t.Log(last)
		})
	}
}

package job

import (
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// The estimate's KV cache is what the rings hold at the conversations'
// length (2 · layers · positions · dim float32 each, or bf16 ones with
// --kv-dtype bf16), capped by the context; a job beyond the machine's
// memory is refused with the numbers and advice.
func TestEstimateMemory(t *testing.T) {
	cfg := config.Default()
	e := EstimateMemory(cfg, 8, 1000, 500, 4)
	if want := int64(8 * 2 * 32 * 1000 * 4096 * 4); e.KV != want {
		t.Fatalf("KV %d, want %d", e.KV, want)
	}
	kv := DeviceOptions{KVDType: "bf16"}.KVElemBytes()
	if b := EstimateMemory(cfg, 8, 1000, 500, kv); kv != 2 || b.KV != e.KV/2 || b.Codec != e.Codec || (DeviceOptions{}).KVElemBytes() != 4 {
		t.Fatalf("--kv-dtype bf16: %d bytes an element, KV %d against %d, codec %d against %d", kv, b.KV, e.KV, b.Codec, e.Codec)
	}
	if full := EstimateMemory(cfg, 1, 1<<20, 0, 4); full.Positions != 3000 {
		t.Fatalf("positions %d: not capped by the context", full.Positions)
	}
	if e.Activations <= 0 || e.Codec <= 0 || e.Total() != e.KV+e.Activations+e.Codec {
		t.Fatalf("%+v", e)
	}
	huge := e
	huge.Other = 1 << 62
	err := checkMemory(huge, nopLog{}, "use a smaller --batch-size")
	if err == nil || !strings.Contains(err.Error(), "not enough memory") || !strings.Contains(err.Error(), "use a smaller --batch-size") {
		t.Fatalf("%v", err)
	}
	if err := checkMemory(EstimateMemory(cfg, 1, 10, 10, 4), nopLog{}, ""); err != nil {
		t.Fatalf("a small job refused: %v", err)
	}
}

// --weights' blocks are counted as new RAM (and, on a device, as what
// replaces the float tensors): at the 7B shape q8_0's blocks are about
// 0.53 and q4_k's about 0.3 of the tensors they replace; a quantized
// file's tensors are left alone, so nothing is counted for it.
func TestQuantSizes(t *testing.T) {
	cfg := config.Default()
	specs := lm.WeightSpecs(&cfg.LM, weights.BF16)
	var total int64
	for _, s := range specs {
		total += s.DType.StorageBytes(s.Shape)
	}
	for _, c := range []struct {
		format   string
		min, max float64 // blocks / (blocks + saved)
	}{{"q8_0", 0.52, 0.54}, {"q4_k", 0.28, 0.31}} {
		blocks, saved := quantSizes(c.format, specs)
		r := float64(blocks) / float64(blocks+saved)
		if r < c.min || r > c.max || blocks+saved > total {
			t.Errorf("%s: %d bytes of blocks for %d (%.3f), of %d", c.format, blocks, blocks+saved, r, total)
		}
	}
	if b, s := quantSizes("", specs); b != 0 || s != 0 {
		t.Errorf("no --weights: %d, %d", b, s)
	}
	qf := t.TempDir() + "/q.safetensors"
	if _, err := QuantizeFile(QuantizeOptions{MoshiWeight: "../../testdata/tiny/model.safetensors", Output: qf, Format: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	if b, s := quantSizes("q8_0", checkpointSpecs(qf)); b != 0 || s != 0 {
		t.Errorf("a quantized file: %d bytes of blocks, %d saved", b, s)
	}
	if b, _ := quantSizes("q8_0", checkpointSpecs("../../testdata/tiny/model.safetensors")); b == 0 {
		t.Error("the tiny checkpoint's tensors are not counted")
	}
}

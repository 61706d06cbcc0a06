package infer

import (
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
)

// The estimate's KV cache is what the rings hold at the conversations'
// length (2 · layers · positions · dim float32 each), capped by the context;
// a job beyond the machine's memory is refused with the numbers and advice.
func TestEstimateMemory(t *testing.T) {
	cfg := config.Default()
	e := EstimateMemory(cfg, 8, 1000, 500)
	if want := int64(8 * 2 * 32 * 1000 * 4096 * 4); e.KV != want {
		t.Fatalf("KV %d, want %d", e.KV, want)
	}
	if full := EstimateMemory(cfg, 1, 1<<20, 0); full.Positions != 3000 {
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
	if err := checkMemory(EstimateMemory(cfg, 1, 10, 10), nopLog{}, ""); err != nil {
		t.Fatalf("a small job refused: %v", err)
	}
}

package batchjob

import (
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
)

// The default batch size is what the memory left holds at a conversation's
// full-context cost, which --kv-dtype bf16 lowers (its KV cache is half):
// the same memory then holds more conversations.
func TestChooseBatchCountsTheKVDType(t *testing.T) {
	cfg := config.Default()
	f32, bf16 := ConversationBytes(cfg, 4), ConversationBytes(cfg, 2)
	if l := cfg.LM; f32-bf16 != int64(2*l.NumLayers*l.Context*l.Dim*2) { // half the float32 cache at the full context
		t.Fatalf("a conversation costs %d bytes with a float32 cache, %d with a bf16 one", f32, bf16)
	}
	mem := Memory{Bytes: 1<<30 + 4*f32, Source: "test"}
	b4, why := ChooseBatch(mem, 0, cfg, 100, 4)
	b2, _ := ChooseBatch(mem, 0, cfg, 100, 2)
	if b4 != 4 || b2 <= b4 || !strings.Contains(why, "batch size 4") {
		t.Fatalf("batch %d with a float32 cache (%s), %d with a bf16 one", b4, why, b2)
	}
}

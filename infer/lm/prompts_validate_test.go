package lm

import (
	"strings"
	"testing"
)

// A voice file whose cache holds tokens outside the model's vocabularies is
// refused with an error, not a panic at the embedding lookup.
func TestVoiceCacheTokensAreChecked(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	emb, cache := voicePT(t)
	for _, c := range []struct {
		k, col int
		v      int64
	}{{0, 1, 1001}, {3, 2, 2049}, {5, 0, -2}} {
		bad := make([][]int64, len(cache))
		for k := range cache {
			bad[k] = append([]int64(nil), cache[k]...)
		}
		bad[c.k][c.col] = c.v
		g := NewGen(m, testBE, GenOptions{})
		g.Reset()
		err := g.StepVoicePromptEmbeddings(emb, bad)
		if err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("token %d in stream %d: %v", c.v, c.k, err)
		}
	}
}

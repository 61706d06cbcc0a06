package lm

import (
	"testing"

	"github.com/pp-offline/pp-offline/voices"
)

// voicePT reads testdata/tiny/voices/TINYF0.pt (embeddings [24][64], the
// LMGen cache [17][4]) with the voices package.
func voicePT(t testing.TB) ([][]float32, [][]int64) {
	t.Helper()
	p, err := voices.LoadPT(tiny + "voices/TINYF0.pt")
	if err != nil {
		t.Fatal(err)
	}
	return p.Embeddings, p.Cache
}

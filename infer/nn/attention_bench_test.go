package nn

import (
	"fmt"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
)

// BenchmarkAttentionFullRing times one query over a full ring at the 7B
// temporal transformer's shape (d 4096, 32 heads, context 3000): the cost
// that grows with the conversation, per layer (×32 layers per frame).
func BenchmarkAttentionFullRing(b *testing.B) {
	for _, c := range []struct{ d, heads, ctx int }{{4096, 32, 3000}, {2048, 16, 3000}, {512, 8, 250}} {
		b.Run(fmt.Sprintf("d%d_ctx%d", c.d, c.ctx), func(b *testing.B) {
			r := testBE.NewRing(c.heads, c.d/c.heads, c.ctx)
			testBE.FillRing(r, 10*c.ctx-1)
			qkv := testBE.NewActs(1, 3*c.d)
			out := testBE.NewActs(1, c.d)
			seqs := []backend.Seq{{Ring: r, Rows: 1}}
			b.SetBytes(int64(2 * c.ctx * c.d * 4)) // K and V read once
			b.ReportAllocs()
			for b.Loop() {
				r.End--
				testBE.Attend(out, qkv, seqs, c.ctx, backend.Stepwise)
			}
			b.ReportMetric(float64(testBE.Engine().Threads()), "threads")
		})
	}
}

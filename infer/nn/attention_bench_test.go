package nn

import (
	"fmt"
	"testing"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// BenchmarkAttentionFullRing times one query over a full ring at the 7B
// temporal transformer's shape (d 4096, 32 heads, context 3000): the cost
// that grows with the conversation, per layer (×32 layers per frame).
func BenchmarkAttentionFullRing(b *testing.B) {
	for _, c := range []struct{ d, heads, ctx int }{{4096, 32, 3000}, {2048, 16, 3000}, {512, 8, 250}} {
		b.Run(fmt.Sprintf("d%d_ctx%d", c.d, c.ctx), func(b *testing.B) {
			t := &Transformer{Cfg: TransformerConfig{DModel: c.d, NumHeads: c.heads, Context: c.ctx}, dHead: c.d / c.heads}
			ring := NewKVRing(c.ctx, c.heads, c.d/c.heads)
			r := &ring
			r.End = 10 * c.ctx
			for i := range r.K {
				r.K[i] = float32(i%7) * 0.01
				r.V[i] = float32(i%5) * 0.01
			}
			var sc scratch
			sc.job = attnJob{t: t, valid: make([]int32, 0, c.ctx), scores: make([]float32, c.heads*c.ctx)}
			sc.headFn = sc.job.head
			q := make([]float32, c.d)
			out := make([]float32, c.d)
			b.SetBytes(int64(2 * c.ctx * c.d * 4)) // K and V read once
			b.ReportAllocs()
			for b.Loop() {
				t.attend(r, &sc, q, out, r.End-1)
			}
			b.ReportMetric(float64(ops.Threads()), "threads")
		})
	}
}

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
)

// BenchmarkAttend is one Attend call at the shapes of a batch step: the
// ~1.3B LM's decode (16 heads of 128, one row a conversation, 250 positions
// held) and Mimi's transformer (8 heads of 64, two rows a stream, 200 held
// in a ring of its 250-position context), for 1 and 16 conversations.
func BenchmarkAttend(b *testing.B) {
	for _, sh := range []struct {
		name                        string
		heads, dh, capacity, filled int
		rows                        int
		stepwise                    bool
	}{
		{"lm", 16, 128, 300, 250, 1, true},
		{"mimi", 8, 64, 250, 200, 2, false},
	} {
		for _, B := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/B=%d", sh.name, B), func(b *testing.B) {
				c := Default()
				D := sh.heads * sh.dh
				seqs := make([]backend.Seq, B)
				for i := range seqs {
					r := c.NewRing(sh.heads, sh.dh, sh.capacity)
					c.FillRing(r, sh.filled)
					seqs[i] = backend.Seq{Ring: r, Rows: sh.rows}
				}
				qkv, out := c.NewActs(B*sh.rows, 3*D), c.NewActs(B*sh.rows, D)
				rng := rand.New(rand.NewPCG(1, 2))
				qd := data(qkv)
				for i := range qd {
					qd[i] = rng.Float32() - 0.5
				}
				b.ReportAllocs()
				for b.Loop() {
					c.Attend(out, qkv, seqs, 0, sh.stepwise)
					for _, s := range seqs {
						s.Ring.End -= sh.rows // the same positions again
					}
				}
			})
		}
	}
}

package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
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
		group                       int
	}{
		{"lm", 16, 128, 300, 250, 1, backend.Stepwise},
		{"mimi", 8, 64, 250, 200, 2, backend.Chunk},
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
					c.Attend(out, qkv, seqs, 0, sh.group)
					for _, s := range seqs {
						s.Ring.End -= sh.rows // the same positions again
					}
				}
			})
		}
	}
}

// BenchmarkAttendKV is Attend at a step's shapes with the rings coming
// from memory as in a step: 16 layers' rings (or, for Mimi, its two
// transformers' 8 each) attended in turn, at B = 1 and 16, with float32
// and with bf16 rings (Options.KVDType). "lm" is the ~1.3B LM (16 heads of
// 128, one row a conversation, 320 positions held: a job's second half),
// "mimi" Mimi's transformers (8 heads of 64, two rows a stream written
// first, the 250-position context full). GB/s counts the float32 bytes
// the call attends (so that the rows compare as speeds).
// PP_OFFLINE_KERNEL=avx2 times another kernel variant.
func BenchmarkAttendKV(b *testing.B) {
	const layers = 16
	for _, sh := range []struct {
		name                              string
		heads, dh, capacity, filled, rows int
		group                             int
	}{
		{"lm", 16, 128, 400, 320, 1, backend.Stepwise},
		{"mimi", 8, 64, 250, 250, 2, backend.Chunk},
	} {
		for _, kv := range []string{"f32", "bf16"} {
			for _, B := range []int{1, 16} {
				name := fmt.Sprintf("kv=%s/B=%d", kv, B)
				if sh.name != "lm" {
					name = sh.name + "/" + name
				}
				b.Run(name, func(b *testing.B) {
					c, err := New(Options{KVDType: kv, Kernel: os.Getenv("PP_OFFLINE_KERNEL")})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					D := sh.heads * sh.dh
					seqs := make([][]backend.Seq, layers)
					for l := range seqs {
						seqs[l] = make([]backend.Seq, B)
						for i := range seqs[l] {
							r := c.NewRing(sh.heads, sh.dh, sh.capacity)
							c.FillRing(r, sh.filled)
							seqs[l][i] = backend.Seq{Ring: r, Rows: sh.rows}
						}
					}
					qkv, out := c.NewActs(B*sh.rows, 3*D), c.NewActs(B*sh.rows, D)
					rng := rand.New(rand.NewPCG(1, 2))
					for i, qd := 0, data(qkv); i < len(qd); i++ {
						qd[i] = rng.Float32() - 0.5
					}
					b.ReportAllocs()
					l := 0
					for b.Loop() {
						s := seqs[l%layers]
						l++
						c.Attend(out, qkv, s, 0, sh.group)
						for _, q := range s {
							q.Ring.End -= sh.rows // the same positions again
						}
					}
					held := min(sh.filled+sh.rows, sh.capacity)
					bytes := float64(B*sh.heads*held*sh.dh*8) * float64(b.N)
					b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ropeRef is one head's rotation written out, with its own angles (as the
// backend computed it before ApplyHeads shared them between heads).
func ropeRef(r *RoPE, x []float32, pos int) {
	t := float32(pos)
	for i, f := range r.freqs {
		a := f * t
		c := float32(math.Cos(float64(a)))
		s := float32(math.Sin(float64(a)))
		xr, xi := x[2*i], x[2*i+1]
		x[2*i] = xr*c - xi*s
		x[2*i+1] = xr*s + xi*c
	}
}

// ApplyHeads gives every head the bits of the written-out rotation, at
// positions up to past the real model's context; a row remainder shorter
// than a head is left alone.
func TestRoPEApplyHeadsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dh := range []int{2, 8, 64, 128} {
		r := NewRoPE(dh, 10000)
		cs := make([]float32, dh)
		for _, pos := range []int{0, 1, 7, 250, 2999, 4100} {
			row := make([]float32, 5*dh+1)
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			want := append([]float32(nil), row...)
			for h := 0; h+dh <= len(want); h += dh {
				ropeRef(r, want[h:h+dh], pos)
			}
			r.ApplyHeads(row, pos, cs)
			for i := range row {
				if math.Float32bits(row[i]) != math.Float32bits(want[i]) {
					t.Fatalf("dh %d pos %d [%d]: ApplyHeads %g, reference %g", dh, pos, i, row[i], want[i])
				}
			}
			if row[len(row)-1] == 0 || row[len(row)-1] != want[len(want)-1] {
				t.Fatalf("dh %d: the remainder changed", dh)
			}
		}
	}
}

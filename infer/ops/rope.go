package ops

import "math"

// RoPE holds the rotary frequencies of one head size, computed in float32 as
// the reference does: freq_i = exp(i · (−ln(max_period)·2/D)).
type RoPE struct {
	freqs []float32
}

// NewRoPE prepares the frequencies for heads of size d.
func NewRoPE(d int, maxPeriod float64) *RoPE {
	r := &RoPE{freqs: make([]float32, d/2)}
	c := float32(-math.Log(maxPeriod) * 2 / float64(d))
	for i := range r.freqs {
		r.freqs[i] = float32(math.Exp(float64(float32(i) * c)))
	}
	return r
}

// ApplyHeads rotates every head of row (consecutive head vectors of the
// RoPE's size, interleaved pairs; a shorter remainder is left alone) for
// position pos, in place, with the angles' cosines and sines computed once
// for all heads. cs is scratch of at least the head size.
func (r *RoPE) ApplyHeads(row []float32, pos int, cs []float32) {
	dh := 2 * len(r.freqs)
	if dh == 0 || len(row) < dh {
		return
	}
	cs = cs[:dh]
	t := float32(pos)
	for i, f := range r.freqs {
		a := f * t
		cs[2*i] = float32(math.Cos(float64(a)))
		cs[2*i+1] = float32(math.Sin(float64(a)))
	}
	for h := 0; h+dh <= len(row); h += dh {
		x := row[h : h+dh]
		for i := 0; i < dh; i += 2 {
			c, s := cs[i], cs[i+1]
			xr, xi := x[i], x[i+1]
			x[i] = xr*c - xi*s
			x[i+1] = xr*s + xi*c
		}
	}
}

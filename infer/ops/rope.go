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

// Apply rotates one head vector (interleaved pairs) for position pos, in place.
func (r *RoPE) Apply(x []float32, pos int) {
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

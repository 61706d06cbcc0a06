package audio

import (
	"math"
)

// Loudness per ITU-R BS.1770-4 exactly as pyloudnorm 0.2 computes it
// (Meter(rate), "K-weighting", 0.4 s blocks, 75 % overlap), which is what the
// reference's normalize_audio calls before scaling a voice prompt to −24 LUFS.
//
// pyloudnorm specifics reproduced here (they differ slightly from the ITU
// text): the K-weighting biquads are designed for the actual rate with the
// RBJ cookbook formulas (high shelf G = +4 dB, Q = 1/√2, fc = 1500 Hz; high
// pass Q = 0.5, fc = 38 Hz), applied with scipy's lfilter (direct form II
// transposed, float64); the number of blocks is round((T−0.4)/0.1)+1 with
// numpy's round-half-even; block bounds are int(0.4·(j·0.25)·rate) and
// int(0.4·(j·0.25+1)·rate) (a last block may run short, it is still divided by
// 0.4·rate); absolute gate l ≥ −70, relative gate l > Γr (strict) and
// l > −70; nothing left → −inf.
//
// pyloudnorm works on a copy of its input in the input's dtype. The reference
// hands it float32 samples, so each filter's float64 output is rounded to
// float32 when stored, and the block energies are numpy float32 pairwise sums
// of float32 squares (see npSum32): IntegratedLoudness reproduces that. IntegratedLoudness64
// is the same measure for a float64 input (all in float64).

const (
	blockSeconds = 0.4
	blockOverlap = 0.75
	absoluteGate = -70.0
)

type biquad struct{ b0, b1, b2, a1, a2 float64 }

// kWeighting returns pyloudnorm's two K-weighting stages for rate.
func kWeighting(rate float64) [2]biquad {
	design := func(G, Q, fc float64, shelf bool) biquad {
		A := math.Pow(10, G/40.0)
		w0 := 2.0 * math.Pi * (fc / rate)
		alpha := math.Sin(w0) / (2.0 * Q)
		c := math.Cos(w0)
		var b0, b1, b2, a0, a1, a2 float64
		if shelf {
			sa := 2 * math.Sqrt(A) * alpha
			b0 = A * ((A + 1) + (A-1)*c + sa)
			b1 = -2 * A * ((A - 1) + (A+1)*c)
			b2 = A * ((A + 1) + (A-1)*c - sa)
			a0 = (A + 1) - (A-1)*c + sa
			a1 = 2 * ((A - 1) - (A+1)*c)
			a2 = (A + 1) - (A-1)*c - sa
		} else {
			b0 = (1 + c) / 2
			b1 = -(1 + c)
			b2 = (1 + c) / 2
			a0 = 1 + alpha
			a1 = -2 * c
			a2 = 1 - alpha
		}
		return biquad{b0 / a0, b1 / a0, b2 / a0, a1 / a0, a2 / a0}
	}
	return [2]biquad{
		design(4.0, 1/math.Sqrt(2), 1500.0, true),
		design(0.0, 0.5, 38.0, false),
	}
}

// filter runs the biquad over x in place like scipy.signal.lfilter (direct
// form II transposed, zero initial state). When f32 is set, every output is
// rounded to float32 as numpy does when storing into a float32 array.
func (q biquad) filter(x []float64, f32 bool) {
	var z0, z1 float64
	for i, xn := range x {
		y := float64(z0 + float64(q.b0*xn))
		z0 = float64(z1+float64(xn*q.b1)) - float64(y*q.a1)
		z1 = float64(xn*q.b2) - float64(y*q.a2)
		if f32 {
			y = float64(float32(y))
		}
		x[i] = y
	}
}

// pairwiseSum32 is numpy's pairwise summation of float32 values (8-way
// unrolled blocks of at most 128, float32 accumulators) over x[i]².
func pairwiseSum32(x []float64) float32 {
	n := len(x)
	sq := func(i int) float32 { v := float32(x[i]); return float32(v * v) }
	if n < 8 {
		var res float32
		for i := 0; i < n; i++ {
			res += sq(i)
		}
		return res
	}
	if n <= 128 {
		var r [8]float32
		for j := 0; j < 8; j++ {
			r[j] = sq(j)
		}
		i := 8
		for ; i < n-n%8; i += 8 {
			for j := 0; j < 8; j++ {
				r[j] += sq(i + j)
			}
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += sq(i)
		}
		return res
	}
	n2 := n / 2
	n2 -= n2 % 8
	return pairwiseSum32(x[:n2]) + pairwiseSum32(x[n2:])
}

// pairwiseSum64 is numpy's pairwise summation of float64 values; when square
// is set it sums x[i]².
func pairwiseSum64(x []float64, square bool) float64 {
	n := len(x)
	v := func(i int) float64 {
		if square {
			return float64(x[i] * x[i])
		}
		return x[i]
	}
	if n < 8 {
		res := 0.0
		for i := 0; i < n; i++ {
			res += v(i)
		}
		return res
	}
	if n <= 128 {
		var r [8]float64
		for j := 0; j < 8; j++ {
			r[j] = v(j)
		}
		i := 8
		for ; i < n-n%8; i += 8 {
			for j := 0; j < 8; j++ {
				r[j] += v(i + j)
			}
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += v(i)
		}
		return res
	}
	n2 := n / 2
	n2 -= n2 % 8
	return pairwiseSum64(x[:n2], square) + pairwiseSum64(x[n2:], square)
}

// numpy reduces a contiguous array through its iterator buffer: np.sum adds
// the pairwise sums of successive 8192-element chunks to a running total that
// starts at 0 (in the array's dtype). npSum32 / npSum64 reproduce that.
const npBufSize = 8192

func npSum32(x []float64) float32 {
	var acc float32
	for s := 0; s < len(x); s += npBufSize {
		acc += pairwiseSum32(x[s:min(s+npBufSize, len(x))])
	}
	return acc
}

func npSum64(x []float64, square bool) float64 {
	acc := 0.0
	for s := 0; s < len(x); s += npBufSize {
		acc += pairwiseSum64(x[s:min(s+npBufSize, len(x))], square)
	}
	return acc
}

// IntegratedLoudness returns the integrated loudness of the mono float32
// signal x at rate Hz in LUFS, as pyloudnorm's Meter(rate).integrated_loudness
// returns it for a float32 array (the reference's case). It returns −Inf when
// every block is gated out (silence, or everything below −70 LUFS), and NaN
// when x is shorter than one 400 ms block or rate is not positive
// (pyloudnorm raises "Audio must have length greater than the block size").
func IntegratedLoudness(x []float32, rate int) float64 {
	buf := make([]float64, len(x))
	for i, v := range x {
		buf[i] = float64(v)
	}
	return integratedLoudness(buf, rate, true)
}

// IntegratedLoudness64 is IntegratedLoudness for a float64 signal, computed
// as pyloudnorm does for a float64 array (no float32 rounding anywhere).
func IntegratedLoudness64(x []float64, rate int) float64 {
	buf := append([]float64(nil), x...)
	return integratedLoudness(buf, rate, false)
}

func integratedLoudness(x []float64, rate int, f32 bool) float64 {
	if rate <= 0 {
		return math.NaN()
	}
	fs := float64(rate)
	if float64(len(x)) < blockSeconds*fs {
		return math.NaN()
	}
	for _, q := range kWeighting(fs) {
		q.filter(x, f32)
	}

	step := 1.0 - blockOverlap
	T := float64(len(x)) / fs
	numBlocks := int(math.RoundToEven((T-blockSeconds)/(blockSeconds*step))) + 1
	norm := 1.0 / (blockSeconds * fs)
	z := make([]float64, numBlocks)
	l := make([]float64, numBlocks)
	for j := 0; j < numBlocks; j++ {
		lo := int(blockSeconds * (float64(j) * step) * fs)
		hi := int(blockSeconds * (float64(j)*step + 1) * fs)
		lo, hi = min(lo, len(x)), min(hi, len(x))
		var s float64
		if f32 {
			s = float64(npSum32(x[lo:hi]))
		} else {
			s = npSum64(x[lo:hi], true)
		}
		z[j] = norm * s
		l[j] = -0.691 + 10.0*math.Log10(z[j])
	}

	mean := func(keep func(lj float64) bool) float64 {
		var sel []float64
		for j, lj := range l {
			if keep(lj) {
				sel = append(sel, z[j])
			}
		}
		if len(sel) == 0 {
			return math.NaN()
		}
		return npSum64(sel, false) / float64(len(sel))
	}
	zAbs := mean(func(lj float64) bool { return lj >= absoluteGate })
	gammaR := -0.691 + 10.0*math.Log10(zAbs) - 10.0
	zRel := mean(func(lj float64) bool { return lj > gammaR && lj > absoluteGate })
	if math.IsNaN(zRel) {
		zRel = 0 // numpy.nan_to_num; log10(0) = −inf
	}
	return -0.691 + 10.0*math.Log10(zRel)
}

// LoudnessGain is the linear gain normalize_audio applies to reach target
// LUFS from loudness: 10^((target−loudness)/20), in float64.
func LoudnessGain(loudness, target float64) float64 {
	return math.Pow(10.0, (target-loudness)/20.0)
}

// NormalizeLoudness scales the mono signal x at rate Hz to target LUFS like
// the reference's normalize_audio (pyloudnorm.normalize.loudness) under numpy
// 1.x: the float64 gain is rounded to float32 and multiplied with the float32
// samples in float32. It returns a new slice.
//
// Silence and too-short input: when the measured loudness is not finite (−Inf:
// every block gated out; NaN: shorter than one 400 ms block) the samples are
// returned unchanged (copied). The reference does not handle either case: for
// −Inf its gain is +Inf and the "normalised" prompt becomes NaN (0·∞) and ±Inf
// samples that Mimi turns into garbage codes; for a prompt shorter than
// 400 ms pyloudnorm raises ValueError. Callers that want the reference's
// failure can check IntegratedLoudness themselves.
func NormalizeLoudness(x []float32, rate int, target float64) []float32 {
	out := make([]float32, len(x))
	L := IntegratedLoudness(x, rate)
	if math.IsInf(L, 0) || math.IsNaN(L) {
		copy(out, x)
		return out
	}
	g := float32(LoudnessGain(L, target))
	for i, v := range x {
		out[i] = g * v
	}
	return out
}

package ops

import "math"

// RMSNorm writes x·alpha/sqrt(mean(x²)+eps) into dst, in float32 (rms_norm_f32).
func RMSNorm(dst, x, alpha []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	variance := eps + ss/float32(len(x))
	r := float32(1 / math.Sqrt(float64(variance)))
	for i, v := range x {
		dst[i] = v * (alpha[i] * r)
	}
}

// LayerNorm writes (x−mean)/sqrt(var+eps)·w + b into dst (biased variance, as torch).
func LayerNorm(dst, x, w, b []float32, eps float32) {
	n := float32(len(x))
	var mean float32
	for _, v := range x {
		mean += v
	}
	mean /= n
	var vr float32
	for _, v := range x {
		d := v - mean
		vr += d * d
	}
	vr /= n
	r := float32(1 / math.Sqrt(float64(vr+eps)))
	for i, v := range x {
		y := (v - mean) * r
		if w != nil {
			y *= w[i]
		}
		if b != nil {
			y += b[i]
		}
		dst[i] = y
	}
}

// GELU is the exact (erf) GELU, in place.
func GELU(x []float32) {
	for i, v := range x {
		x[i] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
	}
}

// SiLU computes x·sigmoid(x).
func SiLU(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

// ELU with alpha 1, in place.
func ELU(x []float32) {
	for i, v := range x {
		if v <= 0 {
			x[i] = float32(math.Expm1(float64(v)))
		}
	}
}

// Add adds src into dst.
func Add(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// Add adds src into dst on the engine's kernel variant: Axpy with a = 1,
// whose product 1·src[i] is exact, so each sum is dst[i] + src[i] rounded
// once, the bits of the package's Add on every variant (5–12× its speed
// on AVX-512: the codec's residual adds). It runs on the calling
// goroutine.
func (e *Engine) Add(dst, src []float32) { e.Axpy(dst, 1, src) }

// AddScaled adds scale[i]·src[i] into dst (layer scale); scale nil adds src.
func AddScaled(dst, src, scale []float32) {
	if scale == nil {
		Add(dst, src)
		return
	}
	for i := range dst {
		dst[i] += scale[i] * src[i]
	}
}

// Softmax normalises x in place (float32, max-subtracted).
func Softmax(x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	var s float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		s += e
	}
	inv := 1 / s
	for i := range x {
		x[i] *= inv
	}
}

// Argmax returns the index of the largest value (first on ties, as torch).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

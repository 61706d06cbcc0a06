package ops

import (
	"math"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// The slow, obviously-correct paths: plain loops, kept as the reference the
// fast kernels are tested against (within float tolerance: the fast kernels
// use a different, fixed summation order, see matvec_portable.go).

// refMatVec computes dst[r] = Σ_c m[r,c]·x[c] with scalar loops.
func refMatVec(m Mat, dst, x []float32) {
	c := m.Cols
	for r := 0; r < m.Rows; r++ {
		switch m.DType {
		case weights.F32:
			dst[r] = refDotF32(m.f32[r*c:(r+1)*c], x)
		case weights.BF16:
			dst[r] = refDotBF16(m.u16[r*c:(r+1)*c], x)
		case weights.F16:
			var s float32
			for j, v := range m.u16[r*c : (r+1)*c] {
				s += weights.HalfToFloat(v) * x[j]
			}
			dst[r] = s
		}
	}
}

func refDotF32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func refDotBF16(a []uint16, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += math.Float32frombits(uint32(a[i])<<16) * b[i]
		s1 += math.Float32frombits(uint32(a[i+1])<<16) * b[i+1]
		s2 += math.Float32frombits(uint32(a[i+2])<<16) * b[i+2]
		s3 += math.Float32frombits(uint32(a[i+3])<<16) * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += math.Float32frombits(uint32(a[i])<<16) * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

//go:build !purego

package ops

import "github.com/pp-offline/pp-offline/infer/weights"

// Assembly kernels over quantized blocks (quant_amd64.s). w points at the
// first block of the first row, stride is a row's bytes; the wrappers below
// check every bound before calling them.

//go:noescape
func mvQ8_0AVX512(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvQ8_0AVX2(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvQ4_KAVX512(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvQ4_KAVX2(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func dqQ8_0AVX512(w *byte, nl int, dst *float32)

//go:noescape
func dqQ8_0AVX2(w *byte, nl int, dst *float32)

//go:noescape
func dqQ4_KAVX512(w *byte, nl int, dst *float32)

//go:noescape
func dqQ4_KAVX2(w *byte, nl int, dst *float32)

// archMVQ runs the assembly mv kernel of variant id over a quantized m.
func archMVQ(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool {
	rows := r1 - r0
	if rows <= 0 {
		return true
	}
	if id == kAVX2 && !hasF16C {
		return false
	}
	rb := int(m.DType.RowBytes(m.Cols))
	w := m.q[r0*rb:]
	out := dst[r0:r1]
	if rows <= 0 || nl <= 0 || nl%lanes != 0 || nl > m.Cols || len(w) < (rows-1)*rb+qBlockBytes(m.DType, nl) || len(x) < nl || len(out) < rows {
		panic("ops: kernel bounds")
	}
	switch {
	case m.DType == weights.Q8_0 && id == kAVX512:
		mvQ8_0AVX512(&w[0], rb, rows, &x[0], nl, &out[0])
	case m.DType == weights.Q8_0:
		mvQ8_0AVX2(&w[0], rb, rows, &x[0], nl, &out[0])
	case id == kAVX512:
		mvQ4_KAVX512(&w[0], rb, rows, &x[0], nl, &out[0])
	default:
		mvQ4_KAVX2(&w[0], rb, rows, &x[0], nl, &out[0])
	}
	return true
}

// archDQ dequantizes the first nl elements of a quantized row into dst.
func archDQ(id kernelID, dt weights.DType, row []byte, nl int, dst []float32) bool {
	if id == kAVX2 && !hasF16C {
		return false
	}
	if nl <= 0 || nl%lanes != 0 || len(row) < qBlockBytes(dt, nl) || len(dst) < nl {
		panic("ops: kernel bounds")
	}
	switch {
	case dt == weights.Q8_0 && id == kAVX512:
		dqQ8_0AVX512(&row[0], nl, &dst[0])
	case dt == weights.Q8_0:
		dqQ8_0AVX2(&row[0], nl, &dst[0])
	case id == kAVX512:
		dqQ4_KAVX512(&row[0], nl, &dst[0])
	default:
		dqQ4_KAVX2(&row[0], nl, &dst[0])
	}
	return true
}

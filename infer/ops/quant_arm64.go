//go:build !purego

package ops

import "github.com/pp-offline/pp-offline/infer/weights"

// Assembly kernels over quantized blocks (quant_arm64.s). w points at the
// first block of the first row, stride is a row's bytes; the wrappers below
// check every bound before calling them.

//go:noescape
func mvQ8_0NEON(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvQ4_KNEON(w *byte, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func dqQ8_0NEON(w *byte, nl int, dst *float32)

//go:noescape
func dqQ4_KNEON(w *byte, nl int, dst *float32)

// archMVQ runs the assembly mv kernel over a quantized m.
func archMVQ(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool {
	if id != kNEON || (m.DType != weights.Q8_0 && m.DType != weights.Q4_K) {
		return false
	}
	rows := r1 - r0
	if rows <= 0 {
		return true
	}
	rb := int(m.DType.RowBytes(m.Cols))
	w := m.q[r0*rb:]
	out := dst[r0:r1]
	if nl <= 0 || nl%lanes != 0 || nl > m.Cols || len(w) < (rows-1)*rb+qBlockBytes(m.DType, nl) || len(x) < nl || len(out) < rows {
		panic("ops: kernel bounds")
	}
	if m.DType == weights.Q8_0 {
		mvQ8_0NEON(&w[0], rb, rows, &x[0], nl, &out[0])
	} else {
		mvQ4_KNEON(&w[0], rb, rows, &x[0], nl, &out[0])
	}
	return true
}

// archDQ dequantizes the first nl elements of a quantized row into dst.
func archDQ(id kernelID, dt weights.DType, row []byte, nl int, dst []float32) bool {
	if id != kNEON || (dt != weights.Q8_0 && dt != weights.Q4_K) {
		return false
	}
	if nl <= 0 || nl%lanes != 0 || len(row) < qBlockBytes(dt, nl) || len(dst) < nl {
		panic("ops: kernel bounds")
	}
	if dt == weights.Q8_0 {
		dqQ8_0NEON(&row[0], nl, &dst[0])
	} else {
		dqQ4_KNEON(&row[0], nl, &dst[0])
	}
	return true
}

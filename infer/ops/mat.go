// Package ops holds the numeric kernels of pp-offline: the one place each
// operation is computed on the CPU. Weights are read in their file dtype and
// widened exactly to float32 at the point of use; activations and
// accumulation are float32.
package ops

import (
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Mat is a row-major weight matrix [Rows, Cols] in its storage dtype.
type Mat struct {
	Rows, Cols int
	DType      weights.DType
	u16        []uint16  // BF16 or F16 elements
	f32        []float32 // F32 elements
}

// NewMat views a tensor as a matrix. Tensors of rank > 2 are flattened to
// [shape[0], prod(rest)] (conv kernels, [1,1,D] norms become [1, D]).
func NewMat(t *weights.Tensor) (Mat, error) {
	if len(t.Shape) == 0 {
		return Mat{}, fmt.Errorf("tensor %q is a scalar, not a matrix", t.Name)
	}
	rows := t.Shape[0]
	cols := 1
	for _, s := range t.Shape[1:] {
		cols *= s
	}
	if len(t.Shape) == 1 {
		rows, cols = 1, t.Shape[0]
	}
	m := Mat{Rows: rows, Cols: cols, DType: t.DType}
	switch t.DType {
	case weights.BF16, weights.F16:
		m.u16 = t.Uint16s()
	case weights.F32:
		m.f32 = t.F32View()
	default:
		return Mat{}, fmt.Errorf("tensor %q: dtype %s cannot be used as a weight matrix", t.Name, t.DType)
	}
	return m, nil
}

// MatFromF32 wraps float32 data (tests, computed weights).
func MatFromF32(rows, cols int, data []float32) Mat {
	if len(data) != rows*cols {
		panic("ops: MatFromF32 size mismatch")
	}
	return Mat{Rows: rows, Cols: cols, DType: weights.F32, f32: data}
}

// RowSlice returns rows [r0, r1) as a matrix without copying.
func (m Mat) RowSlice(r0, r1 int) Mat {
	out := m
	out.Rows = r1 - r0
	if m.u16 != nil {
		out.u16 = m.u16[r0*m.Cols : r1*m.Cols]
	} else {
		out.f32 = m.f32[r0*m.Cols : r1*m.Cols]
	}
	return out
}

// Bytes is the storage size of the matrix.
func (m Mat) Bytes() int64 { return int64(m.Rows) * int64(m.Cols) * int64(m.DType.Size()) }

// Row widens row i into dst (len Cols).
func (m Mat) Row(i int, dst []float32) {
	c := m.Cols
	switch m.DType {
	case weights.F32:
		copy(dst[:c], m.f32[i*c:(i+1)*c])
	case weights.BF16:
		src := m.u16[i*c : (i+1)*c]
		for j, v := range src {
			dst[j] = math.Float32frombits(uint32(v) << 16)
		}
	case weights.F16:
		src := m.u16[i*c : (i+1)*c]
		for j, v := range src {
			dst[j] = weights.HalfToFloat(v)
		}
	}
}

// Float32s widens the whole matrix into a new slice (small tensors only).
func (m Mat) Float32s() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for i := 0; i < m.Rows; i++ {
		m.Row(i, out[i*m.Cols:(i+1)*m.Cols])
	}
	return out
}

// MatVec computes dst[r] = Σ_c m[r,c]·x[c] for every row (F.linear without bias).
func (m Mat) MatVec(dst, x []float32) {
	if len(x) < m.Cols || len(dst) < m.Rows {
		panic(fmt.Sprintf("ops: MatVec shape mismatch: mat %dx%d, x %d, dst %d", m.Rows, m.Cols, len(x), len(dst)))
	}
	x = x[:m.Cols]
	c := m.Cols
	switch m.DType {
	case weights.F32:
		for r := 0; r < m.Rows; r++ {
			dst[r] = dotF32(m.f32[r*c:(r+1)*c], x)
		}
	case weights.BF16:
		for r := 0; r < m.Rows; r++ {
			dst[r] = dotBF16(m.u16[r*c:(r+1)*c], x)
		}
	case weights.F16:
		for r := 0; r < m.Rows; r++ {
			src := m.u16[r*c : (r+1)*c]
			var s float32
			for j, v := range src {
				s += weights.HalfToFloat(v) * x[j]
			}
			dst[r] = s
		}
	}
}

// MatMul applies MatVec to each row of xs: dst[t] = m·xs[t].
func (m Mat) MatMul(dst, xs [][]float32) {
	for t := range xs {
		m.MatVec(dst[t], xs[t])
	}
}

func dotF32(a, b []float32) float32 {
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

func dotBF16(a []uint16, b []float32) float32 {
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

// Dot is the float32 inner product.
func Dot(a, b []float32) float32 { return dotF32(a, b) }

// Package ops holds the numeric kernels of pp-offline: the one place each
// operation is computed on the CPU. Weights are read in their file dtype and
// widened exactly to float32 at the point of use; activations and
// accumulation are float32.
//
// Matrix products (MatVec, MatMul) and Dot run on kernel variants chosen
// from the CPU (golang.org/x/sys/cpu): AVX-512F, AVX2+FMA (Go assembly,
// matvec_amd64.s) or portable Go (matvec_portable.go; the only one under the
// purego build tag or off amd64). All variants compute the same fixed
// sequence of float32 operations (see the contract in matvec_portable.go),
// so results are bit-identical whatever the CPU, the variant, the thread
// count or whether a row comes from MatVec or MatMul. Large products run on
// a persistent worker pool (pool.go), split by output rows. The plain loops
// they replace are kept in matvec_ref.go as the tests' reference.
//
// An Engine (engine.go) is one compute context: a kernel variant, a compute
// dtype and a worker pool of its own, set once by NewEngine and stopped by
// Close, and never changed after. Engines are independent of each other and
// of the default engine, Default() (all cores, the best kernel variant,
// f32), which the package-level conveniences (Mat.MatVec, Mat.MatMul, Dot,
// Axpy, Parallel) run on for tests and tools. A job's code runs on the
// engine of its CPU backend (threads, kernel variant and compute dtype are
// its options); the convolutions, ELUTo and MeasureReadBandwidth take an
// engine.
//
// All of the above is the default compute dtype, "f32". An opt-in "bf16"
// compute dtype (EngineOptions.ComputeDType;
// bf16compute.go) makes BF16-weight products round their activations to
// bf16 (VDPBF16PS); it has its own, different bits and is outside the
// parity tests.
package ops

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Mat is a row-major weight matrix [Rows, Cols] in its storage dtype.
type Mat struct {
	Rows, Cols int
	DType      weights.DType
	u16        []uint16  // BF16 or F16 elements
	f32        []float32 // F32 elements
	q          []byte    // Q8_0 or Q4_K blocks (quant.go), RowBytes(Cols) per row
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

// MatFromBytes views rows×cols little-endian elements of dtype dt (BF16,
// F16 or F32; or rows of Q8_0 / Q4_K blocks, any alignment) in b as a matrix, without copying: the matrix reads b, which
// must stay unchanged while it is in use. b must hold exactly
// rows·cols·dt.Size() bytes and start on a multiple of the element size (2
// or 4 bytes; mmap'd tensors and the 64-byte aligned offload buffers do);
// a misaligned b is an error, not a silent copy. Little-endian hosts only,
// as the weights package.
func MatFromBytes(rows, cols int, dt weights.DType, b []byte) (Mat, error) {
	switch dt {
	case weights.BF16, weights.F16, weights.F32:
	case weights.Q8_0, weights.Q4_K:
		return matFromBlocks(rows, cols, dt, b)
	default:
		return Mat{}, fmt.Errorf("ops: MatFromBytes: dtype %s cannot be used as a weight matrix", dt)
	}
	size := dt.Size()
	if rows < 0 || cols < 0 || (cols > 0 && rows > math.MaxInt/size/cols) {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: bad shape %dx%d", rows, cols)
	}
	n := rows * cols
	if len(b) != n*size {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: %d bytes for a %dx%d %s matrix (want %d)", len(b), rows, cols, dt, n*size)
	}
	if !littleEndian {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: big-endian host")
	}
	m := Mat{Rows: rows, Cols: cols, DType: dt}
	if n == 0 {
		// Non-nil, so that RowSlice sees the dtype's slice.
		if dt == weights.F32 {
			m.f32 = []float32{}
		} else {
			m.u16 = []uint16{}
		}
		return m, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(size) != 0 {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: data at %#x is not aligned to its %d-byte %s elements", uintptr(p), size, dt)
	}
	if dt == weights.F32 {
		m.f32 = unsafe.Slice((*float32)(p), n)
	} else {
		m.u16 = unsafe.Slice((*uint16)(p), n)
	}
	return m, nil
}

// littleEndian reports the host byte order.
var littleEndian = func() bool {
	v := uint16(1)
	return *(*byte)(unsafe.Pointer(&v)) == 1
}()

// RowSlice returns rows [r0, r1) as a matrix without copying.
func (m Mat) RowSlice(r0, r1 int) Mat {
	out := m
	out.Rows = r1 - r0
	if m.q != nil {
		rb := int(m.DType.RowBytes(m.Cols))
		out.q = m.q[r0*rb : r1*rb]
	} else if m.u16 != nil {
		out.u16 = m.u16[r0*m.Cols : r1*m.Cols]
	} else {
		out.f32 = m.f32[r0*m.Cols : r1*m.Cols]
	}
	return out
}

// Bytes is the storage size of the matrix.
func (m Mat) Bytes() int64 { return int64(m.Rows) * m.DType.RowBytes(m.Cols) }

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
	case weights.Q8_0, weights.Q4_K:
		weights.DequantizeRow(m.DType, dst[:c], m.qrow(i))
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

// Tuning (results do not depend on these).
const (
	// Products of fewer weight bytes × inputs run on the calling goroutine:
	// waking the pool and splitting the rows does not pay for them.
	parallelMinBytes = 256 << 10
	// mmBlockBytes bounds the inputs one pass over a block of weight rows
	// works on (they stay in L2 while the weights stream; measured best
	// among 64 KiB–1 MiB here).
	mmBlockBytes = 512 << 10
)

// Column-block flags of the register tiles (the f32 mode's mmtile and the
// bf16 mode's VDPBF16PS tile): the block continues from the tile's state;
// the block is the last, the sums come out.
const (
	blockLoad  = 1
	blockFinal = 2
)

// blockFlags is the flags of column block [cb, cb+n) of nl columns.
func blockFlags(cb, n, nl int) int {
	fl := 0
	if cb > 0 {
		fl |= blockLoad
	}
	if cb+n == nl {
		fl |= blockFinal
	}
	return fl
}

// MatVec computes dst[r] = Σ_c m[r,c]·x[c] for every row (F.linear without
// bias) on the default engine. The result of each row follows the fixed
// 32-lane order described in matvec_portable.go: it is the same on every
// CPU, kernel variant and thread count, and the same as MatMul's.
func (m Mat) MatVec(dst, x []float32) { defaultEngine.MatVec(m, dst, x) }

// MatMul computes dst[t] = m·xs[t] for every row of xs (the prefill) on the
// default engine, each bit-identical to MatVec(dst[t], xs[t]). dst must not
// alias xs.
func (m Mat) MatMul(dst, xs [][]float32) { defaultEngine.MatMul(m, dst, xs) }

// MatVec computes dst[r] = Σ_c m[r,c]·x[c] for every row (F.linear without
// bias). The result of each row follows the fixed 32-lane order described
// in matvec_portable.go: it is the same on every CPU, kernel variant and
// thread count, and the same as MatMul's (in the f32 compute dtype; see
// bf16compute.go for the bf16 one).
func (e *Engine) MatVec(m Mat, dst, x []float32) {
	if len(x) < m.Cols || len(dst) < m.Rows {
		panic(fmt.Sprintf("ops: MatVec shape mismatch: mat %dx%d, x %d, dst %d", m.Rows, m.Cols, len(x), len(dst)))
	}
	if m.Rows == 0 {
		return
	}
	x, dst = x[:m.Cols], dst[:m.Rows]
	k := e.k.Load()
	// --- opt-in bf16 compute mode (bf16compute.go); f32 mode unchanged ---
	if m.DType == weights.BF16 && e.bf16.Load() {
		m.matVecBF16(e.pool, bf16Asm(k), dst, x)
		return
	}
	// --- end bf16 compute mode ---
	if m.Bytes() >= parallelMinBytes && e.pool.parallelMatVec(k, m, dst, x) {
		return
	}
	m.mvRange(k, 0, m.Rows, dst, x)
}

// MatMul computes dst[t] = m·xs[t] for every row of xs (the prefill, the
// lockstep batch), each bit-identical to MatVec(m, dst[t], xs[t]). On the
// assembly variants it runs on the column-blocked register tiles of
// mmtile_amd64.go (3 rows × 4, 3 or 2 inputs on AVX-512, 1 or 2 rows × 3
// or 2 on AVX2; each weight read from memory once per 32 inputs, quantized
// ones dequantized in registers); elsewhere weight rows are read once per
// block of inputs (as many as fit mmBlockBytes) and register tiles share
// their loads. dst must not alias xs.
func (e *Engine) MatMul(m Mat, dst, xs [][]float32) {
	if len(dst) < len(xs) {
		panic(fmt.Sprintf("ops: MatMul has %d outputs for %d inputs", len(dst), len(xs)))
	}
	for t := range xs {
		if len(xs[t]) < m.Cols || len(dst[t]) < m.Rows {
			panic(fmt.Sprintf("ops: MatMul shape mismatch: mat %dx%d, x %d, dst %d", m.Rows, m.Cols, len(xs[t]), len(dst[t])))
		}
	}
	switch {
	case len(xs) == 0 || m.Rows == 0:
		return
	case len(xs) == 1:
		e.MatVec(m, dst[0], xs[0])
		return
	}
	dst = dst[:len(xs)]
	k := e.k.Load()
	// --- opt-in bf16 compute mode (bf16compute.go); f32 mode unchanged ---
	if m.DType == weights.BF16 && e.bf16.Load() {
		m.matMulBF16(e.pool, bf16Asm(k), dst, xs)
		return
	}
	// --- end bf16 compute mode ---
	in := m.mmtPrepare(k, xs) // the bf16 tiles' input layout, once for all chunks
	if m.Bytes()*int64(len(xs)) < parallelMinBytes || !e.pool.parallelMatMul(k, m, dst, xs, in) {
		m.mmRange(k, 0, m.Rows, dst, xs, in)
	}
	mmtRelease(in)
}

// mvRange computes rows [r0, r1) of a matrix-vector product.
func (m Mat) mvRange(k *kernelSet, r0, r1 int, dst, x []float32) {
	nl := m.Cols &^ (lanes - 1)
	if nl > 0 {
		k.mv(m, r0, r1, nl, x, dst)
	} else {
		clear(dst[r0:r1])
	}
	if nl < m.Cols {
		m.tailRows(r0, r1, nl, x, dst[r0:r1])
	}
}

// tailRows adds the columns [nl, Cols) of rows [r0, r1) to out
// sequentially (shared by every kernel variant).
func (m Mat) tailRows(r0, r1, nl int, x, out []float32) {
	c := m.Cols
	x = x[nl:c]
	for r := r0; r < r1; r++ {
		s := out[r-r0]
		switch m.DType {
		case weights.BF16:
			for j, v := range m.u16[r*c+nl : (r+1)*c] {
				s = fma32(bf16ToF32(v), x[j], s)
			}
		case weights.F16:
			for j, v := range m.u16[r*c+nl : (r+1)*c] {
				s = fma32(weights.HalfToFloat(v), x[j], s)
			}
		case weights.F32:
			for j, v := range m.f32[r*c+nl : (r+1)*c] {
				s = fma32(v, x[j], s)
			}
		case weights.Q8_0:
			row := m.qrow(r)
			for j := nl; j < c; j++ {
				s = fma32(weights.Q8_0At(row, j), x[j-nl], s)
			}
		case weights.Q4_K:
			row := m.qrow(r)
			for j := nl; j < c; j++ {
				s = fma32(weights.Q4_KAt(row, j), x[j-nl], s)
			}
		}
		out[r-r0] = s
	}
}

// mmRange computes rows [r0, r1) of dst[t] = m·xs[t] for all t (in: xs
// in the bf16 tiles' layout, or nil).
func (m Mat) mmRange(k *kernelSet, r0, r1 int, dst, xs [][]float32, in *mmtInputs) {
	if k.id != kPortable && m.archMMTiles(k, r0, r1, dst, xs, in) {
		return
	}
	if m.q != nil {
		m.mmRangeQ(k, r0, r1, dst, xs)
		return
	}
	c := m.Cols
	nl := c &^ (lanes - 1)
	R, T := k.tileR, k.tileT
	if nl > 0 {
		tb := max(T, mmBlockBytes/(4*c)/T*T)
		var out [16]float32
		for t0 := 0; t0 < len(xs); t0 += tb {
			t1 := min(t0+tb, len(xs))
			r := r0
			for ; r+R <= r1; r += R {
				t := t0
				for ; t+T <= t1; t += T {
					k.mm(m, r, nl, xs[t:t+T], &out, t == t0)
					for i := range R {
						for j := range T {
							dst[t+j][r+i] = out[i*T+j]
						}
					}
				}
				for ; t < t1; t++ {
					k.mv(m, r, r+R, nl, xs[t], dst[t])
				}
			}
			if r < r1 {
				for t := t0; t < t1; t++ {
					k.mv(m, r, r1, nl, xs[t], dst[t])
				}
			}
		}
	} else {
		for t := range xs {
			clear(dst[t][r0:r1])
		}
	}
	if nl < c {
		for t := range xs {
			m.tailRows(r0, r1, nl, xs[t], dst[t][r0:r1])
		}
	}
}

// Dot is the float32 inner product Σ a[i]·b[i] over len(a) (b at least as
// long), in the same fixed 32-lane order as MatVec, on the default engine's
// kernel variant: Dot(row, x) equals the MatVec result of an F32 matrix with
// that row.
func Dot(a, b []float32) float32 { return defaultEngine.Dot(a, b) }

// Dot is the float32 inner product Σ a[i]·b[i] over len(a) (b at least as
// long), in the same fixed 32-lane order as MatVec: Dot(row, x) equals the
// MatVec result of an F32 matrix with that row. It runs on the calling
// goroutine.
func (e *Engine) Dot(a, b []float32) float32 {
	b = b[:len(a)]
	nl := len(a) &^ (lanes - 1)
	var s float32
	if nl > 0 {
		s = e.k.Load().dot(a, b, nl)
	}
	return dotTail(s, a, b, nl)
}

// dotTail adds Dot's scalar tail, elements [nl, len(a)) of a·b, to s: one
// FMA per element, in order.
func dotTail(s float32, a, b []float32, nl int) float32 {
	b = b[:len(a)]
	for j := nl; j < len(a); j++ {
		s = fma32(a[j], b[j], s)
	}
	return s
}

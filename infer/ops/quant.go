package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Products over block-quantized weights (Q8_0, Q4_K; infer/weights/quant.go
// defines the formats and each weight's float32 value). They keep the
// 32-lane contract of matvec_portable.go with that value as the weight: a
// Q8_0 block or a Q4_K sub-block is exactly one group of 32 lanes, so
// element j < nl = Cols&^31 goes to lane j%32 with one FMA, the lanes are
// summed in the fixed tree, the tail is added sequentially. Every variant —
// the portable code below, the AVX-512 and AVX2 kernels (quant_amd64.s) —
// therefore gives the bits of "dequantize the row exactly, then the F32
// product", and so does a MatMul row: on AVX-512 and AVX2 the tiles of
// mmtile_amd64.s compute the weights in registers inside the tile, as the
// mv kernels do; elsewhere (portable, AVX2 without F16C) the matrix-matrix
// path dequantizes a few rows at a time into float32 and runs the F32
// register tiles on them. Activations stay float32: nothing is quantized
// on the fly.

// qChunkBytes bounds the float32 rows one step of a quantized MatMul
// dequantizes (they stay in L2 while the inputs pass over them).
const qChunkBytes = 128 << 10

// matFromBlocks views rows of quantized blocks in b (no alignment needed).
func matFromBlocks(rows, cols int, dt weights.DType, b []byte) (Mat, error) {
	if rows < 0 || cols < 0 || (cols > 0 && int64(rows) > math.MaxInt64/dt.RowBytes(cols)) {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: bad shape %dx%d", rows, cols)
	}
	if want := int64(rows) * dt.RowBytes(cols); int64(len(b)) != want {
		return Mat{}, fmt.Errorf("ops: MatFromBytes: %d bytes for a %dx%d %s matrix (want %d)", len(b), rows, cols, dt, want)
	}
	if b == nil {
		b = []byte{}
	}
	return Mat{Rows: rows, Cols: cols, DType: dt, q: b}, nil
}

// qrow is the blocks of row r of a quantized matrix.
func (m Mat) qrow(r int) []byte {
	rb := int(m.DType.RowBytes(m.Cols))
	return m.q[r*rb : (r+1)*rb]
}

func dotQ8_0Portable(row []byte, x []float32, nl int) float32 {
	x = x[:nl]
	var acc [lanes]float32
	for b := 0; b*lanes < nl; b++ {
		blk := row[b*34 : b*34+34]
		d := weights.HalfToFloat(binary.LittleEndian.Uint16(blk))
		xx := x[b*lanes : b*lanes+lanes]
		for l := range acc {
			acc[l] = fma32(d*float32(int8(blk[2+l])), xx[l], acc[l])
		}
	}
	return reduce32(&acc)
}

func dotQ4_KPortable(row []byte, x []float32, nl int) float32 {
	x = x[:nl]
	var acc [lanes]float32
	for s := 0; s*lanes < nl; s++ {
		blk := row[s/8*144 : s/8*144+144]
		sub := s % 8
		ds, ms := weights.Q4_KSubScales(blk, sub)
		qs := blk[16+sub/2*32 : 16+sub/2*32+32]
		sh := uint(sub&1) * 4
		xx := x[s*lanes : s*lanes+lanes]
		for l := range acc {
			w := float32(ds*float32(qs[l]>>sh&0xf)) - ms
			acc[l] = fma32(w, xx[l], acc[l])
		}
	}
	return reduce32(&acc)
}

type qScratch struct {
	w   []float32
	dst [][]float32
}

var qScratchPool = sync.Pool{New: func() any { return new(qScratch) }}

// mmRangeQ computes rows [r0, r1) of dst[t] = m·xs[t] for a quantized m: a
// few rows at a time are dequantized to float32 and multiplied by the F32
// kernels, which give each row the bits of the quantized MatVec.
func (m Mat) mmRangeQ(k *kernelSet, r0, r1 int, dst, xs [][]float32) {
	c := m.Cols
	R := k.tileR
	n := max(R, qChunkBytes/(4*max(1, c))/R*R)
	s := qScratchPool.Get().(*qScratch)
	if cap(s.w) < n*c {
		s.w = make([]float32, n*c)
	}
	if cap(s.dst) < len(xs) {
		s.dst = make([][]float32, len(xs))
	}
	dv := s.dst[:len(xs)]
	for r := r0; r < r1; r += n {
		re := min(r+n, r1)
		w := s.w[:(re-r)*c]
		m.dequantRows(k, r, re, w)
		fm := MatFromF32(re-r, c, w)
		for t := range xs {
			dv[t] = dst[t][r:re]
		}
		fm.mmRange(k, 0, re-r, dv, xs, nil)
	}
	clear(dv)
	qScratchPool.Put(s)
}

// dequantRows writes rows [r0, r1) of a quantized m as float32 into w.
func (m Mat) dequantRows(k *kernelSet, r0, r1 int, w []float32) {
	c := m.Cols
	nl := c &^ (lanes - 1)
	for r := r0; r < r1; r++ {
		row, out := m.qrow(r), w[(r-r0)*c:(r-r0+1)*c]
		if nl == 0 || k.id == kPortable || !archDQ(k.id, m.DType, row, nl, out) {
			weights.DequantizeRow(m.DType, out, row)
			continue
		}
		for j := nl; j < c; j++ {
			if m.DType == weights.Q8_0 {
				out[j] = weights.Q8_0At(row, j)
			} else {
				out[j] = weights.Q4_KAt(row, j)
			}
		}
	}
}

// qBlockBytes is the bytes a kernel reads for the first nl (a multiple of
// 32) elements of a row: whole blocks (Q4_K: whole super-blocks' headers
// and the 32-byte chunks of the sub-blocks read).
func qBlockBytes(dt weights.DType, nl int) int {
	if dt == weights.Q8_0 {
		return nl / 32 * 34
	}
	s := nl / 32 // sub-blocks
	full, rest := s/8, s%8
	n := full * 144
	if rest > 0 {
		n += 16 + (rest+1)/2*32
	}
	return n
}

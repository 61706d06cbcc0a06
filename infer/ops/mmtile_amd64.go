//go:build !purego

package ops

import (
	"sync"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Column-blocked register tiles of the matrix-matrix product
// (mmtile_amd64.s). For each group of mmtGroupRows weight rows, the columns
// run in blocks; for each block, each input tile (4, 3 or 2 inputs on
// AVX-512, 3 or 2 on AVX2; mmtSplit) passes over every row tile of the
// group while its block of inputs (≤ mmtXBytes) stays in L1, and the
// group's block of weights stays in L2 for the next input tiles. A tile's
// 32-lane accumulators go to memory between blocks. Each output keeps the
// lane order of the matrix-vector product, so it has its bits. Quantized
// weights are dequantized in registers inside the tile. The bf16 tiles
// widen a row's 32-column group as its even and its odd columns (two ALU
// operations, not four) and so take their inputs in that order: a copy
// of each input in the even/odd layout (mmtEvenOdd), made once a MatMul
// (mmtPrepare) and read by every chunk of its rows. A bf16 product whose
// inputs fit L1 whole runs row-major instead on AVX-512 (mmtRowMajor:
// each row tile over all its input tiles, its weights read from L1 after
// the first), which overlaps the weights' read with the compute.

// The AVX-512 bf16 tiles prefetch through pf (mmtPFN), not mmtPF. The
// tiles with an out argument store their sums in place through it with
// mmtOut (mmtStoresOut).
//
//go:noescape
func mmtBF16AVX512x4(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, pf *byte, out *[4]uintptr)

//go:noescape
func mmtBF16AVX512x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, pf *byte)

//go:noescape
func mmtBF16AVX512x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, pf *byte)

//go:noescape
func mmtF16AVX512x4(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtF16AVX512x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF16AVX512x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF32AVX512x4(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtF32AVX512x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF32AVX512x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ8_0AVX512x4(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtQ8_0AVX512x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ8_0AVX512x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ4_KAVX512x4(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ4_KAVX512x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ4_KAVX512x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

// mmtEvenOdd writes src's n floats (a multiple of 32) to dst in the bf16
// tiles' input layout: per 32-float group, the 16 even elements, then the
// 16 odd ones (mmtile_amd64.s; AVX2).
//
//go:noescape
func mmtEvenOdd(dst, src *float32, n int)

//go:noescape
func mmtBF16AVX2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtBF16AVX2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtBF16AVX2x2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtBF16AVX2x2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtF32AVX2x2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtF32AVX2x2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int, out *[4]uintptr)

//go:noescape
func mmtF16AVX2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF16AVX2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF32AVX2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtF32AVX2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ8_0AVX2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ8_0AVX2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ4_KAVX2x2(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

//go:noescape
func mmtQ4_KAVX2x3(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)

// Kernel flags (mmtile_amd64.s).
const (
	mmtLoad  = blockLoad  // continue from the state
	mmtFinal = blockFinal // last block: the sums
	mmtPF    = 4          // prefetch the next row tile's block
	// bf16: prefetch through pf three rows' line per 32 columns, pf
	// moving on by three rows each row tile.
	mmtPFN = 8
	// mmtStoresOut's tiles: on the last block, store the sums through out
	// (each input's address moving on by the tile's rows a row tile), not
	// only into the state.
	mmtOut = 16
)

// Tuning (results do not depend on these).
const (
	// mmtXBytes bounds one input tile's floats of a column block (L1 is
	// 32-48 KiB on current x86 cores; a row tile's weights and state
	// share it).
	mmtXBytes = 32 << 10
	// mmtGroupRows is the weight rows an input tile's column block
	// passes over (a multiple of the tiles' 2 and 3 rows); their block of
	// weights stays in L2.
	mmtGroupRows = 24
	// mmtAccFloats is one tile's state: 24 zmm (AVX-512) or 12 ymm (AVX2,
	// which uses a quarter of it).
	mmtAccFloats = 24 * 16
)

type mmtScratch struct {
	acc []float32
	out [4]uintptr // mmtOut's addresses
}

var mmtPool = sync.Pool{New: func() any { return new(mmtScratch) }}

// mmtInputs is a MatMul's inputs in the bf16 tiles' even/odd layout:
// input t's first nl columns (nl: the matrix's columns less the tail) at
// xe[t·nl:].
type mmtInputs struct{ xe []float32 }

var mmtInputsPool = sync.Pool{New: func() any { return new(mmtInputs) }}

// mmtPrepare returns xs in the even/odd layout when m's product runs on
// the bf16 tiles (nil otherwise); mmtRelease gives it back after the
// product.
func (m Mat) mmtPrepare(k *kernelSet, xs [][]float32) *mmtInputs {
	nl := m.Cols &^ (lanes - 1)
	if m.DType != weights.BF16 || mmtKind(k.id, m.DType) == 0 || nl == 0 {
		return nil
	}
	in := mmtInputsPool.Get().(*mmtInputs)
	if need := len(xs) * nl; cap(in.xe) < need {
		in.xe = make([]float32, need)
	}
	for t, x := range xs {
		mmtEvenOdd(&in.xe[t*nl], &x[0], nl)
	}
	return in
}

func mmtRelease(in *mmtInputs) {
	if in != nil {
		mmtInputsPool.Put(in)
	}
}

// mmtKernels is what mmtSplit needs of variant id's tiles for dtype dt
// in a pass over inputs inputs: every variant has tiles of its tmax and
// of 2 inputs, AVX-512 also of 3.
func mmtKernels(id kernelID, dt weights.DType, inputs int) (tmax int, has3, has2 bool) {
	_, tmax, _ = mmtShape(id, dt, inputs)
	return tmax, id == kAVX512, true
}

// mmtShape is the tile of variant id for dtype dt in a pass over inputs
// inputs: R weight rows × up to Tmax inputs, its state accF floats. The
// AVX2 bf16 and f32 tiles are 2 rows × 3 inputs in two passes over a
// block (lanes 0-15, then 16-31 of the 32-lane contract: 12 ymm
// accumulators a pass, the 16 registers' limit), which loads 0.83
// operands an FMA where 1 × 3 loads 1.17; with 1 or 2 inputs (a product
// bound by reading its weights) they measured slower than the one-row
// tiles (B = 2, 2026-12-04: 2 × 2 1.42–1.50 ms against 1 × 2 1.34–1.36 in
// BenchmarkMatMulBatchCPU bf16, 4.55 against 2.94 f32), which the other
// AVX2 tiles always are.
func mmtShape(id kernelID, dt weights.DType, inputs int) (R, Tmax, accF int) {
	switch {
	case id == kAVX512:
		return 3, 4, mmtAccFloats
	case (dt == weights.BF16 || dt == weights.F32) && inputs > 2:
		return 2, 3, 24 * 8
	}
	return 1, 3, 12 * 8
}

// mmtStoresOut reports whether variant id's tile of R rows × T inputs for
// dtype dt stores its sums in place (mmtOut): the AVX-512 3 × 4 tiles but
// Q4_K's, and the AVX2 bf16 and f32 two-row ones (2 × 3 and 2 × 2).
func mmtStoresOut(id kernelID, dt weights.DType, R, T int) bool {
	switch id {
	case kAVX512:
		return T == 4 && dt != weights.Q4_K
	case kAVX2:
		return R == 2 && (dt == weights.BF16 || dt == weights.F32)
	}
	return false
}

// mmtKind picks the kernel: 0 = none.
func mmtKind(id kernelID, dt weights.DType) int {
	switch id {
	case kAVX512:
		switch dt {
		case weights.BF16, weights.F16, weights.F32, weights.Q8_0, weights.Q4_K:
			return 1
		}
	case kAVX2:
		switch dt {
		case weights.BF16, weights.F32:
			return 2
		case weights.F16, weights.Q8_0, weights.Q4_K:
			if hasF16C {
				return 2
			}
		}
	}
	return 0
}

// archMMTiles computes rows [r0, r1) of dst[t] = m·xs[t] for every t,
// tail columns included; false if this variant has no tiles for m's dtype
// (the caller then runs the portable path).
func (m Mat) archMMTiles(k *kernelSet, r0, r1 int, dst, xs [][]float32, in *mmtInputs) bool {
	isa := mmtKind(k.id, m.DType)
	c := m.Cols
	nl := c &^ (lanes - 1)
	passes := (len(xs) + mmtMaxT - 1) / mmtMaxT
	tb := (len(xs) + passes - 1) / passes
	R, _, _ := mmtShape(k.id, m.DType, tb) // the tile rows, as mmtColumnMajor picks them
	if isa == 0 || nl == 0 || r1-r0 < R {
		return false
	}
	rEnd := r1 - (r1-r0)%R // rows [rEnd, r1) run on the mv kernel
	s := mmtPool.Get().(*mmtScratch)
	eo := m.DType == weights.BF16
	if eo && in == nil {
		in = m.mmtPrepare(k, xs)
		defer mmtRelease(in)
	}
	if part := mmtRowMajorPart(k.id, m.DType, len(xs), nl); part > 0 {
		for p0 := 0; p0 < len(xs); p0 += part {
			m.mmtRowMajor(r0, rEnd, nl, dst, in, p0, part, s)
		}
	} else {
		m.mmtColumnMajor(k, isa, r0, rEnd, nl, dst, xs, in, s)
	}
	mmtPool.Put(s)
	if rEnd < r1 {
		for t := range xs {
			k.mv(m, rEnd, r1, nl, xs[t], dst[t])
		}
	}
	if nl < c {
		for t := range xs {
			m.tailRows(r0, r1, nl, xs[t], dst[t][r0:r1])
		}
	}
	return true
}

// mmtColumnMajor is archMMTiles' schedule for every product that
// mmtRowMajorPart does not take: per row group and column block, each
// input tile of a pass over the inputs (tb of them) passes over the
// group's row tiles while its block of inputs stays in L1 and the group's
// block of weights in L2.
func (m Mat) mmtColumnMajor(k *kernelSet, isa, r0, rEnd, nl int, dst, xs [][]float32, in *mmtInputs, s *mmtScratch) {
	passes := (len(xs) + mmtMaxT - 1) / mmtMaxT
	tb := (len(xs) + passes - 1) / passes
	R, Tmax, accF := mmtShape(k.id, m.DType, tb)
	var tiles [mmtMaxT]mmtTile
	tmax, has3, has2 := mmtKernels(k.id, m.DType, tb)
	ntiles := mmtSplit(tmax, has3, has2, tb, &tiles)
	cbk := max(256, mmtXBytes/(4*Tmax)&^255)
	if isa == 2 && R == 2 {
		// The two-pass tile reads its rows' block twice: half the block
		// keeps the inputs and both rows in L1.
		cbk = max(256, mmtXBytes/(8*Tmax)&^255)
	}
	// Two inputs run in column blocks too (whole rows, their inputs from
	// L2, measured 12 % slower on the AVX-512 3 × 2 tile and 45 % on the
	// AVX2 1 × 2 one: Zen 4, 2026-12-04).
	if need := mmtGroupRows / R * ntiles * accF; cap(s.acc) < need {
		s.acc = make([]float32, need)
	}
	eo := m.DType == weights.BF16
	nextPF := eo && isa == 1 // the AVX-512 bf16 tiles prefetch the next block (mmtNextShare)
	nrt := mmtGroupRows / R  // row tiles of a group
	for p0 := 0; p0 < len(xs); p0 += tb {
		p1 := min(p0+tb, len(xs))
		na := ntiles // this pass's tiles
		if p1-p0 < tb {
			na = mmtSplit(tmax, has3, has2, p1-p0, &tiles)
		}
		for rg := r0; rg < rEnd; rg += mmtGroupRows {
			re := min(rg+mmtGroupRows, rEnd)
			for cb := 0; cb < nl; cb += cbk {
				n := min(cbk, nl-cb)
				fl := blockFlags(cb, n, nl)
				var next mmtBlock
				if nextPF {
					next = mmtNextBlock(r0, rEnd, nl, cbk, p1 < len(xs), rg, re, cb, n)
				}
				for ti := range na {
					tl := tiles[ti]
					tn := tl.n
					acc := s.acc[ti*nrt*accF : (ti+1)*nrt*accF]
					f := fl
					var pf *byte
					switch {
					case nextPF:
						f, pf = m.mmtNextShare(f, ti, (re-rg)/R, next)
					case ti == 0:
						f |= mmtPF
					}
					var xp [4]*float32
					for j := range tl.T {
						switch {
						case j < tn && eo:
							xp[j] = &in.xe[(p0+tl.t0+j)*nl+cb]
						case j < tn:
							xp[j] = &xs[p0+tl.t0+j][cb]
						default:
							xp[j] = xp[0]
						}
					}
					// A tile of mmtStoresOut with all its inputs stores its last
					// block's sums in place (no mmtScatter): addresses, not
					// pointers, as the kernel moves them on (dst keeps the
					// arrays alive).
					var out *[4]uintptr
					if tn == tl.T && f&mmtFinal != 0 && mmtStoresOut(k.id, m.DType, R, tl.T) {
						out = &s.out
						for j := range tn {
							s.out[j] = uintptr(unsafe.Pointer(&dst[p0+tl.t0+j][rg]))
						}
						f |= mmtOut
					}
					m.mmtCall(k.id, rg, R, (re-rg)/R, cb, n, tl.T, &xp, acc, f, pf, out)
					if f&mmtFinal == 0 || out != nil {
						continue
					}
					rs, ts := tl.T, 1 // output (r, t) at acc[r·rs + t·ts]
					switch {
					case isa == 1 && tl.T == 4:
						rs, ts = 1, 4 // the 3×4 tiles' transposed sums (ZTREE12)
					case isa == 2 && R == 2:
						rs = 3 // the AVX2 2 × 2 tiles' sums sit as the 2 × 3 ones'
					}
					mmtScatter(dst[p0+tl.t0:p0+tl.t0+tn], acc, rg, (re-rg)/R, R, rs, ts, accF)
				}
			}
		}
	}
}

// mmtRowMajorPart is the inputs a pass of the row-major schedule
// (mmtRowMajor) takes in a bf16 product of T inputs with nl columns (less
// the tail) on variant id, 0 where the product runs column-major: the
// AVX-512 3 × 4 tiles, passes of 8-16 inputs (24 and 32 inputs run as two
// passes) whose columns, all of them, fit mmtXBytes (L1) at once: rows of
// ≤ 512 at 16 inputs a pass, ≤ 1,024 at 8 (the depformer's). Longer rows
// would carry the tiles' state from block to block, which measured slower
// than the column-major schedule (2026-12-05, Zen 5: the 1.3B temporal
// layers' products 0.85-0.9×), and so did float32 weights (Mimi's
// transformers: 0.86-0.88×; a pass reads twice the bytes for its FLOPs).
func mmtRowMajorPart(id kernelID, dt weights.DType, T, nl int) int {
	if id != kAVX512 || dt != weights.BF16 {
		return 0
	}
	part := T
	switch T {
	case 8, 12, 16:
	case 24, 32:
		part = T / 2
	default:
		return 0
	}
	if 4*part*nl > mmtXBytes {
		return 0
	}
	return part
}

// mmtRowMajor computes rows [r0, rEnd) (whole row tiles) of the product
// for inputs [p0, p0+T) (T of mmtRowMajorPart), in the even/odd layout in
// in, on mmtBF16AVX512x4R: per group of rows, one call runs each row tile
// over every input tile, the row tile's weights read from memory once and
// then from L1, and prefetches the next row tile's weights as it goes.
func (m Mat) mmtRowMajor(r0, rEnd, nl int, dst [][]float32, in *mmtInputs, p0, T int, s *mmtScratch) {
	const R = 3
	c, nti := m.Cols, T/4
	if need := nti * 16; cap(s.acc) < need {
		s.acc = make([]float32, need)
	}
	if p0+T > len(dst) || len(in.xe) < (p0+T)*nl {
		panic("ops: kernel bounds")
	}
	var ds [mmtMaxT / 4]mmtDesc
	for ti := range nti {
		for j := range 4 {
			ds[ti].xs[j] = &in.xe[(p0+4*ti+j)*nl]
		}
		ds[ti].sums = &s.acc[16*ti]
	}
	for rg := r0; rg < rEnd; rg += mmtGroupRows {
		re := min(rg+mmtGroupRows, rEnd)
		if re > m.Rows || (re-1)*c+nl > len(m.u16) || (re-rg)%R != 0 {
			panic("ops: kernel bounds")
		}
		for ti := range nti {
			for j := range 4 {
				// Addresses, not pointers: dst keeps the arrays alive
				// (MatMul checked their lengths).
				ds[ti].out[j] = uintptr(unsafe.Pointer(&dst[p0+4*ti+j][rg]))
			}
		}
		var pf *byte // the next group's first rows, for its last row tile
		if re+R <= rEnd {
			pf = (*byte)(unsafe.Pointer(&m.u16[re*c]))
		}
		mmtBF16AVX512x4R((*byte)(unsafe.Pointer(&m.u16[rg*c])), 2*c, &ds[0], nl, (re-rg)/R, nti, pf)
	}
}

// mmtDesc is one input tile of mmtBF16AVX512x4R, 72 bytes as the kernel
// reads them: its four inputs' first elements, a scratch of 16 floats, its
// four outputs' addresses at the row group's first row (the kernel moves
// them on by three rows a row tile).
type mmtDesc struct {
	xs   [4]*float32
	sums *float32
	out  [4]uintptr
}

// The kernel reads mmtDesc at 72-byte steps: this fails to compile
// where the struct is any other size.
var _ = [1]struct{}{}[unsafe.Sizeof(mmtDesc{})-72]

//go:noescape
func mmtBF16AVX512x4R(w *byte, stride int, d *mmtDesc, n int, rows, nti int, pf *byte)

// mmtBlock is a column block of a row group: rows [row, row+rows),
// columns from col on; rows == 0 for none.
type mmtBlock struct{ row, col, rows int }

// mmtNextBlock is the block archMMTiles runs after block (rows [rg, re),
// columns [cb, cb+n)): the group's next column block, else the next
// group's first, else (more passes to come) the first block again.
func mmtNextBlock(r0, rEnd, nl, cbk int, morePasses bool, rg, re, cb, n int) mmtBlock {
	switch {
	case cb+n < nl:
		return mmtBlock{rg, cb + n, re - rg}
	case re < rEnd:
		return mmtBlock{re, 0, min(mmtGroupRows, rEnd-re)}
	case morePasses:
		return mmtBlock{r0, 0, min(mmtGroupRows, rEnd-r0)}
	}
	return mmtBlock{}
}

// mmtNextShare adds to flags f the AVX-512 bf16 prefetch of input tile
// ti's share of block nb (each input tile over nrt row tiles): three
// rows per row tile from row 3·ti·nrt, so that the first input tiles'
// passes bring the whole block into L2 (one pass where the group's row
// tiles are as many as the block's rows over three: any full group) and
// the later passes prefetch nothing. Spreading the block over all the
// passes, one row per row tile, was this code's choice for B > 8 until
// 2026-12-05: on a Zen 5 core the early prefetch ran a stack of the 1.3B
// layers' products 18-20 % faster at B = 12 and 16 (docs/PERFORMANCE.md).
// The AVX2 tile (one row per row tile, up to six input tiles) measured
// better with mmtPF.
func (m Mat) mmtNextShare(f, ti, nrt int, nb mmtBlock) (int, *byte) {
	first := 3 * ti * nrt
	if first >= nb.rows {
		return f, nil
	}
	return f | mmtPFN, (*byte)(unsafe.Pointer(&m.u16[(nb.row+first)*m.Cols+nb.col]))
}

// mmtCall runs the T-input tile kernel of variant id on nrt row tiles of R
// rows (one of mmtShape's) from row r, columns [cb, cb+n), their states one after
// another in acc (accF floats each), after checking that every access
// stays in m and acc. With mmtOut (mmtStoresOut's tiles) the kernel also
// writes rows [r, r + nrt·R) of the T outputs whose addresses out holds
// (archMMTiles takes them from dst, whose lengths MatMul checked).
func (m Mat) mmtCall(id kernelID, r, R, nrt, cb, n, T int, xp *[4]*float32, acc []float32, fl int, pf *byte, out *[4]uintptr) {
	c := m.Cols
	R1, _, accF := mmtShape(id, m.DType, 1)
	if R2, _, accF2 := mmtShape(id, m.DType, mmtMaxT); R == R2 {
		accF = accF2
	} else if R != R1 {
		panic("ops: kernel bounds") // no such tile
	}
	if nrt <= 0 || len(acc) < nrt*accF || n <= 0 || n%lanes != 0 || cb%lanes != 0 || cb+n > c || r < 0 || r+nrt*R > m.Rows {
		panic("ops: kernel bounds")
	}
	rows := nrt * R // the rows read
	var w *byte
	var stride int
	switch m.DType {
	case weights.BF16, weights.F16:
		last := (r+rows-1)*c + cb + n
		if last > len(m.u16) {
			panic("ops: kernel bounds")
		}
		w, stride = (*byte)(unsafe.Pointer(&m.u16[r*c+cb])), 2*c
	case weights.F32:
		if (r+rows-1)*c+cb+n > len(m.f32) {
			panic("ops: kernel bounds")
		}
		w, stride = (*byte)(unsafe.Pointer(&m.f32[r*c+cb])), 4*c
	case weights.Q8_0, weights.Q4_K:
		rb := int(m.DType.RowBytes(c))
		off := qBlockBytes(m.DType, cb)
		if m.DType == weights.Q4_K && cb%256 != 0 {
			panic("ops: kernel bounds")
		}
		if (r+rows-1)*rb+qBlockBytes(m.DType, cb+n) > len(m.q) {
			panic("ops: kernel bounds")
		}
		w, stride = &m.q[r*rb+off], rb
	}
	if fl&mmtOut != 0 && (out == nil || !mmtStoresOut(id, m.DType, R, T)) {
		panic("ops: kernel bounds") // no tile stores in place here
	}
	switch {
	case id == kAVX512:
		// Direct calls: through a func value the arguments would escape.
		switch m.DType {
		case weights.BF16:
			switch T {
			case 4:
				mmtBF16AVX512x4(w, stride, xp, n, &acc[0], fl, nrt, pf, out)
			case 3:
				mmtBF16AVX512x3(w, stride, xp, n, &acc[0], fl, nrt, pf)
			default:
				mmtBF16AVX512x2(w, stride, xp, n, &acc[0], fl, nrt, pf)
			}
		case weights.F16:
			switch T {
			case 4:
				mmtF16AVX512x4(w, stride, xp, n, &acc[0], fl, nrt, out)
			case 3:
				mmtF16AVX512x3(w, stride, xp, n, &acc[0], fl, nrt)
			default:
				mmtF16AVX512x2(w, stride, xp, n, &acc[0], fl, nrt)
			}
		case weights.F32:
			switch T {
			case 4:
				mmtF32AVX512x4(w, stride, xp, n, &acc[0], fl, nrt, out)
			case 3:
				mmtF32AVX512x3(w, stride, xp, n, &acc[0], fl, nrt)
			default:
				mmtF32AVX512x2(w, stride, xp, n, &acc[0], fl, nrt)
			}
		case weights.Q8_0:
			switch T {
			case 4:
				mmtQ8_0AVX512x4(w, stride, xp, n, &acc[0], fl, nrt, out)
			case 3:
				mmtQ8_0AVX512x3(w, stride, xp, n, &acc[0], fl, nrt)
			default:
				mmtQ8_0AVX512x2(w, stride, xp, n, &acc[0], fl, nrt)
			}
		case weights.Q4_K:
			switch T {
			case 4:
				mmtQ4_KAVX512x4(w, stride, xp, n, &acc[0], fl, nrt)
			case 3:
				mmtQ4_KAVX512x3(w, stride, xp, n, &acc[0], fl, nrt)
			default:
				mmtQ4_KAVX512x2(w, stride, xp, n, &acc[0], fl, nrt)
			}
		}
	case R == 2 && T == 2: // the AVX2 two-row tiles (mmtShape)
		switch m.DType {
		case weights.BF16:
			mmtBF16AVX2x2x2(w, stride, xp, n, &acc[0], fl, nrt, out)
		case weights.F32:
			mmtF32AVX2x2x2(w, stride, xp, n, &acc[0], fl, nrt, out)
		}
	case R == 2:
		switch m.DType {
		case weights.BF16:
			mmtBF16AVX2x2x3(w, stride, xp, n, &acc[0], fl, nrt, out)
		case weights.F32:
			mmtF32AVX2x2x3(w, stride, xp, n, &acc[0], fl, nrt, out)
		}
	case T == 2:
		switch m.DType {
		case weights.BF16:
			mmtBF16AVX2x2(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.F16:
			mmtF16AVX2x2(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.F32:
			mmtF32AVX2x2(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.Q8_0:
			mmtQ8_0AVX2x2(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.Q4_K:
			mmtQ4_KAVX2x2(w, stride, xp, n, &acc[0], fl, nrt)
		}
	default:
		switch m.DType {
		case weights.BF16:
			mmtBF16AVX2x3(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.F16:
			mmtF16AVX2x3(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.F32:
			mmtF32AVX2x3(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.Q8_0:
			mmtQ8_0AVX2x3(w, stride, xp, n, &acc[0], fl, nrt)
		case weights.Q4_K:
			mmtQ4_KAVX2x3(w, stride, xp, n, &acc[0], fl, nrt)
		}
	}
}

// mmtScatter writes the sums of nt row tiles of R rows (rows rg…) from the
// tiles' states (output (r, t) of tile q at acc[q·accF + r·rs + t·ts])
// into the inputs' outputs dst[t][rg…], one output vector at a time.
func mmtScatter(dst [][]float32, acc []float32, rg, nt, R, rs, ts, accF int) {
	for t, out := range dst {
		d := out[rg : rg+nt*R]
		a := acc[t*ts:]
		if R == 3 {
			for q := range nt {
				o := q * accF
				d[3*q], d[3*q+1], d[3*q+2] = a[o], a[o+rs], a[o+2*rs]
			}
			continue
		}
		for q := range nt {
			for i := range R {
				d[q*R+i] = a[q*accF+i*rs]
			}
		}
	}
}

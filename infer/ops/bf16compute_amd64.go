//go:build !purego

package ops

import "golang.org/x/sys/cpu"

// Assembly kernels of the bf16 compute mode (bf16compute_amd64.s). Pointers
// are to the first element; the wrappers below check every bound first.

//go:noescape
func mvDPBF16(w *uint16, stride, rows int, x *uint16, nl int, dst *float32)

// dpbf16Peak512 runs BenchmarkFMAPeak's VDPBF16PS chains (n rounds of
// 24 independent zmm dot products of bf16 ones; returns 2n).
//
//go:noescape
func dpbf16Peak512(n int) float32

//go:noescape
func mmDPBF16(w *uint16, stride int, xs *[4]*uint16, nl int, out *[16]float32, pf *uint16, acc *float32, flags int)

//go:noescape
func mmDPBF16x3(w *uint16, stride int, xs *[4]*uint16, nl int, out *[16]float32, pf *uint16, acc *float32, flags int)

//go:noescape
func mmDPBF16x2(w *uint16, stride int, xs *[4]*uint16, nl int, out *[16]float32, pf *uint16, acc *float32, flags int)

//go:noescape
func cvtBF16AVX512(dst *uint16, src *float32, n int)

// dpbf16Lanes is one VDPBF16PS on 16 lanes, cvtBF16Hi one VCVTNEPS2BF16
// (tests).
//
//go:noescape
func dpbf16Lanes(acc *[16]float32, a, b *[32]uint16)

//go:noescape
func cvtBF16Hi(dst *[16]uint16, src *[16]float32)

// hasDPBF16 reports whether this CPU (and OS) runs the AVX512_BF16 kernels
// (x/sys/cpu sets HasAVX512BF16 only when the OS saves the zmm state).
var hasDPBF16 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16

// archBF16RoundVec rounds the first len(src)&^15 elements with
// VCVTNEPS2BF16 and returns how many it did.
func archBF16RoundVec(dst []uint16, src []float32) int {
	n := len(src) &^ 15
	if n == 0 {
		return 0
	}
	if len(dst) < n {
		panic("ops: kernel bounds")
	}
	cvtBF16AVX512(&dst[0], &src[0], n)
	return n
}

// archBF16MV runs the VDPBF16PS mv kernel on rows [r0, r1).
func archBF16MV(m Mat, r0, r1, nl int, xb []uint16, dst []float32) {
	c, rows := m.Cols, r1-r0
	if rows <= 0 {
		return
	}
	out := dst[r0:r1]
	w := m.u16[r0*c:]
	checkMV(len(w), c, rows, len(xb), nl, len(out))
	mvDPBF16(&w[0], c, rows, &xb[0], nl, &out[0])
}

// archBF16MM runs the VDPBF16PS register tile on one column block: rows
// [r, r+3) × the inputs xb[(t+j)·Cols:] for j < T (2, 3 or 4), columns
// [cb, cb+n). It starts from the tile's state in acc (blockLoad) or from
// zero, and ends with the sums in out[4j+i] (row i, input j; blockFinal)
// or its state back in acc. With pf it prefetches the next row tile's
// block (rows r+3 to r+5, the same columns) to L2.
func archBF16MM(m Mat, r, cb, n int, xb []uint16, t, T int, out *[16]float32, acc []float32, flags int, pf bool) {
	c := m.Cols
	if T < 2 || T > 4 {
		panic("ops: kernel bounds")
	}
	var p [4]*uint16
	for j := range T {
		x := xb[(t+j)*c+cb:]
		if len(x) < n {
			panic("ops: kernel bounds")
		}
		p[j] = &x[0]
	}
	w := m.u16[r*c+cb:]
	checkMV(len(w), c, 3, n, n, 3)
	if n%64 != 0 || cb+n > c || len(acc) < bf16AccFloats {
		panic("ops: kernel bounds")
	}
	var pp *uint16
	// A prefetch does not fault: the next tile may be past the matrix.
	if i := (r+3)*c + cb; pf && i < len(m.u16) {
		pp = &m.u16[i]
	}
	switch T {
	case 4:
		mmDPBF16(&w[0], c, &p, n, out, pp, &acc[0], flags)
	case 3:
		mmDPBF16x3(&w[0], c, &p, n, out, pp, &acc[0], flags)
	default:
		mmDPBF16x2(&w[0], c, &p, n, out, pp, &acc[0], flags)
	}
}

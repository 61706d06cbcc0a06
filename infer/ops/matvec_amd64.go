//go:build !purego

package ops

import (
	"golang.org/x/sys/cpu"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Assembly kernels (matvec_amd64.s). Pointers are to the first element;
// the Go wrappers below check every bound before calling them.

//go:noescape
func mvBF16AVX512(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF16AVX512(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF32AVX512(w *float32, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvBF16AVX2(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF16AVX2(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF32AVX2(w *float32, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func dotAVX512(a, b *float32, nl int) float32

//go:noescape
func dotAVX2(a, b *float32, nl int) float32

// fmaSS is the hardware float32 FMA (for testing fma32).
func fmaSS(a, b, c float32) float32

var hasF16C = cpu.X86.HasF16C

func addArchKernels() {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return
	}
	allKernels = append(allKernels, &kernelSet{name: "avx2", id: kAVX2, tileR: 1, tileT: 3})
	if cpu.X86.HasAVX512F {
		allKernels = append(allKernels, &kernelSet{name: "avx512", id: kAVX512, tileR: 3, tileT: 4})
	}
}

// archMV runs the assembly mv kernel of variant id; false if it has none
// for this dtype.
func archMV(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool {
	c, rows := m.Cols, r1-r0
	if rows <= 0 {
		return true
	}
	out := dst[r0:r1]
	switch m.DType {
	case weights.BF16, weights.F16:
		w := m.u16[r0*c:]
		checkMV(len(w), c, rows, len(x), nl, len(out))
		switch {
		case id == kAVX512 && m.DType == weights.BF16:
			mvBF16AVX512(&w[0], c, rows, &x[0], nl, &out[0])
		case id == kAVX512:
			mvF16AVX512(&w[0], c, rows, &x[0], nl, &out[0])
		case m.DType == weights.BF16:
			mvBF16AVX2(&w[0], c, rows, &x[0], nl, &out[0])
		case hasF16C:
			mvF16AVX2(&w[0], c, rows, &x[0], nl, &out[0])
		default:
			return false
		}
	case weights.F32:
		w := m.f32[r0*c:]
		checkMV(len(w), c, rows, len(x), nl, len(out))
		if id == kAVX512 {
			mvF32AVX512(&w[0], c, rows, &x[0], nl, &out[0])
		} else {
			mvF32AVX2(&w[0], c, rows, &x[0], nl, &out[0])
		}
	case weights.Q8_0, weights.Q4_K:
		return archMVQ(id, m, r0, r1, nl, x, dst)
	default:
		return false
	}
	return true
}

// archMM has no kernels here: MatMul runs the column-blocked tiles of
// mmtile_amd64.go on every dtype they cover, and the portable tile
// otherwise.
func archMM(id kernelID, m Mat, r, nl int, xs [][]float32, out *[16]float32, pf bool) bool {
	return false
}

func archDot(id kernelID, a, b []float32, nl int) (float32, bool) {
	if nl <= 0 || nl%lanes != 0 || len(a) < nl || len(b) < nl {
		panic("ops: kernel bounds")
	}
	if id == kAVX512 {
		return dotAVX512(&a[0], &b[0], nl), true
	}
	return dotAVX2(&a[0], &b[0], nl), true
}

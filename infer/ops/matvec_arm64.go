//go:build !purego

package ops

import (
	"golang.org/x/sys/cpu"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Assembly kernels (matvec_arm64.s). Pointers are to the first element;
// the Go wrappers below check every bound before calling them.

//go:noescape
func mvBF16NEON(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF16NEON(w *uint16, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mvF32NEON(w *float32, stride, rows int, x *float32, nl int, dst *float32)

//go:noescape
func mmBF16NEON(w *uint16, stride int, xs *[4]*float32, nl int, out *[16]float32, pf int)

//go:noescape
func mmF16NEON(w *uint16, stride int, xs *[4]*float32, nl int, out *[16]float32, pf int)

//go:noescape
func mmF32NEON(w *float32, stride int, xs *[4]*float32, nl int, out *[16]float32, pf int)

//go:noescape
func dotNEON(a, b *float32, nl int) float32

// fmaSS is the hardware float32 FMA (for testing fma32).
func fmaSS(a, b, c float32) float32

// addArchKernels registers "neon": ASIMD with the half-precision
// conversions is part of every ARMv8-A core, so this is the best variant on
// arm64 (register tile 1 row × 3 inputs: 24 accumulator registers of 32).
func addArchKernels() {
	if !cpu.ARM64.HasASIMD || !cpu.ARM64.HasFP {
		return
	}
	allKernels = append(allKernels, &kernelSet{name: "neon", id: kNEON, tileR: 1, tileT: 3})
}

// archMV runs the assembly mv kernel of variant id; false if it has none
// for this dtype.
func archMV(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool {
	if id != kNEON {
		return false
	}
	c, rows := m.Cols, r1-r0
	if rows <= 0 {
		return true
	}
	out := dst[r0:r1]
	switch m.DType {
	case weights.BF16, weights.F16:
		w := m.u16[r0*c:]
		checkMV(len(w), c, rows, len(x), nl, len(out))
		if m.DType == weights.BF16 {
			mvBF16NEON(&w[0], c, rows, &x[0], nl, &out[0])
		} else {
			mvF16NEON(&w[0], c, rows, &x[0], nl, &out[0])
		}
	case weights.F32:
		w := m.f32[r0*c:]
		checkMV(len(w), c, rows, len(x), nl, len(out))
		mvF32NEON(&w[0], c, rows, &x[0], nl, &out[0])
	case weights.Q8_0, weights.Q4_K:
		return archMVQ(id, m, r0, r1, nl, x, dst)
	default:
		return false
	}
	return true
}

// archMM runs the 1×3 register tile on row r and inputs xs[:3].
func archMM(id kernelID, m Mat, r, nl int, xs [][]float32, out *[16]float32, pf bool) bool {
	if id != kNEON {
		return false
	}
	const T = 3
	var p [4]*float32
	for t := range T {
		if len(xs[t]) < nl {
			panic("ops: kernel bounds")
		}
		p[t] = &xs[t][0]
	}
	c := m.Cols
	pfi := 0
	if pf {
		pfi = 1
	}
	switch m.DType {
	case weights.BF16, weights.F16:
		w := m.u16[r*c:]
		checkMV(len(w), c, 1, nl, nl, 1)
		if m.DType == weights.BF16 {
			mmBF16NEON(&w[0], c, &p, nl, out, pfi)
		} else {
			mmF16NEON(&w[0], c, &p, nl, out, pfi)
		}
	case weights.F32:
		w := m.f32[r*c:]
		checkMV(len(w), c, 1, nl, nl, 1)
		mmF32NEON(&w[0], c, &p, nl, out, pfi)
	default:
		return false
	}
	return true
}

func archDot(id kernelID, a, b []float32, nl int) (float32, bool) {
	if id != kNEON {
		return 0, false
	}
	if nl <= 0 || nl%lanes != 0 || len(a) < nl || len(b) < nl {
		panic("ops: kernel bounds")
	}
	return dotNEON(&a[0], &b[0], nl), true
}

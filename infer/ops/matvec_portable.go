package ops

import (
	"math"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// The numeric contract of the fast kernels (every implementation: the
// portable Go code below, AVX2+FMA and AVX-512F assembly) is one fixed
// computation, so that results never depend on the CPU, the kernel variant,
// the thread count, or on whether a row is computed by MatVec, by MatMul (the
// prefill) or by Dot:
//
//   - A dot product of length n runs over 32 float32 lanes. With
//     nl = n&^31, element j < nl goes to lane j%32:
//     acc[l] = fma(w[j], x[j], acc[l]), j ascending, every fma rounded once
//     (IEEE fusedMultiplyAdd in float32), all lanes starting at +0.
//   - The lanes are then summed as a fixed tree: s16[i] = acc[i]+acc[i+16],
//     s8[i] = s16[i]+s16[i+8], s4[i] = s8[i]+s8[i+4], s2[i] = s4[i]+s4[i+2],
//     s = s2[0]+s2[1].
//   - The tail nl ≤ j < n is added sequentially: s = fma(w[j], x[j], s).
//   - Weights are widened exactly first: bf16 by a 16-bit left shift, f16 by
//     the exact half→single conversion, f32 as is.
//
// AVX-512 holds the 32 lanes in two zmm registers, AVX2 in four ymm
// registers, the portable code in a [32]float32, and fma32 reproduces the
// hardware's single-rounding FMA in pure Go. The tails are always done in
// Go (tailRows), shared by all variants.
//
// Why 32 lanes: two independent FMA chains per row are enough to keep up
// with memory, so the matrix-vector kernels can stream one row at a time —
// one linear read stream, which this memory system serves ~8% faster than
// the 4 interleaved rows a 16-lane layout needs for the same latency hiding
// — while the prefill's register tiles (3×4 outputs × 2 zmm on AVX-512, 1×3
// × 4 ymm on AVX2) still fit the register files.

// lanes is the width of the accumulator every kernel variant emulates.
const lanes = 32

// kernelSet is one implementation of the inner kernels. Kernels only see
// the first nl columns (a positive multiple of 32); the Go driver adds the
// tail. The mv kernel computes rows [r0, r1) of one product; the mm kernel a
// register tile of tileR consecutive weight rows × tileT inputs into
// out[r*tileT+t]. Dispatch is a switch on id (no function values, so that
// nothing escapes to the heap).
type kernelSet struct {
	name         string
	id           kernelID
	tileR, tileT int
}

type kernelID int

const (
	kPortable kernelID = iota
	kAVX2
	kAVX512
	kNEON // arm64 ASIMD
)

// checkMV panics unless a kernel's reads and writes stay in bounds: rows
// rows of stride elements (nl read from each), x and dst.
func checkMV(lw, stride, rows, lx, nl, ld int) {
	if rows <= 0 || nl <= 0 || nl%lanes != 0 || nl > stride || lw < (rows-1)*stride+nl || lx < nl || ld < rows {
		panic("ops: kernel bounds")
	}
}

var portableKernels = &kernelSet{name: "portable", id: kPortable, tileR: 3, tileT: 4}

// allKernels lists the variants this CPU can run, best last (addArchKernels
// adds the assembly ones at init, before the default engine is made).
var allKernels = []*kernelSet{portableKernels}

// bestKernel is the variant an engine uses unless told otherwise.
func bestKernel() *kernelSet { return allKernels[len(allKernels)-1] }

// kernelByName finds a variant this CPU can run; nil if there is none.
func kernelByName(name string) *kernelSet {
	for _, k := range allKernels {
		if k.name == name {
			return k
		}
	}
	return nil
}

// KernelNames lists the variants this CPU can run.
func KernelNames() []string {
	var out []string
	for _, k := range allKernels {
		out = append(out, k.name)
	}
	return out
}

// mvKernel computes the first nl columns of rows [r0, r1) into dst[r0:r1].
func (k *kernelSet) mv(m Mat, r0, r1, nl int, x, dst []float32) {
	if k.id != kPortable && archMV(k.id, m, r0, r1, nl, x, dst) {
		return
	}
	c := m.Cols
	out := dst[r0:r1]
	switch m.DType {
	case weights.BF16:
		for r := range out {
			out[r] = dotBF16Portable(m.u16[(r0+r)*c:], x, nl)
		}
	case weights.F16:
		for r := range out {
			out[r] = dotF16Portable(m.u16[(r0+r)*c:], x, nl)
		}
	case weights.F32:
		for r := range out {
			out[r] = dotPortable(m.f32[(r0+r)*c:], x, nl)
		}
	case weights.Q8_0:
		for r := range out {
			out[r] = dotQ8_0Portable(m.qrow(r0+r), x, nl)
		}
	case weights.Q4_K:
		for r := range out {
			out[r] = dotQ4_KPortable(m.qrow(r0+r), x, nl)
		}
	}
}

// mm computes the tile of rows [r, r+tileR) × inputs xs[:tileT]; with pf
// it also prefetches the next tileR rows.
func (k *kernelSet) mm(m Mat, r, nl int, xs [][]float32, out *[16]float32, pf bool) {
	if k.id != kPortable && archMM(k.id, m, r, nl, xs, out, pf) {
		return
	}
	c := m.Cols
	for i := range k.tileR {
		for t := range k.tileT {
			switch m.DType {
			case weights.BF16:
				out[i*k.tileT+t] = dotBF16Portable(m.u16[(r+i)*c:], xs[t], nl)
			case weights.F16:
				out[i*k.tileT+t] = dotF16Portable(m.u16[(r+i)*c:], xs[t], nl)
			case weights.F32:
				out[i*k.tileT+t] = dotPortable(m.f32[(r+i)*c:], xs[t], nl)
			}
		}
	}
}

// dot is the 32-lane dot product of a[:nl] and b[:nl].
func (k *kernelSet) dot(a, b []float32, nl int) float32 {
	if k.id != kPortable {
		if s, ok := archDot(k.id, a, b, nl); ok {
			return s
		}
	}
	return dotPortable(a, b, nl)
}

// fma32 returns a·b+c rounded once to float32, as the FMA instructions do.
// The product of two float32 is exact in float64, so s = p+c has one
// float64 rounding; converting s to float32 is then correct unless s sits
// exactly on a float32 rounding midpoint (where the float64 rounding error
// decides the direction) or falls below the float32 normal range, which
// fma32Slow handles exactly.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	bits := math.Float64bits(s)
	if bits&(1<<29-1) != 1<<28 && (bits>>52)&0x7ff >= 1023-126 {
		return float32(s)
	}
	return fma32Slow(p, float64(c), s)
}

func fma32Slow(p, c, s float64) float32 {
	r := float32(s)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	// TwoSum: s + e == p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e == 0 || float64(r) == s {
		return r
	}
	// Neighbour of r on the side of s; s is a midpoint iff it is their mean
	// (exact in float64: adjacent float32 values).
	var o float32
	if s > float64(r) {
		o = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(r)+float64(o))*0.5 != s {
		// Off a midpoint, |e| ≤ half a float64 ulp cannot move s across one.
		return r
	}
	if e > 0 {
		return float32(math.Nextafter(s, math.Inf(1)))
	}
	return float32(math.Nextafter(s, math.Inf(-1)))
}

// reduce32 sums the lanes in the fixed tree order.
func reduce32(acc *[32]float32) float32 {
	var s16 [16]float32
	for i := range 16 {
		s16[i] = acc[i] + acc[i+16]
	}
	var s8 [8]float32
	for i := range 8 {
		s8[i] = s16[i] + s16[i+8]
	}
	s4 := [4]float32{s8[0] + s8[4], s8[1] + s8[5], s8[2] + s8[6], s8[3] + s8[7]}
	s2 := [2]float32{s4[0] + s4[2], s4[1] + s4[3]}
	return s2[0] + s2[1]
}

func bf16ToF32(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

func dotBF16Portable(w []uint16, x []float32, nl int) float32 {
	w, x = w[:nl], x[:nl]
	var acc [lanes]float32
	for j := 0; j+lanes <= len(w); j += lanes {
		ww, xx := w[j:j+lanes], x[j:j+lanes]
		for l := range acc {
			acc[l] = fma32(bf16ToF32(ww[l]), xx[l], acc[l])
		}
	}
	return reduce32(&acc)
}

func dotF16Portable(w []uint16, x []float32, nl int) float32 {
	w, x = w[:nl], x[:nl]
	var acc [lanes]float32
	for j := 0; j+lanes <= len(w); j += lanes {
		ww, xx := w[j:j+lanes], x[j:j+lanes]
		for l := range acc {
			acc[l] = fma32(weights.HalfToFloat(ww[l]), xx[l], acc[l])
		}
	}
	return reduce32(&acc)
}

func dotPortable(w, x []float32, nl int) float32 {
	w, x = w[:nl], x[:nl]
	var acc [lanes]float32
	for j := 0; j+lanes <= len(w); j += lanes {
		ww, xx := w[j:j+lanes], x[j:j+lanes]
		for l := range acc {
			acc[l] = fma32(ww[l], xx[l], acc[l])
		}
	}
	return reduce32(&acc)
}

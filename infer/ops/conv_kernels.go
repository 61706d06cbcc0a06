package ops

//go:generate go run conv_gen.go

import (
	"math"
	"unsafe"
)

// The convolution kernels: every (transposed) convolution with one group is
// run as a product of its input windows with a packed kernel,
//
//	dst[t][o] = (Σ_j w[o][j]·window_t[j]) + bias[o]
//
// where window t is taps runs of in consecutive input values (tap k of
// window t starts rowStep·t + tapStep·k values into the input). The
// contract, shared by every implementation (portable Go below, AVX-512 and
// AVX2 tiles in conv_amd64.s): each output is ONE sequential chain of FMAs
// over j = k·in + i ascending, acc = fma(w[o][j], window_t[j], acc) starting
// from +0, each rounded once, then one float32 addition of the bias (+0 when
// there is none). Vector lanes hold different outputs, never parts of one
// sum, so the results are the same whatever the vector width, the register
// tile, the kernel variant or the thread count; convRef in conv_test.go is
// the plain loop they are checked against, bit for bit.
//
// The weights are packed at load in panels of 32 outputs, [panel][j][32]
// (zero-padded past the last output), so that a register tile streams one
// panel linearly: per j it loads one panel row and broadcasts the j-th
// value of each of its window rows (12 rows × 32 outputs on AVX-512, 6 × 16
// on AVX2). Forward copies no window: the time-major input is read in
// place (ForwardBatch gathers the windows of streams with few steps each:
// conv_batch.go).

// panelCols is the number of outputs of a weight panel.
const panelCols = 32

// convPack is a convolution kernel packed for the tiles.
type convPack struct {
	out      int // outputs per window
	taps, in int // a window: taps runs of in values
	panels   int
	w        []float32 // [panels][taps·in][panelCols], zero-padded, 64-byte aligned
	bias     []float32 // [panels·panelCols], zero-padded
}

// alignedFloats returns n zeroed float32s starting on a 64-byte boundary.
func alignedFloats(n int) []float32 {
	buf := make([]float32, n+16)
	off := 0
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64; a != 0 {
		off = int(64-a) / 4
	}
	return buf[off : off+n : off+n]
}

// newConvPack packs the kernel's weights (o, j) for o < out, j < taps·in:
// row(o, dst) writes output o's into dst[j] (dst holds taps·in); bias may
// be nil. A large kernel is packed on e's threads (nil: the caller's).
func newConvPack(e *Engine, out, taps, in int, row func(o int, dst []float32), bias func(o int) float32) convPack {
	p := convPack{out: out, taps: taps, in: in, panels: (out + panelCols - 1) / panelCols}
	L := taps * in
	p.w = alignedFloats(p.panels * L * panelCols)
	p.bias = alignedFloats(p.panels * panelCols)
	pack := func(pi int, w []float32) {
		panel := p.w[pi*L*panelCols : (pi+1)*L*panelCols]
		for o := pi * panelCols; o < min(out, (pi+1)*panelCols); o++ {
			c := o % panelCols
			row(o, w)
			for j, v := range w {
				panel[j*panelCols+c] = v
			}
			if bias != nil {
				p.bias[o] = bias(o)
			}
		}
	}
	// The large kernels' panels are packed on the engine's threads (the
	// main command packs Mimi's ~30 M weights before its first frame): the
	// pool's workers read a mapped kernel as the caller would, a fault on a
	// page of a file that shrank raised on the caller.
	if L*out < packParallel || e == nil {
		w := make([]float32, L)
		for pi := range p.panels {
			pack(pi, w)
		}
		return p
	}
	e.Parallel(p.panels, func(pi int) { pack(pi, make([]float32, L)) })
	return p
}

// packParallel is the weights (out · taps · in) from which newConvPack
// packs on several goroutines.
const packParallel = 1 << 18

// tileRows is the most window rows of one register tile of a variant.
func tileRows(id kernelID) int {
	if id == kAVX2 {
		return 6
	}
	return 12
}

// convJob is one run of a convPack over T windows.
type convJob struct {
	p                        *convPack
	id                       kernelID
	dst, src                 []float32
	dstRow, rowStep, tapStep int
	T, tr, nb, perChunk      int
}

// units computes work units [u0, u1): unit u is row block u%nb (tr rows) of
// panel u/nb.
func (j *convJob) units(u0, u1 int) {
	for u := u0; u < u1; u++ {
		pi, b := u/j.nb, u%j.nb
		t0 := b * j.tr
		j.p.tile(j.id, pi, t0, min(j.tr, j.T-t0), j.dst, j.dstRow, j.src, j.rowStep, j.tapStep)
	}
}

// Tuning (results do not depend on these).
const (
	// Products of fewer multiply-adds (whole panels) run on the calling
	// goroutine: ~8 µs of one core, more than waking the pool costs.
	convParallelMin = 1 << 20
	// convChunksPerThread is how finely a product is split between threads.
	convChunksPerThread = 8
)

// run computes T windows into dst (row t at dst[t·dstRow:], out values) on
// engine e.
func (p *convPack) run(e *Engine, dst []float32, dstRow int, src []float32, T, rowStep, tapStep int, sc *ConvScratch) {
	if T <= 0 {
		return
	}
	L := p.taps * p.in
	j := p.job(e, dst, dstRow, src, T, rowStep, tapStep)
	units := p.panels * j.nb
	n := min(units, convChunksPerThread*e.Threads())
	if sc == nil || n < 2 || T*p.panels*panelCols*L < convParallelMin {
		j.units(0, units)
		return
	}
	j.perChunk = (units + n - 1) / n
	n = (units + j.perChunk - 1) / j.perChunk
	sc.job = j
	e.Parallel(n, sc.chunkFunc())
	sc.job = convJob{} // drop the references to the caller's buffers
}

// job checks the bounds of a run of T > 0 windows and describes it.
func (p *convPack) job(e *Engine, dst []float32, dstRow int, src []float32, T, rowStep, tapStep int) convJob {
	if last := (T-1)*rowStep + (p.taps-1)*tapStep + p.in; len(src) < last || len(dst) < (T-1)*dstRow+p.out || rowStep < 0 || tapStep < 0 {
		panic("ops: convolution bounds")
	}
	id := e.k.Load().id
	tr := tileRows(id)
	return convJob{p: p, id: id, dst: dst, src: src, dstRow: dstRow, rowStep: rowStep, tapStep: tapStep, T: T, tr: tr, nb: (T + tr - 1) / tr}
}

// tile computes rows [t0, t0+R) of panel pi (R ≤ tileRows).
func (p *convPack) tile(id kernelID, pi, t0, R int, dst []float32, dstRow int, src []float32, rowStep, tapStep int) {
	L := p.taps * p.in
	w := p.w[pi*L*panelCols : (pi+1)*L*panelCols]
	bias := p.bias[pi*panelCols : (pi+1)*panelCols]
	x := src[t0*rowStep:]
	c0 := pi * panelCols
	cols := min(panelCols, p.out-c0)
	if cols == panelCols {
		out := dst[t0*dstRow+c0:]
		if !archConvTile(id, R, x, rowStep, tapStep, p.taps, p.in, w, out, dstRow, bias) {
			convTilePortable(R, panelCols, x, rowStep, tapStep, p.taps, p.in, w, out, dstRow, bias)
		}
		return
	}
	// A partial panel goes through a full-width buffer.
	var buf [12 * panelCols]float32
	if !archConvTile(id, R, x, rowStep, tapStep, p.taps, p.in, w, buf[:], panelCols, bias) {
		convTilePortable(R, cols, x, rowStep, tapStep, p.taps, p.in, w, buf[:], panelCols, bias)
	}
	for r := 0; r < R; r++ {
		copy(dst[(t0+r)*dstRow+c0:(t0+r)*dstRow+c0+cols], buf[r*panelCols:])
	}
}

// convTilePortable is the tile in Go: columns [0, cols) of R rows.
func convTilePortable(R, cols int, x []float32, rowStep, tapStep, taps, in int, w, out []float32, outRow int, bias []float32) {
	for r := 0; r < R; r++ {
		xr := x[r*rowStep:]
		o := out[r*outRow : r*outRow+cols]
		for c := range o {
			var acc float32
			j := 0
			for k := 0; k < taps; k++ {
				xk := xr[k*tapStep : k*tapStep+in]
				for _, v := range xk {
					acc = fma32(w[j*panelCols+c], v, acc)
					j++
				}
			}
			o[c] = acc + bias[c]
		}
	}
}

// ELU constants of eluPortable and the assembly (conv_gen.go's eluConsts).
var (
	eluLog2e = math.Float32frombits(0x3fb8aa3b) // 1/ln 2
	eluLn2Hi = math.Float32frombits(0x3f318000) // 0.693359375: n·eluLn2Hi is exact
	eluLn2Lo = math.Float32frombits(0x395e8083) // ln 2 ≈ eluLn2Hi − eluLn2Lo
	eluC7    = math.Float32frombits(0x39500d01) // 1/5040
	eluC6    = math.Float32frombits(0x3ab60b61) // 1/720
	eluC5    = math.Float32frombits(0x3c088889) // 1/120
	eluC4    = math.Float32frombits(0x3d2aaaab) // 1/24
	eluC3    = math.Float32frombits(0x3e2aaaab) // 1/6
)

// eluLo bounds the argument of expm1: below it expm1 rounds to −1.
const eluLo = -20

// eluPortable is ELU(x) with the kernels' expm1: n = roundeven(x·log2e),
// r = x − n·ln2 (two FMAs), expm1(r) by its Taylor polynomial to degree 7
// (Horner with FMAs), then 2ⁿ·expm1(r) + (2ⁿ − 1) with one FMA. Within 2
// ulp of expm1 for x ≤ 0; every variant computes exactly these operations.
func eluPortable(x float32) float32 {
	if x > 0 {
		return x
	}
	xc := min(max(x, eluLo), 0)
	n := float32(math.RoundToEven(float64(float32(xc * eluLog2e))))
	r := fma32(n, -eluLn2Hi, xc)
	r = fma32(n, eluLn2Lo, r)
	q := fma32(eluC7, r, eluC6)
	q = fma32(q, r, eluC5)
	q = fma32(q, r, eluC4)
	q = fma32(q, r, eluC3)
	q = fma32(q, r, 0.5)
	p := fma32(q, float32(r*r), r)
	t := math.Float32frombits(uint32(int32(n)+127) << 23)
	return fma32(t, p, t-1)
}

// ELUTo writes ELU(src) (alpha 1) into dst, which may be src: the
// vectorised ELU of the convolutions, within 2 ulp of ELU (which computes
// expm1 in float64) and bit-identical on every kernel variant. It runs on
// the engine's kernel variant.
func (e *Engine) ELUTo(dst, src []float32) {
	src = src[:len(dst)]
	n := archELU(e.k.Load().id, dst, src)
	for i := n; i < len(dst); i++ {
		dst[i] = eluPortable(src[i])
	}
}

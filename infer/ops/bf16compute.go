package ops

import (
	"fmt"
	"math"
	"sync"
)

// The bf16 compute mode (opt-in, issue 7: `--compute-dtype bf16`).
//
// The default compute dtype, "f32", is the parity path: bf16 weights are
// widened exactly and multiplied with float32 activations (matvec_portable.go).
// In "bf16" mode, MatVec and MatMul of BF16-weight matrices instead round
// the activation vector to bf16 once per call and multiply bf16 × bf16 with
// float32 accumulation, as VDPBF16PS (AVX512_BF16) does — closer to what the
// reference computes on a GPU in bf16, and not bit-compatible with the f32
// mode (the rounding of the activations changes results by about 2^-9
// relative per term). F16 and F32 weights, Dot and everything else are
// unaffected. The mode is a setting of an Engine (EngineOptions.ComputeDType);
// the parity tests run in "f32".
//
// The numeric contract of the mode (the VDPBF16PS kernel in
// bf16compute_amd64.s and the portable Go fallback below compute exactly
// this, bit for bit):
//
//   - The activations are rounded to bf16 as VCVTNEPS2BF16 does
//     (roundBF16): round to nearest even, denormal inputs become signed
//     zero, NaN stays NaN (quieted).
//   - A dot product of length n runs over 32 float32 lanes. With
//     nl = n&^63, lane L (0 ≤ L < 32) takes, in each block of 64 columns
//     starting at b, the two elements j1 = b+2L+1 and then j0 = b+2L:
//     acc[L] = dp(dp(acc[L], w[j1], x[j1]), w[j0], x[j0]), blocks
//     ascending, all lanes starting at +0. dp(c, w, x) is one VDPBF16PS
//     step (dpFMA): w·x exactly (a bf16 product fits a float32 significand)
//     plus c, rounded once to nearest even as if the exponent range were
//     unbounded, then flushed to a zero of the same sign if below 2^-126
//     in magnitude; denormal inputs (bf16 w, x and the float32 c) count as
//     signed zero.
//   - The lanes are summed in the fixed tree of reduce32 (IEEE float32
//     additions).
//   - The tail nl ≤ j < n is added sequentially with IEEE FMAs:
//     s = fma32(w[j], x[j], s), x[j] the bf16-rounded activation.
//
// These semantics of VDPBF16PS — the odd element of each pair first, both
// products unrounded, each of the two additions rounded, DAZ on the inputs
// and flush-to-zero after rounding of each result (intermediate included) —
// are what the Intel SDM pseudocode says ("FP32 FMA with daz in, ftz out
// and RNE rounding"); they were confirmed on the AMD Zen 5 this was written
// on against an exact model over millions of random and edge cases
// (TestDPBF16MatchesHardware keeps checking them wherever the instruction
// exists). NaN results are NaN in both implementations, but their payloads
// may differ.
//
// Results do not depend on the thread count or on whether a row comes from
// MatVec or MatMul. The kernel is the assembly one when the CPU has
// AVX512_BF16 and the engine uses the avx512 kernel variant
// (EngineOptions.Kernel), the portable Go one otherwise — bit-identical, but the portable one is many
// times slower than the f32 mode's kernels: the mode is only worth using
// on CPUs with AVX512_BF16.

// bf16Block is the number of columns one step of the 32 lanes consumes.
const bf16Block = 2 * lanes

// bf16MMGroup bounds the inputs of a MatMul rounded at once (and so the
// size of the per-call buffer); larger MatMuls run as several groups.
const bf16MMGroup = 256

// parseComputeDType reports whether name is the bf16 compute dtype.
func parseComputeDType(name string) (bf16 bool, err error) {
	switch name {
	case "f32", "float32":
		return false, nil
	case "bf16", "bfloat16":
		return true, nil
	}
	return false, fmt.Errorf("ops: unknown compute dtype %q (want f32 or bf16)", name)
}

// ParseComputeDType checks a compute dtype name as EngineOptions takes it
// ("f32", "bf16"; "float32" and "bfloat16" too) and returns its short name.
func ParseComputeDType(name string) (string, error) {
	bf16, err := parseComputeDType(name)
	if err != nil {
		return "", err
	}
	if bf16 {
		return "bf16", nil
	}
	return "f32", nil
}

// bf16Asm reports whether the bf16 mode of an engine using kernel variant k
// runs the assembly kernels: the CPU has AVX512_BF16 and k is the avx512
// variant (so that EngineOptions.Kernel forces the portable path in tests,
// as for the f32 mode).
func bf16Asm(k *kernelSet) bool { return hasDPBF16 && k.id == kAVX512 }

// roundBF16 rounds f to bf16 as VCVTNEPS2BF16 does.
func roundBF16(f float32) uint16 {
	b := math.Float32bits(f)
	switch b & 0x7f800000 {
	case 0: // zero or denormal: signed zero
		return uint16(b>>16) & 0x8000
	case 0x7f800000:
		if b&0x7fffff != 0 {
			return uint16(b>>16) | 0x40 // NaN: truncated, quieted
		}
		return uint16(b >> 16)
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// bf16RoundVec rounds src into dst[:len(src)].
func bf16RoundVec(dst []uint16, src []float32, asm bool) {
	dst = dst[:len(src)]
	i := 0
	if asm {
		i = archBF16RoundVec(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = roundBF16(src[i])
	}
}

// dazBF16 widens a bf16 value, denormals as signed zero.
func dazBF16(v uint16) float32 {
	if v&0x7f80 == 0 {
		v &= 0x8000
	}
	return math.Float32frombits(uint32(v) << 16)
}

// dpFMA is one VDPBF16PS step: w·x + c rounded once to nearest even (w, x
// widened bf16 values, so w·x is exact in float64), flushed to signed zero
// below 2^-126 after rounding, a denormal c counting as signed zero.
func dpFMA(w, x, c float32) float32 {
	if cb := math.Float32bits(c); cb&0x7f800000 == 0 {
		c = math.Float32frombits(cb & 0x80000000)
	}
	r := fma32(w, x, c)
	if math.Float32bits(r)&0x7fffffff > 0x00800000 {
		// |r| > 2^-126 (or Inf, NaN): the normal range, where rounding
		// with an unbounded exponent gives the same as IEEE.
		return r
	}
	return dpFMATiny(w, x, c, r)
}

// dpFMATiny finishes dpFMA when the IEEE result r is at most 2^-126 in
// magnitude. Rounded with an unbounded exponent (24-bit significand, ulp
// 2^-150 just below 2^-126), an exact sum s gives ±2^-126 iff |s| ≥
// 2^-126 − 2^-151 (the midpoint ties to the even 2^-126), else something
// below 2^-126 that is flushed to a zero of the sign of s.
func dpFMATiny(w, x, c, r float32) float32 {
	p := float64(w) * float64(x) // exact
	s := p + float64(c)
	if s == 0 {
		// p = −c exactly (float64 cannot underflow here): IEEE's zero,
		// which fma32 returned.
		return r
	}
	// TwoSum: s + e == p + c exactly.
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	as, ae := s, e
	if s < 0 {
		as, ae = -s, -e
	}
	const t = 0x1p-126 - 0x1p-151
	if as > t || (as == t && ae >= 0) {
		return float32(math.Copysign(0x1p-126, s))
	}
	return float32(math.Copysign(0, s))
}

// dotDPBF16Portable is the 32-lane VDPBF16PS dot product of w[:nl] and
// xb[:nl] (nl a multiple of 64) in pure Go.
func dotDPBF16Portable(w, xb []uint16, nl int) float32 {
	w, xb = w[:nl], xb[:nl]
	var acc [lanes]float32
	for j := 0; j+bf16Block <= len(w); j += bf16Block {
		ww, xx := w[j:j+bf16Block], xb[j:j+bf16Block]
		for l := range acc {
			a := dpFMA(dazBF16(ww[2*l+1]), dazBF16(xx[2*l+1]), acc[l])
			acc[l] = dpFMA(dazBF16(ww[2*l]), dazBF16(xx[2*l]), a)
		}
	}
	return reduce32(&acc)
}

// bf16Call is the scratch of one bf16-mode product: the rounded
// activations and the job descriptions for the pool. Calls take one from
// bf16Calls and give it back, so that steady-state calls allocate nothing
// (a buffer only grows, up to bf16MMGroup × the widest matrix). The free
// list is shared by all engines: it holds no settings, only buffers.
type bf16Call struct {
	xb []uint16
	mv bf16MVTask
	mm bf16MMTask
}

var bf16Calls struct {
	mu   sync.Mutex
	free []*bf16Call
}

func getBF16Call(n int) *bf16Call {
	var c *bf16Call
	bf16Calls.mu.Lock()
	if k := len(bf16Calls.free); k > 0 {
		c = bf16Calls.free[k-1]
		bf16Calls.free[k-1] = nil
		bf16Calls.free = bf16Calls.free[:k-1]
	}
	bf16Calls.mu.Unlock()
	if c == nil {
		c = new(bf16Call)
	}
	if cap(c.xb) < n {
		c.xb = make([]uint16, n)
	}
	c.xb = c.xb[:n]
	return c
}

func putBF16Call(c *bf16Call) {
	bf16Calls.mu.Lock()
	bf16Calls.free = append(bf16Calls.free, c)
	bf16Calls.mu.Unlock()
}

// matVecBF16 is MatVec in bf16 mode on pool p (BF16 weights; shapes
// checked, x and dst cut to Cols and Rows); asm selects the assembly
// kernels (bf16Asm).
func (m Mat) matVecBF16(p *pool, asm bool, dst, x []float32) {
	c := getBF16Call(m.Cols)
	bf16RoundVec(c.xb, x, asm)
	if m.Bytes() < parallelMinBytes || !c.parallelMV(p, asm, m, dst) {
		m.bf16MVRange(asm, 0, m.Rows, dst, c.xb)
	}
	putBF16Call(c)
}

// matMulBF16 is MatMul in bf16 mode on pool p (BF16 weights, len(xs) ≥ 2,
// shapes checked, dst cut to len(xs)).
func (m Mat) matMulBF16(p *pool, asm bool, dst, xs [][]float32) {
	cols := m.Cols
	g := min(len(xs), bf16MMGroup)
	c := getBF16Call(g * cols)
	for t0 := 0; t0 < len(xs); t0 += g {
		t1 := min(t0+g, len(xs))
		xb := c.xb[:(t1-t0)*cols]
		for t := t0; t < t1; t++ {
			bf16RoundVec(xb[(t-t0)*cols:(t-t0+1)*cols], xs[t][:cols], asm)
		}
		d := dst[t0:t1]
		if m.Bytes()*int64(t1-t0) < parallelMinBytes || !c.parallelMM(p, asm, m, d, xb) {
			m.bf16MMRange(asm, 0, m.Rows, d, xb)
		}
	}
	putBF16Call(c)
}

// bf16MVRange computes rows [r0, r1) of a bf16-mode matrix-vector product
// with the rounded activations xb.
func (m Mat) bf16MVRange(asm bool, r0, r1 int, dst []float32, xb []uint16) {
	nl := m.Cols &^ (bf16Block - 1)
	if nl > 0 {
		m.bf16MV(asm, r0, r1, nl, xb, dst)
	} else {
		clear(dst[r0:r1])
	}
	if nl < m.Cols {
		m.bf16TailRows(r0, r1, nl, xb, dst[r0:r1])
	}
}

// bf16MV computes the first nl columns of rows [r0, r1) into dst[r0:r1].
func (m Mat) bf16MV(asm bool, r0, r1, nl int, xb []uint16, dst []float32) {
	if asm {
		archBF16MV(m, r0, r1, nl, xb, dst)
		return
	}
	c := m.Cols
	for r := r0; r < r1; r++ {
		dst[r] = dotDPBF16Portable(m.u16[r*c:], xb, nl)
	}
}

// bf16TailRows adds the columns [nl, Cols) of rows [r0, r1) to out
// sequentially.
func (m Mat) bf16TailRows(r0, r1, nl int, xb []uint16, out []float32) {
	c := m.Cols
	xt := xb[nl:c]
	for r := r0; r < r1; r++ {
		s := out[r-r0]
		for j, v := range m.u16[r*c+nl : (r+1)*c] {
			s = fma32(bf16ToF32(v), bf16ToF32(xt[j]), s)
		}
		out[r-r0] = s
	}
}

// bf16GroupRows is the weight rows (a multiple of the tile's 3) an input
// tile of the bf16 mode passes over before the next input tile (tuning:
// results do not depend on it).
const bf16GroupRows = 24

// bf16BlockCols bounds a column block of the bf16 mode's tiles: 4 inputs'
// block, 16 KiB of bf16, stays in L1 with the row tile's (tuning).
const bf16BlockCols = 2048

// bf16AccFloats is the bf16 tile's state between column blocks (24 zmm
// accumulators).
const bf16AccFloats = 24 * 16

// bf16State is a MatMul's tile states: one per row tile of a group and
// input tile (a single-block product never reads or writes them).
type bf16State struct{ acc []float32 }

var bf16StatePool = sync.Pool{New: func() any { return new(bf16State) }}

// bf16MMRange computes rows [r0, r1) of dst[t] = m·x_t for all t, x_t the
// rounded activations xb[t·Cols:(t+1)·Cols]. The assembly path works in
// register tiles of 3 rows × 4 inputs (and one or two tiles of 3 or 2 for
// the rest) over blocks of inputs that stay in L2 (as mmRange); each
// output equals the bf16-mode MatVec's.
func (m Mat) bf16MMRange(asm bool, r0, r1 int, dst [][]float32, xb []uint16) {
	c := m.Cols
	nl := c &^ (bf16Block - 1)
	T := len(dst)
	switch {
	case nl == 0:
		for t := range dst {
			clear(dst[t][r0:r1])
		}
	case asm:
		const R, TT = 3, 4
		tb := max(TT, mmBlockBytes/(2*c)/TT*TT)
		var out [16]float32
		rEnd := r0 + (r1-r0)/R*R // rows [rEnd, r1) run on the MV kernel
		// Column blocks of at most bf16BlockCols: an input tile's block
		// (4 inputs) stays in L1 while it passes over the group's row
		// tiles; each tile's accumulators are kept between blocks.
		cbk := nl
		if nl > bf16BlockCols*3/2 {
			cbk = bf16BlockCols
		}
		st := bf16StatePool.Get().(*bf16State)
		defer bf16StatePool.Put(st)
		for t0 := 0; t0 < T; t0 += tb {
			t1 := min(t0+tb, T)
			// Input tiles of 4; the last 4 and the rest as mmtSplit splits
			// them (a rest of 1 makes them 3 + 2); a single input runs on
			// the MV kernel.
			full, rest := (t1-t0)/TT, (t1-t0)%TT
			if rest > 0 && full > 0 {
				full, rest = full-1, rest+TT
			}
			var tail [mmtMaxT]mmtTile
			nrest := 0
			if rest > 1 {
				nrest = mmtSplit(TT, true, true, rest, &tail)
			}
			nt := full + nrest // input tiles
			tile := func(ti int) (t, tn int) {
				if ti < full {
					return t0 + ti*TT, TT
				}
				tl := tail[ti-full]
				return t0 + full*TT + tl.t0, tl.T
			}
			if need := bf16GroupRows / R * nt * bf16AccFloats; len(st.acc) < need {
				st.acc = make([]float32, need)
			}
			// Row groups of bf16GroupRows: each input tile passes over
			// the group's row tiles with its inputs in L1 (at B = 16 the
			// inputs of all the tiles, read again for each row tile, came
			// from L2 and bounded the tile), the group's weights staying
			// in L2 for the next input tile.
			for rg := r0; rg < rEnd; rg += bf16GroupRows {
				re := min(rg+bf16GroupRows, rEnd)
				for cb := 0; cb < nl; cb += cbk {
					n := min(cbk, nl-cb)
					fl := blockFlags(cb, n, nl)
					for ti := range nt {
						t, tn := tile(ti)
						for r := rg; r < re; r += R {
							k := ((r-rg)/R*nt + ti) * bf16AccFloats
							acc := st.acc[k : k+bf16AccFloats]
							archBF16MM(m, r, cb, n, xb, t, tn, &out, acc, fl, ti == 0)
							if fl&blockFinal == 0 {
								continue
							}
							for j := range tn {
								d := dst[t+j][r : r+R]
								d[0], d[1], d[2] = out[4*j], out[4*j+1], out[4*j+2] // output (i, j) at out[4j+i]
							}
						}
					}
				}
				if rest == 1 {
					m.bf16MV(asm, rg, re, nl, xb[(t1-1)*c:], dst[t1-1])
				}
			}
			if r := rEnd; r < r1 {
				for t := t0; t < t1; t++ {
					m.bf16MV(asm, r, r1, nl, xb[t*c:], dst[t])
				}
			}
		}
	default:
		for r := r0; r < r1; r++ {
			w := m.u16[r*c:]
			for t := range dst {
				dst[t][r] = dotDPBF16Portable(w, xb[t*c:], nl)
			}
		}
	}
	if nl < c {
		for t := range dst {
			m.bf16TailRows(r0, r1, nl, xb[t*c:], dst[t][r0:r1])
		}
	}
}

// The pool jobs of the bf16 mode live in the caller's bf16Call (the pool's
// own job slots are for the f32 kernels); they are split into row chunks
// exactly as the f32 mode's.

type bf16MVTask struct {
	asm  bool
	m    Mat
	dst  []float32
	xb   []uint16
	size int
}

func (t *bf16MVTask) runChunk(i int) {
	r0 := i * t.size
	r1 := min(r0+t.size, t.m.Rows)
	t.m.bf16MVRange(t.asm, r0, r1, t.dst, t.xb)
}

type bf16MMTask struct {
	asm  bool
	m    Mat
	dst  [][]float32
	xb   []uint16
	size int
}

func (t *bf16MMTask) runChunk(i int) {
	r0 := i * t.size
	r1 := min(r0+t.size, t.m.Rows)
	t.m.bf16MMRange(t.asm, r0, r1, t.dst, t.xb)
}

// parallelMV runs a bf16-mode MatVec on pool p; false if it did not.
func (c *bf16Call) parallelMV(p *pool, asm bool, m Mat, dst []float32) bool {
	minRows := (32 << 10) / max(1, m.Cols*m.DType.Size())
	size, n := chunkRows(m.Rows, int(p.nthreads.Load()), minRows)
	if !p.start(n) {
		return false
	}
	c.mv = bf16MVTask{asm: asm, m: m, dst: dst, xb: c.xb, size: size}
	p.run(&c.mv, n)
	c.mv = bf16MVTask{}
	return true
}

// parallelMM runs a bf16-mode MatMul on pool p; false if it did not.
func (c *bf16Call) parallelMM(p *pool, asm bool, m Mat, dst [][]float32, xb []uint16) bool {
	size, n := chunkRows(m.Rows, int(p.nthreads.Load()), 12)
	if !p.start(n) {
		return false
	}
	c.mm = bf16MMTask{asm: asm, m: m, dst: dst, xb: xb, size: size}
	p.run(&c.mm, n)
	c.mm = bf16MMTask{}
	return true
}

package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// The scalar references the vector forms must equal bit for bit: ops.GELU,
// and the two expressions below, written out as the callers write them.

func expRef(v float32) float32 { return float32(math.Exp(float64(v))) }

func siluMulRef(g, m float32) float32 { return SiLU(g) * m }

// mathEngines is one single-threaded engine per kernel variant.
func mathEngines() []*Engine {
	var es []*Engine
	for _, k := range allKernels {
		es = append(es, newEngine(1, k, false))
	}
	return es
}

// mathMults are the multipliers SiLUMul is checked with, cycled over.
var mathMults = []float32{1, -1.5, 0.3, 0, float32(math.Copysign(0, -1)), 1e-39, -3e38, float32(math.Inf(1)), 7.25}

// mathCheck compares e's ExpTo, GELU and SiLUMul on xs with the scalar
// references, bit for bit, reporting up to a few mismatches per function.
// exp, gelu, silu are scratch buffers of len(xs).
func mathCheck(t *testing.T, e *Engine, what string, xs, ms, exp, gelu, silu []float32) {
	t.Helper()
	e.ExpTo(exp, xs)
	copy(gelu, xs)
	e.GELU(gelu)
	e.SiLUMul(silu, xs, ms)
	bad := map[string]int{}
	report := func(fn string, i int, got, want float32) {
		if bad[fn]++; bad[fn] <= 5 {
			t.Errorf("%s %s: %s(%g = %#08x, m %g) = %g (%#08x), want %g (%#08x)", e.KernelName(), what, fn,
				xs[i], math.Float32bits(xs[i]), ms[i], got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	ref := []float32{0}
	for i, v := range xs {
		if w := expRef(v); math.Float32bits(exp[i]) != math.Float32bits(w) {
			report("exp", i, exp[i], w)
		}
		ref[0] = v
		GELU(ref)
		if math.Float32bits(gelu[i]) != math.Float32bits(ref[0]) {
			report("gelu", i, gelu[i], ref[0])
		}
		if w := siluMulRef(v, ms[i]); math.Float32bits(silu[i]) != math.Float32bits(w) {
			report("silumul", i, silu[i], w)
		}
	}
	for fn, n := range bad {
		t.Errorf("%s %s: %s: %d of %d values differ", e.KernelName(), what, fn, n, len(xs))
	}
}

// mathCheckAll runs mathCheck on xs in pieces of 4096 on every variant.
func mathCheckAll(t *testing.T, what string, xs []float32) {
	t.Helper()
	const piece = 4096
	ms := make([]float32, piece)
	for i := range ms {
		ms[i] = mathMults[i%len(mathMults)]
	}
	exp, gelu, silu := make([]float32, piece), make([]float32, piece), make([]float32, piece)
	for _, e := range mathEngines() {
		for lo := 0; lo < len(xs); lo += piece {
			hi := min(lo+piece, len(xs))
			n := hi - lo
			mathCheck(t, e, what, xs[lo:hi], ms[:n], exp[:n], gelu[:n], silu[:n])
			if t.Failed() {
				return
			}
		}
	}
}

// TestMathVecSweep: every float32 whose bits are a multiple of 997 (4.3
// million values over the whole range, NaNs and infinities included), every
// 257th float32 of magnitude ≤ 10 (8.5 million) and [-10, 10] in steps of
// 1/4096.
func TestMathVecSweep(t *testing.T) {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 997 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	ten := math.Float32bits(10)
	for b := uint32(0); b <= ten; b += 257 {
		xs = append(xs, math.Float32frombits(b), math.Float32frombits(b|1<<31))
	}
	for i := -10 * 4096; i <= 10*4096; i++ {
		xs = append(xs, float32(i)/4096)
	}
	if testing.Short() {
		xs = xs[:len(xs)/8]
	}
	mathCheckAll(t, "sweep", xs)
}

// mathEdges are the values at the branches of math.erf (|v|/√2 at 2⁻²⁸,
// 0.84375, 1.25, 1/0.35, 6), of the exp (its clamp, float32 overflow and
// underflow, archExp's overflow and denormal paths) and the special values,
// each with its 8 float32 neighbours on either side.
func mathEdges() []float32 {
	centres := []float64{0, 1.0 / (1 << 28) * math.Sqrt2, 0.84375 * math.Sqrt2, 1.25 * math.Sqrt2, math.Sqrt2 / 0.35, 6 * math.Sqrt2,
		88.7, 88.72283935546875, 89.5, 103, 103.97207708, 104, 110, 87.33654, 708.39, 709.78, 745.13, 1e9, 1.5e9,
		math.SmallestNonzeroFloat32, 0x1p-126, 1e-30, math.MaxFloat32, 1, 2}
	var xs []float32
	for _, c := range centres {
		for _, s := range []float64{1, -1} {
			v := float32(s * c)
			xs = append(xs, v)
			up, down := v, v
			for range 8 {
				up = math.Nextafter32(up, float32(math.Inf(1)))
				down = math.Nextafter32(down, float32(math.Inf(-1)))
				xs = append(xs, up, down)
			}
		}
	}
	for _, b := range []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0x7fc12345, 0x807fffff, 0x007fffff, 0x80000000} {
		xs = append(xs, math.Float32frombits(b))
	}
	return xs
}

func TestMathVecEdges(t *testing.T) {
	xs := mathEdges()
	mathCheckAll(t, "edges", xs)
	// The same values again, in shuffled blocks (other lanes, other
	// neighbours, NaNs among ordinary values).
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		mathCheckAll(t, "edges shuffled", xs)
	}
}

// mathData fills v with activations of mixed magnitudes, some exact zeros,
// infinities and NaNs.
func mathData(r *rand.Rand, v []float32) {
	for i := range v {
		switch r.IntN(40) {
		case 0:
			v[i] = 0
		case 1:
			v[i] = float32(math.NaN())
		case 2:
			v[i] = float32(math.Inf(1 - 2*r.IntN(2)))
		case 3:
			v[i] = float32(r.NormFloat64() * 100)
		default:
			v[i] = float32(r.NormFloat64() * 1.5)
		}
	}
}

// TestMathVecLengths: lengths 0-70 (every tail), at offsets 0-3 (every
// alignment), with NaNs in some blocks (the scalar fallback) and in place
// (ExpTo(x, x), SiLUMul(g, g, m)).
func TestMathVecLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf, ms := make([]float32, 80), make([]float32, 80)
	exp, gelu, silu := make([]float32, 80), make([]float32, 80), make([]float32, 80)
	for _, e := range mathEngines() {
		for n := 0; n <= 70; n++ {
			for off := range 4 {
				mathData(r, buf)
				mathData(r, ms)
				xs, m := buf[off:off+n], ms[off:off+n]
				mathCheck(t, e, fmt.Sprintf("n=%d off=%d", n, off), xs, m, exp[:n], gelu[:n], silu[:n])

				want := make([]float32, n)
				for i, v := range xs {
					want[i] = expRef(v)
				}
				in := append([]float32(nil), xs...)
				e.ExpTo(in, in)
				mathSame(t, e, "ExpTo in place", n, in, want)
				for i, v := range xs {
					want[i] = siluMulRef(v, m[i])
				}
				in = append(in[:0], xs...)
				e.SiLUMul(in, in, m)
				mathSame(t, e, "SiLUMul in place", n, in, want)
				if t.Failed() {
					return
				}
			}
		}
	}
}

func mathSame(t *testing.T, e *Engine, what string, n int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s %s n=%d: [%d] = %#08x, want %#08x", e.KernelName(), what, n, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			return
		}
	}
}

// TestMathVecNaNBlocks: SiLUMul with NaNs (of several payloads, in g, in m,
// in both) at every position of a 40-element row, GELU with them in x.
func TestMathVecNaNBlocks(t *testing.T) {
	nans := []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xffbfffff, 0x7fc0beef}
	r := rand.New(rand.NewPCG(5, 6))
	const n = 40
	xs, ms := make([]float32, n), make([]float32, n)
	exp, gelu, silu := make([]float32, n), make([]float32, n), make([]float32, n)
	for _, e := range mathEngines() {
		for pos := range n {
			for k, nb := range nans {
				for i := range xs {
					xs[i] = float32(r.NormFloat64() * 2)
					ms[i] = float32(r.NormFloat64())
				}
				nan := math.Float32frombits(nb)
				switch k % 3 {
				case 0:
					xs[pos] = nan
				case 1:
					ms[pos] = nan
				default:
					xs[pos], ms[pos] = nan, math.Float32frombits(nans[(k+1)%len(nans)])
				}
				mathCheck(t, e, fmt.Sprintf("NaN %#08x at %d", nb, pos), xs, ms, exp, gelu, silu)
			}
		}
	}
}

func TestMathVecNoAllocsAndPanics(t *testing.T) {
	x, m, d := make([]float32, 100), make([]float32, 100), make([]float32, 100)
	for i := range x {
		x[i] = float32(i-50) / 7
		m[i] = 1
	}
	for _, e := range mathEngines() {
		if a := testalloc.PerRun(t, 20, func() {
			e.ExpTo(d, x)
			e.SiLUMul(d, x, m)
			copy(d, x)
			e.GELU(d)
		}); a != 0 {
			t.Errorf("%s: %v allocations per run", e.KernelName(), a)
		}
		for what, f := range map[string]func(){
			"ExpTo":       func() { e.ExpTo(d[:3], x[:4]) },
			"SiLUMul g":   func() { e.SiLUMul(d[:4], x[:3], m[:4]) },
			"SiLUMul m":   func() { e.SiLUMul(d[:4], x[:4], m[:5]) },
			"SiLUMul dst": func() { e.SiLUMul(d[:5], x[:4], m[:4]) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s with mismatched lengths did not panic", e.KernelName(), what)
					}
				}()
				f()
			}()
		}
	}
}

// TestMathVecExhaustive checks all 2³² float32 inputs of ExpTo, GELU and
// SiLUMul (multiplier 1: SiLU itself) on every vector variant against the
// scalar references. It takes minutes; set PP_OFFLINE_EXHAUSTIVE=1.
func TestMathVecExhaustive(t *testing.T) {
	if os.Getenv("PP_OFFLINE_EXHAUSTIVE") != "1" {
		t.Skip("set PP_OFFLINE_EXHAUSTIVE=1 to check all 2^32 inputs")
	}
	var es []*Engine
	for _, e := range mathEngines() {
		if e.KernelName() != "portable" {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		t.Skip("no vector variant on this CPU")
	}
	start := time.Now()
	const piece = 1 << 16
	workers := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	bad := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs, ones := make([]float32, piece), make([]float32, piece)
			we, wg2, ws := make([]float32, piece), make([]float32, piece), make([]float32, piece)
			ge, gg, gs := make([]float32, piece), make([]float32, piece), make([]float32, piece)
			for i := range ones {
				ones[i] = 1
			}
			for p := w; p < 1<<32/piece; p += workers {
				for i := range xs {
					xs[i] = math.Float32frombits(uint32(p*piece + i))
				}
				expGo(we, xs)
				copy(wg2, xs)
				GELU(wg2)
				siluMulGo(ws, xs, ones)
				for _, e := range es {
					e.ExpTo(ge, xs)
					copy(gg, xs)
					e.GELU(gg)
					e.SiLUMul(gs, xs, ones)
					for i, v := range xs {
						for _, c := range [...]struct {
							fn        string
							got, want float32
						}{{"exp", ge[i], we[i]}, {"gelu", gg[i], wg2[i]}, {"silu", gs[i], ws[i]}} {
							if math.Float32bits(c.got) != math.Float32bits(c.want) {
								mu.Lock()
								if bad++; bad <= 20 {
									t.Errorf("%s: %s(%#08x) = %#08x, want %#08x", e.KernelName(), c.fn, math.Float32bits(v), math.Float32bits(c.got), math.Float32bits(c.want))
								}
								mu.Unlock()
							}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d mismatches over all 2^32 inputs", bad)
	}
	t.Logf("all 2^32 float32 inputs × {exp, gelu, silu} × %d vector variants checked in %v", len(es), time.Since(start).Round(time.Second))
}

// mathBenchData is 4096 activations, normal with σ = 1.5.
func mathBenchData() []float32 {
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 1.5)
	}
	return x
}

// mathBench runs f (over 4096 elements) per variant and the scalar loop,
// reporting ns/element.
func mathBench(b *testing.B, scalar func(), vec func(e *Engine)) {
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/elem")
		})
	}
	run("scalar", scalar)
	for _, e := range mathEngines() {
		if e.KernelName() != "portable" {
			run(e.KernelName(), func() { vec(e) })
		}
	}
}

// BenchmarkGELU copies the input back before each (in-place) GELU, the
// scalar loop included.
func BenchmarkGELU(b *testing.B) {
	x := mathBenchData()
	d := make([]float32, len(x))
	mathBench(b, func() { copy(d, x); GELU(d) }, func(e *Engine) { copy(d, x); e.GELU(d) })
}

func BenchmarkExpTo(b *testing.B) {
	x := mathBenchData()
	d := make([]float32, len(x))
	mathBench(b, func() { expGo(d, x) }, func(e *Engine) { e.ExpTo(d, x) })
}

func BenchmarkSiLUMul(b *testing.B) {
	x := mathBenchData()
	m := mathBenchData()
	d := make([]float32, len(x))
	mathBench(b, func() { siluMulGo(d, x, m) }, func(e *Engine) { e.SiLUMul(d, x, m) })
}

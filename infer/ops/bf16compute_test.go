package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// withComputeDType runs f in compute dtype name.
func withComputeDType(t testing.TB, name string, f func()) {
	t.Helper()
	prev := defaultEngine.ComputeDType()
	if err := setComputeDType(name); err != nil {
		t.Fatal(err)
	}
	defer setComputeDType(prev)
	f()
}

func TestSetComputeDType(t *testing.T) {
	if got := defaultEngine.ComputeDType(); got != "f32" {
		t.Fatalf("default compute dtype %q, want f32", got)
	}
	withComputeDType(t, "bf16", func() {
		if got := defaultEngine.ComputeDType(); got != "bf16" {
			t.Fatalf("compute dtype %q after setComputeDType(bf16)", got)
		}
		if err := setComputeDType("fp8"); err == nil {
			t.Fatal("setComputeDType(fp8) accepted")
		}
		if got := defaultEngine.ComputeDType(); got != "bf16" {
			t.Fatalf("a rejected name changed the compute dtype to %q", got)
		}
	})
	if got := defaultEngine.ComputeDType(); got != "f32" {
		t.Fatalf("compute dtype %q after restoring f32", got)
	}
}

// The rounding of the activations: VCVTNEPS2BF16's, values recorded on
// AVX512_BF16 hardware (and checked against it in the amd64 tests).
func TestRoundBF16Cases(t *testing.T) {
	for _, c := range [][2]uint32{
		{0x00000000, 0x0000}, {0x80000000, 0x8000},
		{0x00400000, 0x0000}, {0x807fffff, 0x8000}, {0x007fffff, 0x0000}, // denormals → signed zero
		{0x00800000, 0x0080}, {0x00ffffff, 0x0100},
		{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, // ties to even
		{0x3f807fff, 0x3f80}, {0x3f808001, 0x3f81}, {0xbf818000, 0xbf82},
		{0x7f7fffff, 0x7f80}, {0xff7f8000, 0xff80}, {0x7f7f7fff, 0x7f7f}, // overflow to Inf
		{0x7f800000, 0x7f80}, {0xff800000, 0xff80},
		{0x7f800001, 0x7fc0}, {0xffc12345, 0xffc1}, {0x7fbfffff, 0x7fff}, // NaN: truncated, quieted
	} {
		if got := roundBF16(math.Float32frombits(c[0])); got != uint16(c[1]) {
			t.Errorf("roundBF16(%08x) = %04x, want %04x", c[0], got, c[1])
		}
	}
	// Normal values round to the nearest bf16, ties to even.
	rng := rand.New(rand.NewPCG(21, 22))
	for range 100000 {
		f := math.Float32frombits(rng.Uint32()&0x807fffff | uint32(1+rng.IntN(253))<<23)
		r := roundBF16(f)
		lo := math.Float32frombits(math.Float32bits(f) &^ 0xffff)
		hi := math.Float32frombits(math.Float32bits(lo) + 0x10000)
		dlo, dhi := math.Abs(float64(f)-float64(lo)), math.Abs(float64(hi)-float64(f))
		want := lo
		if dhi < dlo || (dhi == dlo && math.Float32bits(lo)>>16&1 == 1) {
			want = hi
		}
		if r != uint16(math.Float32bits(want)>>16) {
			t.Fatalf("roundBF16(%08x) = %04x, want %08x", math.Float32bits(f), r, math.Float32bits(want))
		}
	}
}

// dpbf16Cases are single VDPBF16PS lanes recorded on AVX512_BF16 hardware
// (AMD Zen 5): {acc, w0, w1, x0, x1, result}, result = dp(dp(acc, w1, x1),
// w0, x0). They pin down the semantics the portable kernel reproduces:
// denormal inputs as zero, flush to zero after rounding (of the
// intermediate sum too), signed zeros, overflow, ordinary rounding.
var dpbf16Cases = [][6]uint32{
	{0x00000000, 0x002d, 0x822d, 0x830d, 0x0129, 0x80000000}, // underflowing products keep their sign
	{0x00800000, 0x0040, 0x0000, 0xbf00, 0x3f80, 0x00800000}, // denormal weight counts as zero
	{0x00800000, 0x0080, 0x0080, 0x3f80, 0xbf00, 0x00800000}, // intermediate 2^-127 is flushed
	{0x00400000, 0x0000, 0x0080, 0x3f80, 0x3f80, 0x00800000}, // denormal accumulator counts as zero
	{0x00800000, 0x0000, 0x0080, 0x0000, 0xb300, 0x00800000}, // 2^-126 − 2^-151: rounds up to 2^-126, kept
	{0x00800000, 0x0000, 0x0080, 0x0000, 0xb340, 0x00000000}, // 2^-126 − 3·2^-152: below 2^-126 after rounding
	{0x80800000, 0x0000, 0x0080, 0x0000, 0x3340, 0x00000000}, // (sign lost to the +0 even product)
	{0x00800000, 0x0000, 0x0080, 0x0000, 0xb380, 0x00000000},
	{0x00c00000, 0x0080, 0x0000, 0xbf80, 0x3f80, 0x00000000},
	{0x00c00000, 0x0080, 0x0000, 0xbf00, 0x3f80, 0x00800000},
	{0x00000000, 0x0080, 0x0000, 0xbf00, 0x0000, 0x80000000}, // flushed to −0
	{0x80000000, 0x8000, 0x0000, 0x3f80, 0x0000, 0x00000000},
	{0x80000000, 0x8000, 0x8000, 0x3f80, 0x3f80, 0x80000000},
	{0x7f7fffff, 0x7f7f, 0x7f7f, 0x7f7f, 0x3f80, 0x7f800000}, // overflow
	{0x36cecbd0, 0xc3b8, 0xb661, 0x3290, 0x36e3, 0xb1d18800}, // odd pair first (the other order gives b1d18783)
	{0x33224ef5, 0x3f61, 0xbf9a, 0x3f0f, 0x3e67, 0x3e60d002}, // two roundings (one rounding gives 3e60d003)
}

// dpbf16Step is one lane of VDPBF16PS in the portable kernel's terms.
func dpbf16Step(acc float32, w0, w1, x0, x1 uint16) float32 {
	a := dpFMA(dazBF16(w1), dazBF16(x1), acc)
	return dpFMA(dazBF16(w0), dazBF16(x0), a)
}

func TestDPFMACases(t *testing.T) {
	for _, c := range dpbf16Cases {
		got := dpbf16Step(math.Float32frombits(c[0]), uint16(c[1]), uint16(c[2]), uint16(c[3]), uint16(c[4]))
		if math.Float32bits(got) != c[5] {
			t.Errorf("dp(%08x, w %04x %04x, x %04x %04x) = %08x, hardware %08x", c[0], c[1], c[2], c[3], c[4], math.Float32bits(got), c[5])
		}
	}
}

// randBF16Inputs makes a bf16 matrix and float32 inputs. kind 0: values of
// varied magnitude (as randMat); kind 1: magnitudes near 2^-63, so that
// products and sums fall around the 2^-126 flush threshold, denormals
// included.
func randBF16Inputs(rng *rand.Rand, kind, rows, cols, nx int) (Mat, [][]float32) {
	val := func() float32 {
		if kind == 1 {
			switch rng.IntN(20) {
			case 0:
				return 0
			case 1: // denormal
				return math.Float32frombits(rng.Uint32() & 0x807fffff)
			}
			return float32(rng.NormFloat64() * math.Exp2(float64(-63+rng.IntN(9)-4)))
		}
		switch rng.IntN(50) {
		case 0:
			return 0
		case 1:
			return float32(rng.NormFloat64() * 1e-6)
		}
		return float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	m := Mat{Rows: rows, Cols: cols, DType: weights.BF16, u16: make([]uint16, rows*cols)}
	for i := range m.u16 {
		m.u16[i] = uint16(math.Float32bits(val()) >> 16)
	}
	xs := make([][]float32, nx)
	for i := range xs {
		xs[i] = make([]float32, cols+3) // longer: only Cols are read
		for j := range xs[i] {
			xs[i][j] = val()
		}
	}
	return m, xs
}

var bf16Cols = []int{1, 31, 63, 64, 65, 100, 127, 128, 129, 192, 255, 1000}

// Every kernel variant (the VDPBF16PS assembly where the CPU has it, the
// portable Go) gives the same bits in bf16 mode, for MatVec and MatMul,
// and MatMul gives MatVec's bits.
func TestBF16KernelsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	withComputeDType(t, "bf16", func() {
		for kind := range 2 {
			for _, cols := range bf16Cols {
				for _, rows := range []int{1, 2, 3, 4, 5, 7, 13, 50} { // 50: two row groups (bf16GroupRows) and 2 rows on the MV kernel
					m, xs := randBF16Inputs(rng, kind, rows, cols, 11)
					want := make([][]float32, len(xs))
					withKernel(t, "portable", func() {
						if defaultEngine.BF16KernelName() != "portable" {
							t.Fatalf("bf16 kernel %s under the portable variant", defaultEngine.BF16KernelName())
						}
						for i := range xs {
							want[i] = make([]float32, rows)
							m.MatVec(want[i], xs[i])
						}
					})
					for _, name := range KernelNames() {
						withKernel(t, name, func() {
							got := make([]float32, rows)
							m.MatVec(got, xs[0])
							if i := bitsEqual(got, want[0]); i >= 0 {
								t.Fatalf("%s (%s) kind %d %dx%d MatVec row %d: %08x, portable %08x", name, defaultEngine.BF16KernelName(), kind, rows, cols, i, math.Float32bits(got[i]), math.Float32bits(want[0][i]))
							}
							for _, T := range []int{2, 3, 4, 5, 6, 7, 9, 11} {
								dst := make([][]float32, T)
								for i := range dst {
									dst[i] = make([]float32, rows)
								}
								m.MatMul(dst, xs[:T])
								for i := range T {
									if j := bitsEqual(dst[i], want[i]); j >= 0 {
										t.Fatalf("%s (%s) kind %d %dx%d MatMul T=%d input %d row %d: %08x, MatVec %08x", name, defaultEngine.BF16KernelName(), kind, rows, cols, T, i, j, math.Float32bits(dst[i][j]), math.Float32bits(want[i][j]))
									}
								}
							}
						})
					}
				}
			}
		}
	})
}

// bf16 mode agrees with the f32 mode and with the exact product within
// the error of rounding the activations to bf16 (2^-9 relative per term)
// plus float32 accumulation; and with the exact product of the rounded
// activations within float32 accumulation error alone.
func TestBF16ModeAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, cols := range []int{1, 63, 64, 100, 1000, 4099} {
		rows := 7
		m, xs := randBF16Inputs(rng, 0, rows, cols, 1)
		x := xs[0]
		f32 := make([]float32, rows)
		m.MatVec(f32, x)
		for _, name := range KernelNames() {
			withKernel(t, name, func() {
				got := make([]float32, rows)
				withComputeDType(t, "bf16", func() { m.MatVec(got, x) })
				for r := range rows {
					var exact, exactR, mag float64
					for c := range cols {
						w := float64(m.at(r, c))
						exact += w * float64(x[c])
						exactR += w * float64(bf16ToF32(roundBF16(x[c])))
						mag += math.Abs(w * float64(x[c]))
					}
					acc := 2*float64(cols)*0x1p-24*mag + 1e-30
					if d := math.Abs(float64(got[r]) - exactR); d > acc {
						t.Errorf("%s cols %d row %d: %g, exact with rounded x %g (err %g > %g)", name, cols, r, got[r], exactR, d, acc)
					}
					tol := 0x1p-9*mag + acc
					if d := math.Abs(float64(got[r]) - exact); d > tol {
						t.Errorf("%s cols %d row %d: %g, exact %g (err %g > %g)", name, cols, r, got[r], exact, d, tol)
					}
					if d := math.Abs(float64(got[r]) - float64(f32[r])); d > tol+acc {
						t.Errorf("%s cols %d row %d: bf16 mode %g, f32 mode %g (diff %g > %g)", name, cols, r, got[r], f32[r], d, tol+acc)
					}
				}
			})
		}
	}
}

// F16 and F32 weights, and Dot, are unaffected by the mode; switching back
// to f32 gives the f32 bits again.
func TestBF16ModeOnlyBF16Weights(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, dt := range testDTypes {
		m := randMat(rng, dt, 37, 300)
		x := randVec(rng, 300)
		xs := [][]float32{x, randVec(rng, 300), randVec(rng, 300)}
		want := make([]float32, 37)
		m.MatVec(want, x)
		wantMM := [][]float32{make([]float32, 37), make([]float32, 37), make([]float32, 37)}
		m.MatMul(wantMM, xs)
		got := make([]float32, 37)
		gotMM := [][]float32{make([]float32, 37), make([]float32, 37), make([]float32, 37)}
		withComputeDType(t, "bf16", func() {
			m.MatVec(got, x)
			m.MatMul(gotMM, xs)
		})
		same := bitsEqual(got, want) < 0
		for i := range xs {
			same = same && bitsEqual(gotMM[i], wantMM[i]) < 0
		}
		if dt == weights.BF16 && same {
			t.Errorf("BF16 weights: bf16 mode gave the f32 bits")
		}
		if dt != weights.BF16 && !same {
			t.Errorf("%s weights: bf16 mode changed the result", dt)
		}
		m.MatVec(got, x)
		if i := bitsEqual(got, want); i >= 0 {
			t.Errorf("%s: back in f32 mode, row %d differs", dt, i)
		}
	}
}

// bf16-mode results are bit-identical for 1, 2 and 3 threads, on matrices
// large enough to go through the pool, and MatMul (more inputs than one
// group included) equals MatVec.
func TestBF16ModeThreadsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	variants := []string{"portable"}
	if k := KernelNames(); k[len(k)-1] != "portable" {
		variants = append(variants, k[len(k)-1])
	}
	withComputeDType(t, "bf16", func() {
		for _, kernel := range variants {
			withKernel(t, kernel, func() { testBF16Threads(t, rng) })
		}
	})
}

func testBF16Threads(t *testing.T, rng *rand.Rand) {
	for _, shape := range [][3]int{{517, 333, 6}, {1000, 1024, 6}, {3, 40000, 5}, {130, 256, bf16MMGroup + 37}} {
		rows, cols, nx := shape[0], shape[1], shape[2]
		m, xs := randBF16Inputs(rng, 0, rows, cols, nx)
		var want []float32
		var wantMM [][]float32
		for _, n := range []int{1, 2, 3} {
			withThreads(n, func() {
				got := make([]float32, rows)
				m.MatVec(got, xs[0])
				gotMM := make([][]float32, len(xs))
				for i := range gotMM {
					gotMM[i] = make([]float32, rows)
				}
				m.MatMul(gotMM, xs)
				if want == nil {
					want, wantMM = got, gotMM
					return
				}
				if i := bitsEqual(got, want); i >= 0 {
					t.Fatalf("%s %dx%d MatVec with %d threads differs at row %d", defaultEngine.BF16KernelName(), rows, cols, n, i)
				}
				for k := range xs {
					if i := bitsEqual(gotMM[k], wantMM[k]); i >= 0 {
						t.Fatalf("%s %dx%d MatMul with %d threads differs at input %d row %d", defaultEngine.BF16KernelName(), rows, cols, n, k, i)
					}
				}
			})
		}
		for k := range xs {
			v := make([]float32, rows)
			m.MatVec(v, xs[k])
			if i := bitsEqual(v, wantMM[k]); i >= 0 {
				t.Fatalf("%s %dx%d MatMul input %d differs from MatVec at row %d", defaultEngine.BF16KernelName(), rows, cols, k, i)
			}
		}
	}
}

// Concurrent callers each get their own rounded-activation buffer.
func TestBF16ModeConcurrentCallers(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	m, xs := randBF16Inputs(rng, 0, 1024, 1024, 8)
	withComputeDType(t, "bf16", func() {
		want := make([][]float32, len(xs))
		for g := range xs {
			want[g] = make([]float32, 1024)
			m.MatVec(want[g], xs[g])
		}
		errs := make(chan error, 4)
		for g := range 4 {
			go func() {
				got := make([]float32, 1024)
				gotMM := [][]float32{make([]float32, 1024), make([]float32, 1024)}
				for it := range 30 {
					i := (g + it) % (len(xs) - 1)
					m.MatVec(got, xs[i])
					m.MatMul(gotMM, xs[i:i+2])
					if bitsEqual(got, want[i]) >= 0 || bitsEqual(gotMM[0], want[i]) >= 0 || bitsEqual(gotMM[1], want[i+1]) >= 0 {
						errs <- fmt.Errorf("goroutine %d iteration %d: results differ", g, it)
						return
					}
				}
				errs <- nil
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestBF16ModeNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	m, xs := randBF16Inputs(rng, 0, 1024, 1024, 5)
	small, _ := randBF16Inputs(rng, 0, 8, 100, 0)
	dst := make([]float32, 1024)
	dsts := make([][]float32, len(xs))
	for i := range dsts {
		dsts[i] = make([]float32, 1024)
	}
	withComputeDType(t, "bf16", func() {
		for _, name := range KernelNames() {
			withKernel(t, name, func() {
				m.MatMul(dsts, xs) // the per-call buffer grows once
				if n := testalloc.PerRun(t, 10, func() { m.MatVec(dst, xs[0]) }); n != 0 {
					t.Errorf("%s MatVec: %v allocs", name, n)
				}
				if n := testalloc.PerRun(t, 3, func() { m.MatMul(dsts, xs) }); n != 0 {
					t.Errorf("%s MatMul: %v allocs", name, n)
				}
				if n := testalloc.PerRun(t, 20, func() { small.MatVec(dst, xs[0]) }); n != 0 {
					t.Errorf("%s small MatVec: %v allocs", name, n)
				}
			})
		}
	})
}

// The assembly kernels run exactly where the CPU has AVX512_BF16 and the
// avx512 variant is selected.
func TestBF16Dispatch(t *testing.T) {
	for _, name := range KernelNames() {
		withKernel(t, name, func() {
			want := "portable"
			if hasDPBF16 && name == "avx512" {
				want = "avx512bf16"
			}
			if got := defaultEngine.BF16KernelName(); got != want {
				t.Errorf("kernel variant %s: bf16 kernel %s, want %s (hasDPBF16 %v)", name, got, want, hasDPBF16)
			}
		})
	}
	t.Logf("kernel variants %v; bf16 mode runs on %s", KernelNames(), defaultEngine.BF16KernelName())
}

// Rows long enough for the bf16 tiles' column blocks (bf16BlockCols): the
// tile's state carried between blocks gives MatVec's bits, for 2, 3 and a
// short last block, with a tail past the last 64 columns, over two row
// groups, on every kernel variant.
func TestBF16MatMulColumnBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	withComputeDType(t, "bf16", func() {
		for _, cols := range []int{2*bf16BlockCols + 64 + 37, 3 * bf16BlockCols, bf16BlockCols*3/2 + 64} {
			m, xs := randBF16Inputs(rng, 0, 50, cols, 16)
			for _, name := range KernelNames() {
				withKernel(t, name, func() {
					want := make([][]float32, len(xs))
					for i := range xs {
						want[i] = make([]float32, m.Rows)
						m.MatVec(want[i], xs[i])
					}
					for _, T := range []int{16, 9} {
						dst := make([][]float32, T)
						for i := range dst {
							dst[i] = make([]float32, m.Rows)
						}
						m.MatMul(dst, xs[:T])
						for i := range T {
							if j := bitsEqual(dst[i], want[i]); j >= 0 {
								t.Fatalf("%s, %d columns, T=%d: input %d row %d: %08x, MatVec %08x", name, cols, T, i, j, math.Float32bits(dst[i][j]), math.Float32bits(want[i][j]))
							}
						}
					}
				})
			}
		}
	})
}

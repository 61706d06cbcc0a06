package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// withKernel runs f with kernel variant name selected.
func withKernel(t testing.TB, name string, f func()) {
	t.Helper()
	prev := defaultEngine.KernelName()
	if !setKernel(name) {
		t.Fatalf("kernel %q not available", name)
	}
	defer setKernel(prev)
	f()
}

// withThreads runs f with n threads.
func withThreads(n int, f func()) {
	prev := defaultEngine.Threads()
	setThreads(n)
	defer setThreads(prev)
	f()
}

var testDTypes = []weights.DType{weights.BF16, weights.F16, weights.F32}

// randMat makes a rows×cols matrix of dtype with values of varied
// magnitude (a few exact zeros and tiny values included).
func randMat(rng *rand.Rand, dt weights.DType, rows, cols int) Mat {
	n := rows * cols
	m := Mat{Rows: rows, Cols: cols, DType: dt}
	val := func() float32 {
		switch rng.IntN(50) {
		case 0:
			return 0
		case 1:
			return float32(rng.NormFloat64() * 1e-6)
		}
		return float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	switch dt {
	case weights.F32:
		m.f32 = make([]float32, n)
		for i := range m.f32 {
			m.f32[i] = val()
		}
	case weights.BF16:
		m.u16 = make([]uint16, n)
		for i := range m.u16 {
			m.u16[i] = uint16(math.Float32bits(val()) >> 16)
		}
	case weights.F16:
		m.u16 = make([]uint16, n)
		for i := range m.u16 {
			// any finite half, subnormals included
			h := uint16(rng.Uint32())
			if h>>10&0x1f == 0x1f {
				h &^= 0x4000
			}
			m.u16[i] = h
		}
	}
	return m
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func bitsEqual(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// widened returns element (r, c) as float32.
func (m Mat) at(r, c int) float32 {
	i := r*m.Cols + c
	switch m.DType {
	case weights.F32:
		return m.f32[i]
	case weights.BF16:
		return bf16ToF32(m.u16[i])
	}
	return weights.HalfToFloat(m.u16[i])
}

var awkwardCols = []int{1, 3, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 100, 129, 255, 256, 1000}
var awkwardRows = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33}

// Every kernel variant gives the portable kernels' bits, for MatVec, MatMul
// and Dot.
func TestKernelsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range testDTypes {
		for _, cols := range awkwardCols {
			for _, rows := range awkwardRows {
				m := randMat(rng, dt, rows, cols)
				x := randVec(rng, cols+3) // longer x: only Cols are read
				want := make([]float32, rows)
				withKernel(t, "portable", func() { m.MatVec(want, x) })
				xs := make([][]float32, 9)
				for i := range xs {
					xs[i] = randVec(rng, cols)
				}
				wantMM := make([][]float32, len(xs))
				for i := range xs {
					wantMM[i] = make([]float32, rows)
					withKernel(t, "portable", func() { m.MatVec(wantMM[i], xs[i]) })
				}
				for _, name := range KernelNames() {
					withKernel(t, name, func() {
						got := make([]float32, rows)
						m.MatVec(got, x)
						if i := bitsEqual(got, want); i >= 0 {
							t.Fatalf("%s %s %dx%d MatVec row %d: %g (%08x), portable %g (%08x)", name, dt, rows, cols, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
						for _, T := range []int{2, 3, 4, 5, 7, 9} {
							dst := make([][]float32, T)
							for i := range dst {
								dst[i] = make([]float32, rows)
							}
							m.MatMul(dst, xs[:T])
							for i := range T {
								if j := bitsEqual(dst[i], wantMM[i]); j >= 0 {
									t.Fatalf("%s %s %dx%d MatMul T=%d input %d row %d: %g, MatVec %g", name, dt, rows, cols, T, i, j, dst[i][j], wantMM[i][j])
								}
							}
						}
						if dt == weights.F32 {
							for r := range rows {
								if d := Dot(m.f32[r*cols:(r+1)*cols], x); math.Float32bits(d) != math.Float32bits(want[r]) {
									t.Fatalf("%s Dot(len %d) = %g, MatVec row %g", name, cols, d, want[r])
								}
							}
						}
					})
				}
			}
		}
	}
}

// The fast kernels agree with a float64 reference and with the slow loops
// within float32 rounding.
func TestKernelsAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range testDTypes {
		for _, cols := range []int{1, 17, 100, 1000, 4099} {
			rows := 7
			m := randMat(rng, dt, rows, cols)
			x := randVec(rng, cols)
			ref := make([]float32, rows)
			refMatVec(m, ref, x)
			for _, name := range KernelNames() {
				withKernel(t, name, func() {
					got := make([]float32, rows)
					m.MatVec(got, x)
					for r := range rows {
						var exact, mag float64
						for c := range cols {
							p := float64(m.at(r, c)) * float64(x[c])
							exact += p
							mag += math.Abs(p)
						}
						tol := 2*float64(cols)*0x1p-24*mag + 1e-30
						if d := math.Abs(float64(got[r]) - exact); d > tol {
							t.Errorf("%s %s cols %d row %d: %g, float64 %g (err %g > %g)", name, dt, cols, r, got[r], exact, d, tol)
						}
						if d := math.Abs(float64(got[r]) - float64(ref[r])); d > 2*tol {
							t.Errorf("%s %s cols %d row %d: %g, slow loop %g", name, dt, cols, r, got[r], ref[r])
						}
					}
				})
			}
		}
	}
}

// Results are bit-identical for 1, 2 and 3 threads, on matrices large
// enough to go through the pool.
func TestThreadsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range testDTypes {
		for _, shape := range [][2]int{{517, 333}, {1000, 1024}, {3, 40000}} {
			rows, cols := shape[0], shape[1]
			m := randMat(rng, dt, rows, cols)
			x := randVec(rng, cols)
			xs := make([][]float32, 6)
			for i := range xs {
				xs[i] = randVec(rng, cols)
			}
			var want []float32
			var wantMM [][]float32
			for _, n := range []int{1, 2, 3} {
				withThreads(n, func() {
					got := make([]float32, rows)
					m.MatVec(got, x)
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
						t.Fatalf("%s %dx%d MatVec with %d threads differs at row %d", dt, rows, cols, n, i)
					}
					for k := range xs {
						if i := bitsEqual(gotMM[k], wantMM[k]); i >= 0 {
							t.Fatalf("%s %dx%d MatMul with %d threads differs at input %d row %d", dt, rows, cols, n, k, i)
						}
					}
				})
			}
			// and the prefill equals the step-by-step MatVec
			for k := range xs {
				v := make([]float32, rows)
				m.MatVec(v, xs[k])
				if i := bitsEqual(v, wantMM[k]); i >= 0 {
					t.Fatalf("%s %dx%d MatMul input %d differs from MatVec at row %d", dt, rows, cols, k, i)
				}
			}
		}
	}
}

// Concurrent callers share the pool safely and get the same bits.
func TestConcurrentCallers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	m := randMat(rng, weights.BF16, 1024, 1024)
	x := randVec(rng, 1024)
	want := make([]float32, 1024)
	m.MatVec(want, x)
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			got := make([]float32, 1024)
			for it := 0; it < 50; it++ {
				m.MatVec(got, x)
				if i := bitsEqual(got, want); i >= 0 {
					errs <- fmt.Errorf("row %d differs", i)
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestRowSliceMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m := randMat(rng, weights.BF16, 40, 70)
	x := randVec(rng, 70)
	all := make([]float32, 40)
	m.MatVec(all, x)
	part := make([]float32, 13)
	m.RowSlice(20, 33).MatVec(part, x)
	if i := bitsEqual(part, all[20:33]); i >= 0 {
		t.Fatalf("RowSlice row %d differs", i)
	}
}

func TestFMA32Midpoint(t *testing.T) {
	// a·b = 2^-24 − 2^-70, c = 1+2^-23: the float64 sum lands on the float32
	// midpoint 1+2^-23+2^-24 and rounds the wrong way if converted naively.
	a := float32(0x1p-24 * (1 + 0x1p-23))
	b := float32(1 - 0x1p-23)
	c := float32(1 + 0x1p-23)
	if got := fma32(a, b, c); got != c {
		t.Fatalf("fma32 = %x, want %x", math.Float32bits(got), math.Float32bits(c))
	}
	if got := fma32(-a, b, -c); got != -c {
		t.Fatalf("fma32 = %x, want %x", math.Float32bits(got), math.Float32bits(-c))
	}
}

func TestNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	m := randMat(rng, weights.BF16, 1024, 1024)
	x := randVec(rng, 1024)
	dst := make([]float32, 1024)
	xs := [][]float32{x, x, x, x, x}
	dsts := make([][]float32, 5)
	for i := range dsts {
		dsts[i] = make([]float32, 1024)
	}
	small := randMat(rng, weights.F32, 8, 40)
	for _, name := range KernelNames() {
		withKernel(t, name, func() {
			if n := testalloc.PerRun(t, 20, func() { m.MatVec(dst, x) }); n != 0 {
				t.Errorf("%s MatVec: %v allocs", name, n)
			}
			if n := testalloc.PerRun(t, 5, func() { m.MatMul(dsts, xs) }); n != 0 {
				t.Errorf("%s MatMul: %v allocs", name, n)
			}
			if n := testalloc.PerRun(t, 20, func() { small.MatVec(dst, x) }); n != 0 {
				t.Errorf("%s small MatVec: %v allocs", name, n)
			}
			if n := testalloc.PerRun(t, 20, func() { _ = Dot(x, x) }); n != 0 {
				t.Errorf("%s Dot: %v allocs", name, n)
			}
		})
	}
}

// goldenInputs builds inputs from integer bits only (no float arithmetic
// that a compiler could fuse differently on another architecture).
func goldenInputs(dt weights.DType, rows, cols int, seed uint64) (Mat, []float32) {
	rng := rand.New(rand.NewPCG(seed, 99))
	f := func() float32 {
		u := rng.Uint32()
		return math.Float32frombits(u&0x807fffff | (118+u>>27&15)<<23)
	}
	m := Mat{Rows: rows, Cols: cols, DType: dt}
	switch dt {
	case weights.F32:
		m.f32 = make([]float32, rows*cols)
		for i := range m.f32 {
			m.f32[i] = f()
		}
	case weights.BF16:
		m.u16 = make([]uint16, rows*cols)
		for i := range m.u16 {
			m.u16[i] = uint16(math.Float32bits(f()) >> 16)
		}
	case weights.F16:
		m.u16 = make([]uint16, rows*cols)
		for i := range m.u16 {
			m.u16[i] = uint16(rng.Uint32()) &^ 0x4000 // finite, subnormals included
		}
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = f()
	}
	return m, x
}

// The bits are the same on every platform and variant: a checksum of
// outputs recorded on amd64 (AVX-512, AVX2 and portable agree) must match
// wherever the tests run (e.g. arm64, which has only the portable kernels).
func TestGoldenBits(t *testing.T) {
	const want = 0xdc4b60b73a8a49ba
	for _, name := range KernelNames() {
		withKernel(t, name, func() {
			h := uint64(14695981039346656037)
			for _, dt := range testDTypes {
				for i, shape := range [][2]int{{37, 1000}, {5, 16}, {9, 7}} {
					m, x := goldenInputs(dt, shape[0], shape[1], uint64(i))
					out := make([]float32, m.Rows)
					m.MatVec(out, x)
					for _, v := range out {
						h = (h ^ uint64(math.Float32bits(v))) * 1099511628211
					}
				}
			}
			if h != want {
				t.Fatalf("%s: checksum %#x, want %#x", name, h, uint64(want))
			}
		})
	}
}

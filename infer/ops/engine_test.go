package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

func newTestEngine(t *testing.T, o EngineOptions) *Engine {
	t.Helper()
	e, err := NewEngine(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// contractDot is the numeric contract of matvec_portable.go written out as
// one plain loop: element j < n&^31 into lane j%32 by a single-rounding FMA,
// the lanes summed in the fixed tree, then the tail by sequential FMAs.
func contractDot(w func(j int) float32, x []float32, n int) float32 {
	nl := n &^ 31
	var acc [32]float32
	for j := range nl {
		acc[j%32] = fma32(w(j), x[j], acc[j%32])
	}
	var s float32
	if nl > 0 {
		for h := 16; h >= 2; h /= 2 {
			for i := range h {
				acc[i] += acc[i+h]
			}
		}
		s = acc[0] + acc[1]
	}
	for j := nl; j < n; j++ {
		s = fma32(w(j), x[j], s)
	}
	return s
}

// contractMatVec is MatVec by contractDot, row by row.
func contractMatVec(m Mat, dst, x []float32) {
	for r := range m.Rows {
		dst[r] = contractDot(func(j int) float32 { return m.at(r, j) }, x, m.Cols)
	}
}

// bf16ModeMatVec is the bf16 compute mode by the package's portable
// emulation (roundBF16, dotDPBF16Portable, then the sequential tail).
func bf16ModeMatVec(m Mat, dst, x []float32) {
	c := m.Cols
	xb := make([]uint16, c)
	for j := range xb {
		xb[j] = roundBF16(x[j])
	}
	nl := c &^ 63
	for r := range m.Rows {
		w := m.u16[r*c : (r+1)*c]
		var s float32
		if nl > 0 {
			s = dotDPBF16Portable(w, xb, nl)
		}
		for j := nl; j < c; j++ {
			s = fma32(bf16ToF32(w[j]), bf16ToF32(xb[j]), s)
		}
		dst[r] = s
	}
}

// engineCase is one product with its expected bits.
type engineCase struct {
	m       Mat
	x       []float32
	xs      [][]float32
	want    []float32   // MatVec(m, x)
	wantMM  [][]float32 // MatVec(m, xs[i]) for each i
	a, b    []float32   // Dot and Axpy operands
	wantDot float32
	wantAx  []float32 // Axpy(copy of a, 0.75, b)
}

func makeEngineCases(rng *rand.Rand, matVec func(m Mat, dst, x []float32), dtypes []weights.DType) []engineCase {
	var cases []engineCase
	// Small and awkward shapes run inline, the large ones on the pools.
	for _, shape := range [][2]int{{1, 1}, {3, 31}, {7, 33}, {13, 100}, {5, 1000}, {517, 333}, {1000, 1024}} {
		for _, dt := range dtypes {
			rows, cols := shape[0], shape[1]
			c := engineCase{m: randMat(rng, dt, rows, cols), x: randVec(rng, cols)}
			c.want = make([]float32, rows)
			matVec(c.m, c.want, c.x)
			for range 5 {
				x := randVec(rng, cols)
				want := make([]float32, rows)
				matVec(c.m, want, x)
				c.xs = append(c.xs, x)
				c.wantMM = append(c.wantMM, want)
			}
			c.a, c.b = randVec(rng, cols), randVec(rng, cols)
			c.wantDot = contractDot(func(j int) float32 { return c.a[j] }, c.b, cols)
			c.wantAx = append([]float32(nil), c.a...)
			axpyRef(c.wantAx, 0.75, c.b)
			cases = append(cases, c)
		}
	}
	return cases
}

// checkEngine runs every case on e iters times and reports the first
// difference from the expected bits.
func checkEngine(e *Engine, cases []engineCase, iters int, withDotAxpy bool) error {
	for it := range iters {
		for _, c := range cases {
			got := make([]float32, c.m.Rows)
			e.MatVec(c.m, got, c.x)
			if i := bitsEqual(got, c.want); i >= 0 {
				return fmt.Errorf("%s/%d %s %dx%d MatVec row %d: %08x, want %08x", e.KernelName(), e.Threads(), c.m.DType, c.m.Rows, c.m.Cols, i, math.Float32bits(got[i]), math.Float32bits(c.want[i]))
			}
			gotMM := make([][]float32, len(c.xs))
			for i := range gotMM {
				gotMM[i] = make([]float32, c.m.Rows)
			}
			e.MatMul(c.m, gotMM, c.xs)
			for k := range c.xs {
				if i := bitsEqual(gotMM[k], c.wantMM[k]); i >= 0 {
					return fmt.Errorf("%s/%d %s %dx%d MatMul input %d row %d: %08x, want %08x", e.KernelName(), e.Threads(), c.m.DType, c.m.Rows, c.m.Cols, k, i, math.Float32bits(gotMM[k][i]), math.Float32bits(c.wantMM[k][i]))
				}
			}
			if !withDotAxpy || it > 0 {
				continue
			}
			if d := e.Dot(c.a, c.b); math.Float32bits(d) != math.Float32bits(c.wantDot) {
				return fmt.Errorf("%s Dot(len %d) = %08x, want %08x", e.KernelName(), len(c.a), math.Float32bits(d), math.Float32bits(c.wantDot))
			}
			ax := append([]float32(nil), c.a...)
			e.Axpy(ax, 0.75, c.b)
			if i := bitsEqual(ax, c.wantAx); i >= 0 {
				return fmt.Errorf("%s Axpy(len %d) element %d differs", e.KernelName(), len(c.a), i)
			}
		}
	}
	return nil
}

// runConcurrently runs the checks on their engines at the same time, one
// goroutine each, and fails on the first error.
func runConcurrently(t *testing.T, checks ...func() error) {
	t.Helper()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, f := range checks {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// Two engines with different kernel variants and thread counts, run at the
// same time, both give the contract's bits (and agree with the slow loops
// of matvec_ref.go within float32 rounding), while the default engine's
// settings are switched under them.
func TestEnginesConcurrentBitIdentical(t *testing.T) {
	names := KernelNames()
	ea := newTestEngine(t, EngineOptions{Threads: 1, Kernel: "portable"})
	eb := newTestEngine(t, EngineOptions{Threads: 3, Kernel: names[len(names)-1]})
	if ea.KernelName() != "portable" || ea.Threads() != 1 || eb.KernelName() != names[len(names)-1] || eb.Threads() != 3 {
		t.Fatalf("engines %s/%d and %s/%d", ea.KernelName(), ea.Threads(), eb.KernelName(), eb.Threads())
	}
	rng := rand.New(rand.NewPCG(41, 42))
	cases := makeEngineCases(rng, contractMatVec, testDTypes)
	for _, c := range cases {
		ref := make([]float32, c.m.Rows)
		refMatVec(c.m, ref, c.x)
		for r := range ref {
			var mag float64
			for j := range c.m.Cols {
				mag += math.Abs(float64(c.m.at(r, j)) * float64(c.x[j]))
			}
			if d := math.Abs(float64(ref[r]) - float64(c.want[r])); d > 4*float64(c.m.Cols)*0x1p-24*mag+1e-30 {
				t.Fatalf("%s %dx%d row %d: contract %g, slow loop %g", c.m.DType, c.m.Rows, c.m.Cols, r, c.want[r], ref[r])
			}
		}
	}

	// The default engine changes settings all along: the engines must not
	// see it.
	stop := make(chan struct{})
	var toggler sync.WaitGroup
	defer setKernel(defaultEngine.KernelName())
	defer setThreads(defaultEngine.Threads())
	defer setComputeDType(defaultEngine.ComputeDType())
	toggler.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			setKernel(names[i%len(names)])
			setThreads(1 + i%3)
			_ = setComputeDType([]string{"f32", "bf16"}[i%2])
			time.Sleep(100 * time.Microsecond)
		}
	})
	runConcurrently(t,
		func() error { return checkEngine(ea, cases, 2, true) },
		func() error { return checkEngine(eb, cases, 6, true) })
	close(stop)
	toggler.Wait()
	if ea.KernelName() != "portable" || ea.Threads() != 1 || ea.ComputeDType() != "f32" || eb.Threads() != 3 || eb.ComputeDType() != "f32" {
		t.Fatalf("engine settings changed: %s/%d/%s, %s/%d/%s", ea.KernelName(), ea.Threads(), ea.ComputeDType(), eb.KernelName(), eb.Threads(), eb.ComputeDType())
	}
}

// A bf16-dtype engine and an f32 engine coexist: run at the same time, the
// first gives the bf16 emulation's bits, the second the f32 contract's (and
// the default engine in bf16 mode the same bits as the bf16 engine).
func TestEnginesBF16AndF32Coexist(t *testing.T) {
	names := KernelNames()
	best := names[len(names)-1]
	eb := newTestEngine(t, EngineOptions{Threads: 2, Kernel: best, ComputeDType: "bf16"})
	ebp := newTestEngine(t, EngineOptions{Threads: 3, Kernel: "portable", ComputeDType: "bfloat16"})
	ef := newTestEngine(t, EngineOptions{Threads: 2, Kernel: best, ComputeDType: "f32"})
	if eb.ComputeDType() != "bf16" || ebp.ComputeDType() != "bf16" || ef.ComputeDType() != "f32" {
		t.Fatalf("compute dtypes %s %s %s", eb.ComputeDType(), ebp.ComputeDType(), ef.ComputeDType())
	}
	want := "portable"
	if hasDPBF16 && best == "avx512" {
		want = "avx512bf16"
	}
	if eb.BF16KernelName() != want || ebp.BF16KernelName() != "portable" {
		t.Fatalf("bf16 kernels %s and %s, want %s and portable", eb.BF16KernelName(), ebp.BF16KernelName(), want)
	}
	rng := rand.New(rand.NewPCG(43, 44))
	bf16Cases := makeEngineCases(rng, bf16ModeMatVec, []weights.DType{weights.BF16})
	rng = rand.New(rand.NewPCG(43, 44)) // the same inputs
	f32Cases := makeEngineCases(rng, contractMatVec, []weights.DType{weights.BF16})
	for i, c := range bf16Cases {
		if bitsEqual(c.want, f32Cases[i].want) < 0 && c.m.Cols >= 64 {
			t.Fatalf("%dx%d: bf16 mode and f32 give the same bits: the test shows nothing", c.m.Rows, c.m.Cols)
		}
	}
	// The package's own bf16 path, on the default engine.
	withComputeDType(t, "bf16", func() {
		for _, c := range bf16Cases {
			got := make([]float32, c.m.Rows)
			c.m.MatVec(got, c.x)
			if i := bitsEqual(got, c.want); i >= 0 {
				t.Fatalf("default engine in bf16 mode, %dx%d row %d differs from the emulation", c.m.Rows, c.m.Cols, i)
			}
		}
	})
	runConcurrently(t,
		func() error { return checkEngine(eb, bf16Cases, 4, false) },
		func() error { return checkEngine(ebp, bf16Cases, 1, false) },
		func() error { return checkEngine(ef, f32Cases, 4, true) })
}

func TestNewEngineOptions(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	names := KernelNames()
	if e.Threads() != runtime.GOMAXPROCS(0) || e.KernelName() != names[len(names)-1] || e.ComputeDType() != "f32" {
		t.Fatalf("default options: %d threads, kernel %s, %s", e.Threads(), e.KernelName(), e.ComputeDType())
	}
	if e := newTestEngine(t, EngineOptions{Threads: 1 << 20}); e.Threads() != maxThreads {
		t.Fatalf("Threads 1<<20: %d threads", e.Threads())
	}
	for _, o := range []EngineOptions{{Kernel: "sse2"}, {Kernel: "Portable"}, {ComputeDType: "fp8"}, {ComputeDType: "f16"}} {
		if e, err := NewEngine(o); err == nil {
			e.Close()
			t.Errorf("NewEngine(%+v) accepted", o)
		}
	}
	if Default() != defaultEngine || Default().KernelName() != defaultEngine.KernelName() || Default().Threads() != defaultEngine.Threads() {
		t.Fatal("Default() is not the package-level functions' engine")
	}
	n := defaultEngine.Threads()
	Default().Close()
	if defaultEngine.Threads() != n {
		t.Fatalf("Default().Close() changed the threads from %d to %d", n, defaultEngine.Threads())
	}
}

func TestEngineNoAllocs(t *testing.T) {
	m, xs := randBF16Inputs(rand.New(rand.NewPCG(45, 46)), 0, 1024, 1024, 5)
	var dsts [5][1024]float32
	dstMM := [][]float32{dsts[0][:], dsts[1][:], dsts[2][:], dsts[3][:], dsts[4][:]}
	x, dst := xs[0], make([]float32, 1024)
	for _, dtype := range []string{"f32", "bf16"} {
		e := newTestEngine(t, EngineOptions{Threads: 2, ComputeDType: dtype})
		e.MatMul(m, dstMM, xs) // the bf16 per-call buffer grows once
		if n := testalloc.PerRun(t, 20, func() { e.MatVec(m, dst, x) }); n != 0 {
			t.Errorf("%s MatVec: %v allocs", dtype, n)
		}
		if n := testalloc.PerRun(t, 5, func() { e.MatMul(m, dstMM, xs) }); n != 0 {
			t.Errorf("%s MatMul: %v allocs", dtype, n)
		}
		if n := testalloc.PerRun(t, 20, func() { _ = e.Dot(x, x); e.Axpy(dst, 0.5, x) }); n != 0 {
			t.Errorf("%s Dot, Axpy: %v allocs", dtype, n)
		}
	}
}

// settledGoroutines waits (up to a few seconds) until the goroutine count
// stays the same for a while, workers of earlier tests' engines gone, and
// returns it.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			break
		}
		n = m
	}
	return n
}

// goroutinesBackTo waits (a bounded poll, not a speed assertion) until at
// most n goroutines run; it reports the last count.
func goroutinesBackTo(n int, gc bool) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if gc {
			runtime.GC()
		}
		got := runtime.NumGoroutine()
		if got <= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops the workers (no goroutine leak); the engine then still works,
// inline; a second Close does nothing.
func TestEngineCloseStopsWorkers(t *testing.T) {
	// A first engine (without workers), so that whatever the runtime starts
	// for the first one (the cleanup goroutine) is in the baseline.
	e0, _ := NewEngine(EngineOptions{Threads: 1})
	e0.Close()
	base := settledGoroutines()
	e, err := NewEngine(EngineOptions{Threads: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.NumGoroutine(); got < base+4 {
		t.Fatalf("%d goroutines with 4 workers, %d before", got, base)
	}
	var mu sync.Mutex
	seen := map[int]int{}
	e.Parallel(100, func(i int) {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		time.Sleep(10 * time.Microsecond)
	})
	e.Close()
	if got := goroutinesBackTo(base, false); got > base {
		t.Fatalf("%d goroutines after Close, %d before NewEngine", got, base)
	}
	e.Close()
	if e.Threads() != 1 {
		t.Fatalf("closed engine: defaultEngine.Threads() = %d", e.Threads())
	}
	e.Parallel(100, func(i int) { seen[i]++ }) // inline: no lock needed
	for i := range 100 {
		if seen[i] != 2 {
			t.Fatalf("index %d ran %d times", i, seen[i])
		}
	}
	rng := rand.New(rand.NewPCG(47, 48))
	m := randMat(rng, weights.F32, 600, 200)
	x := randVec(rng, 200)
	got, want := make([]float32, 600), make([]float32, 600)
	e.MatVec(m, got, x)
	contractMatVec(m, want, x)
	if i := bitsEqual(got, want); i >= 0 {
		t.Fatalf("closed engine: MatVec row %d differs", i)
	}
	if got := runtime.NumGoroutine(); got > base {
		t.Fatalf("%d goroutines after using the closed engine, %d before", got, base)
	}
}

// An engine dropped without Close has its workers stopped by the garbage
// collector.
func TestEngineUnreachableStopsWorkers(t *testing.T) {
	e0, _ := NewEngine(EngineOptions{Threads: 1})
	e0.Close()
	base := settledGoroutines()
	func() {
		e, err := NewEngine(EngineOptions{Threads: 4})
		if err != nil {
			t.Fatal(err)
		}
		e.Parallel(8, func(int) {})
	}()
	if got := goroutinesBackTo(base, true); got > base {
		t.Fatalf("%d goroutines after dropping an engine, %d before", got, base)
	}
}

// leBytes encodes m's elements little-endian into a buffer starting off
// bytes past a 64-byte boundary.
func leBytes(m Mat, off int) []byte {
	size := m.DType.Size()
	n := m.Rows * m.Cols * size
	raw := make([]byte, n+128)
	start := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%64)) % 64
	b := raw[start+off : start+off+n]
	for i := range m.Rows * m.Cols {
		if m.DType == weights.F32 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(m.f32[i]))
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], m.u16[i])
		}
	}
	return b
}

func TestMatFromBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	for _, dt := range testDTypes {
		for _, shape := range [][2]int{{1, 1}, {7, 33}, {600, 200}} {
			rows, cols := shape[0], shape[1]
			want := randMat(rng, dt, rows, cols)
			b := leBytes(want, 0)
			m, err := MatFromBytes(rows, cols, dt, b)
			if err != nil {
				t.Fatalf("%s %dx%d: %v", dt, rows, cols, err)
			}
			if m.Rows != rows || m.Cols != cols || m.DType != dt || m.Bytes() != int64(len(b)) {
				t.Fatalf("%s %dx%d: got %s %dx%d", dt, rows, cols, m.DType, m.Rows, m.Cols)
			}
			gotF, wantF := m.Float32s(), want.Float32s()
			if i := bitsEqual(gotF, wantF); i >= 0 || len(gotF) != len(wantF) {
				t.Fatalf("%s %dx%d: element %d differs", dt, rows, cols, i)
			}
			x := randVec(rng, cols)
			got, exp := make([]float32, rows), make([]float32, rows)
			m.MatVec(got, x)
			want.MatVec(exp, x)
			if i := bitsEqual(got, exp); i >= 0 {
				t.Fatalf("%s %dx%d: MatVec row %d differs", dt, rows, cols, i)
			}
			if n := testalloc.PerRun(t, 10, func() { _, _ = MatFromBytes(rows, cols, dt, b) }); n != 0 {
				t.Errorf("%s MatFromBytes: %v allocs", dt, n)
			}
			// A view: writing the bytes changes the matrix.
			b[len(b)-1] ^= 0x80
			if math.Float32bits(m.at(rows-1, cols-1)) == math.Float32bits(want.at(rows-1, cols-1)) {
				t.Fatalf("%s: the matrix is not a view of the bytes", dt)
			}
		}
	}
	// Empty matrices.
	for _, dt := range testDTypes {
		m, err := MatFromBytes(0, 5, dt, nil)
		if err != nil || m.Rows != 0 || m.Cols != 5 {
			t.Fatalf("%s 0x5: %v", dt, err)
		}
		m.MatVec(nil, make([]float32, 5))
		_ = m.RowSlice(0, 0)
	}
	// Rejections.
	f32 := leBytes(randMat(rng, weights.F32, 4, 8), 0)
	bf16 := leBytes(randMat(rng, weights.BF16, 4, 8), 0)
	for _, c := range []struct {
		what       string
		rows, cols int
		dt         weights.DType
		b          []byte
	}{
		{"short", 4, 8, weights.F32, f32[:len(f32)-4]},
		{"long", 4, 7, weights.F32, f32},
		{"short bf16", 4, 8, weights.BF16, bf16[:len(bf16)-1]},
		{"f32 as bf16 of the same shape", 4, 8, weights.BF16, f32},
		{"negative rows", -4, -8, weights.F32, f32},
		{"overflow", math.MaxInt / 2, 4, weights.F32, f32},
		{"dtype I32", 4, 8, weights.I32, f32},
		{"dtype F64", 2, 8, weights.F64, f32},
		{"dtype BOOL", 4, 32, weights.BOOL, f32},
		{"f32 misaligned by 2", 4, 8, weights.F32, leBytes(randMat(rng, weights.F32, 4, 8), 2)},
		{"f32 misaligned by 1", 4, 8, weights.F32, leBytes(randMat(rng, weights.F32, 4, 8), 1)},
		{"bf16 misaligned by 1", 4, 8, weights.BF16, leBytes(randMat(rng, weights.BF16, 4, 8), 1)},
		{"f16 misaligned by 1", 4, 8, weights.F16, leBytes(randMat(rng, weights.F16, 4, 8), 1)},
	} {
		if _, err := MatFromBytes(c.rows, c.cols, c.dt, c.b); err == nil {
			t.Errorf("%s: accepted", c.what)
		}
	}
	// Aligned to 2 is enough for 2-byte elements.
	if _, err := MatFromBytes(4, 8, weights.BF16, leBytes(randMat(rng, weights.BF16, 4, 8), 2)); err != nil {
		t.Errorf("bf16 at offset 2: %v", err)
	}
}

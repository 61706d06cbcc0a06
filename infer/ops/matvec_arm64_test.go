//go:build !purego

package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// fma32 (pure Go) rounds exactly like the arm64 FMADD (FPCR as Go leaves
// it: round to nearest, no flush to zero), subnormals and midpoints
// included.
func TestFMA32MatchesHardwareARM64(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	check := func(a, b, c float32) {
		if got, want := fma32(a, b, c), fmaSS(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%x, %x, %x) = %x, hardware %x", math.Float32bits(a), math.Float32bits(b), math.Float32bits(c), math.Float32bits(got), math.Float32bits(want))
		}
	}
	n := 300_000
	if testing.Short() {
		n = 30_000
	}
	for i := range n {
		e := float64([]int{1, 8, 30, 60}[i%4])
		r := func() float32 { return float32(rng.NormFloat64() * math.Exp2(math.Round(rng.NormFloat64()*e))) }
		check(r(), r(), r())
		// products near float32 midpoints of c
		a := float32(1 + float64(rng.IntN(64)-32)*0x1p-23)
		b := float32(math.Ldexp(1+float64(rng.IntN(64)-32)*0x1p-23, -24-rng.IntN(3)))
		c := float32(math.Ldexp(1+float64(rng.IntN(1<<23))*0x1p-23, rng.IntN(3)-1))
		check(a, b, c)
		check(a, -b, -c)
		// the subnormal range
		check(math.Float32frombits(rng.Uint32()&0x807fffff|uint32(rng.IntN(40))<<23),
			math.Float32frombits(rng.Uint32()&0x807fffff|uint32(100+rng.IntN(40))<<23),
			math.Float32frombits(rng.Uint32()&0x80ffffff))
	}
}

// On arm64 "neon" is registered and is the best variant; "portable" stays
// selectable.
func TestNEONRegistered(t *testing.T) {
	names := KernelNames()
	if len(names) != 2 || names[0] != "portable" || names[1] != "neon" {
		t.Fatalf("KernelNames() = %v, want [portable neon]", names)
	}
	for _, name := range names {
		e, err := NewEngine(EngineOptions{Threads: 1, Kernel: name})
		if err != nil {
			t.Fatal(err)
		}
		if e.KernelName() != name {
			t.Fatalf("engine kernel %q, want %q", e.KernelName(), name)
		}
		e.Close()
	}
	if e, err := NewEngine(EngineOptions{Threads: 1}); err != nil || e.KernelName() != "neon" {
		t.Fatalf("default kernel: %v, %v", e, err)
	}
	if _, err := NewEngine(EngineOptions{Kernel: "avx2"}); err == nil {
		t.Fatal(`NewEngine(Kernel: "avx2") succeeded on arm64`)
	}
}

// The assembly runs (the hooks report it did) and gives the portable
// kernels' bits, called directly: a fallback to the portable code would
// fail here rather than pass unnoticed in the tests over KernelNames.
func TestNEONHooksDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, dt := range append(append([]weights.DType(nil), testDTypes...), quantDTypes...) {
		for _, cols := range []int{32, 64, 96, 256, 288, 1000} {
			rows := 5
			var m Mat
			if dt == weights.Q8_0 || dt == weights.Q4_K {
				m = randQuantMat(rng, dt, rows, cols)
			} else {
				m = randMat(rng, dt, rows, cols)
			}
			nl := cols &^ (lanes - 1)
			x := randVec(rng, cols)
			want := make([]float32, rows)
			portableKernels.mv(m, 0, rows, nl, x, want)
			got := make([]float32, rows)
			if !archMV(kNEON, m, 0, rows, nl, x, got) {
				t.Fatalf("%s: archMV did not run", dt)
			}
			if i := bitsEqual(got, want); i >= 0 {
				t.Fatalf("%s cols %d: archMV row %d = %x, portable %x", dt, cols, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
			if dt == weights.Q8_0 || dt == weights.Q4_K {
				wq := make([]float32, cols)
				weights.DequantizeRow(dt, wq, m.qrow(1))
				gq := make([]float32, nl)
				if !archDQ(kNEON, dt, m.qrow(1), nl, gq) {
					t.Fatalf("%s: archDQ did not run", dt)
				}
				if i := bitsEqual(gq, wq[:nl]); i >= 0 {
					t.Fatalf("%s cols %d: archDQ element %d = %g, DequantizeRow %g", dt, cols, i, gq[i], wq[i])
				}
				continue
			}
			xs := [][]float32{randVec(rng, cols), randVec(rng, cols), randVec(rng, cols)}
			for _, pf := range []bool{false, true} {
				var out [16]float32
				if !archMM(kNEON, m, 2, nl, xs, &out, pf) {
					t.Fatalf("%s: archMM did not run", dt)
				}
				for ti, xt := range xs {
					w := make([]float32, 3)
					portableKernels.mv(m, 2, 3, nl, xt, w)
					if math.Float32bits(out[ti]) != math.Float32bits(w[2]) {
						t.Fatalf("%s cols %d pf %v: archMM input %d = %x, portable %x", dt, cols, pf, ti, math.Float32bits(out[ti]), math.Float32bits(w[2]))
					}
				}
			}
			if dt == weights.F32 {
				s, ok := archDot(kNEON, m.f32[cols:], x, nl)
				if !ok || math.Float32bits(s) != math.Float32bits(dotPortable(m.f32[cols:], x, nl)) {
					t.Fatalf("cols %d: archDot = %v, %v; portable %v", cols, s, ok, dotPortable(m.f32[cols:], x, nl))
				}
			}
		}
	}
	for _, n := range []int{16, 48, 160} {
		x, d := randVec(rng, n), randVec(rng, n)
		want := append([]float32(nil), d...)
		axpyRef(want, 0.37, x)
		if k := archAxpy(kNEON, d, 0.37, x); k != n {
			t.Fatalf("archAxpy did %d of %d", k, n)
		}
		if i := bitsEqual(d, want); i >= 0 {
			t.Fatalf("archAxpy n %d element %d = %g, want %g", n, i, d[i], want[i])
		}
	}
}

// The NEON lanes keep NaN and infinities where the portable kernels have
// them (an Inf·0 product, an overflowing sum).
func TestNEONSpecialValues(t *testing.T) {
	w := make([]float32, 3*64)
	x := make([]float32, 64)
	for i := range x {
		x[i] = 1
	}
	w[5] = float32(math.Inf(1))
	x[5] = 0                                        // row 0: Inf·0 = NaN
	w[64+40] = math.MaxFloat32                      // row 1: overflow to +Inf
	w[64+41] = math.MaxFloat32                      //
	w[128+7], w[128+39] = float32(math.Inf(-1)), -1 // row 2: −Inf
	m := MatFromF32(3, 64, w)
	got := make([]float32, 3)
	want := make([]float32, 3)
	if !archMV(kNEON, m, 0, 3, 64, x, got) {
		t.Fatal("archMV did not run")
	}
	portableKernels.mv(m, 0, 3, 64, x, want)
	if !math.IsNaN(float64(got[0])) || !math.IsInf(float64(got[1]), 1) || !math.IsInf(float64(got[2]), -1) {
		t.Fatalf("neon = %v, want [NaN +Inf -Inf]", got)
	}
	if !math.IsNaN(float64(want[0])) || want[1] != got[1] || want[2] != got[2] {
		t.Fatalf("portable = %v, neon %v", want, got)
	}
}

// BenchmarkNEONKernels times the NEON inner loops against the portable
// ones on one thread (run on an arm64 machine: go test -bench NEON
// ./infer/ops/); GB/s is the weight bytes streamed.
func BenchmarkNEONKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(31, 32))
	const rows, cols = 1024, 4096
	for _, dt := range []weights.DType{weights.BF16, weights.F16, weights.F32, weights.Q8_0, weights.Q4_K} {
		var m Mat
		if dt == weights.Q8_0 || dt == weights.Q4_K {
			m = randQuantMat(rng, dt, rows, cols)
		} else {
			m = randMat(rng, dt, rows, cols)
		}
		x := randVec(rng, cols)
		dst := make([]float32, rows)
		for _, k := range []*kernelSet{portableKernels, kernelByName("neon")} {
			b.Run(string(dt)+"/"+k.name, func(b *testing.B) {
				b.SetBytes(m.Bytes())
				for b.Loop() {
					m.mvRange(k, 0, rows, dst, x)
				}
			})
		}
	}
}

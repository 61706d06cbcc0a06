package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every kernel variant gives exactly the bits of the reference loop.
func TestAxpyVariantsBitIdentical(t *testing.T) {
	defer setKernel(defaultEngine.KernelName())
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 64, 100, 128, 1000} {
		x := make([]float32, n)
		base := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			base[i] = float32(r.NormFloat64())
		}
		a := float32(r.NormFloat64())
		want := append([]float32(nil), base...)
		axpyRef(want, a, x)
		for _, k := range KernelNames() {
			setKernel(k)
			got := append([]float32(nil), base...)
			Axpy(got, a, x)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("kernel %s n %d: element %d = %v, want %v", k, n, i, got[i], want[i])
				}
			}
		}
	}
}

func BenchmarkAxpy128(b *testing.B) {
	x := make([]float32, 128)
	d := make([]float32, 128)
	for i := 0; i < b.N; i++ {
		Axpy(d, 0.5, x)
	}
}

// Engine.Add gives the bits of the package's Add (one rounding of each
// sum) on every kernel variant, signed zeros, subnormals, overflow to
// infinity and cancellation included.
func TestEngineAddIsAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), 1, -1}
	for _, n := range []int{0, 1, 15, 16, 17, 33, 100, 1000} {
		x, base := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
			base[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
			switch r.IntN(4) {
			case 0:
				x[i] = special[r.IntN(len(special))]
			case 1:
				base[i] = special[r.IntN(len(special))]
			case 2:
				base[i] = -x[i]
			}
		}
		want := append([]float32(nil), base...)
		Add(want, x)
		for _, k := range KernelNames() {
			e, err := NewEngine(EngineOptions{Threads: 1, Kernel: k})
			if err != nil {
				t.Fatal(err)
			}
			got := append([]float32(nil), base...)
			e.Add(got, x)
			e.Close()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("kernel %s n %d: element %d = %v + %v = %v, want %v", k, n, i, base[i], x[i], got[i], want[i])
				}
			}
		}
	}
}

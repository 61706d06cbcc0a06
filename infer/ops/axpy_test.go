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

package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every kernel variant widens bf16 exactly: the halfword as the word's high
// half, NaNs, infinities, denormals and signed zeros included, for every
// length (the vector part, the tail), without writing past the length.
func TestWidenBF16Exact(t *testing.T) {
	defer setKernel(defaultEngine.KernelName())
	r := rand.New(rand.NewPCG(3, 4))
	special := []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x7f80, 0xff80, 0x7fc1, 0xffff, 0x3f80, 0x0080}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 80, 128, 129, 1000} {
		src := make([]uint16, n)
		for i := range src {
			src[i] = uint16(r.Uint32())
			if i < len(special) && n > 20 {
				src[i] = special[i]
			}
		}
		for _, k := range KernelNames() {
			setKernel(k)
			dst := make([]float32, n+3)
			for i := range dst {
				dst[i] = -7
			}
			defaultEngine.WidenBF16(dst, src)
			for i, v := range src {
				if got := math.Float32bits(dst[i]); got != uint32(v)<<16 {
					t.Fatalf("kernel %s n %d: element %d of %04x widened to %08x", k, n, i, v, got)
				}
			}
			for i := n; i < len(dst); i++ {
				if dst[i] != -7 {
					t.Fatalf("kernel %s n %d: wrote element %d past the length", k, n, i)
				}
			}
		}
	}
}

// RoundBF16 rounds as the bf16 compute mode's activations are rounded
// (roundBF16), on the assembly path where there is one, and a round trip
// through WidenBF16 gives back a float32 that RoundBF16 keeps.
func TestRoundBF16MatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 256} {
		src := make([]float32, n)
		for i := range src {
			src[i] = math.Float32frombits(r.Uint32())
		}
		dst := make([]uint16, n)
		defaultEngine.RoundBF16(dst, src)
		w := make([]float32, n)
		defaultEngine.WidenBF16(w, dst)
		again := make([]uint16, n)
		defaultEngine.RoundBF16(again, w)
		for i, v := range src {
			if dst[i] != roundBF16(v) {
				t.Fatalf("n %d: element %d (%08x) rounded to %04x, want %04x", n, i, math.Float32bits(v), dst[i], roundBF16(v))
			}
			if again[i] != dst[i] && w[i] == w[i] && dst[i]&0x7f80 != 0 {
				t.Fatalf("n %d: element %d: %04x widened and rounded again is %04x", n, i, dst[i], again[i])
			}
		}
	}
}

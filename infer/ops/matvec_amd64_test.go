//go:build !purego

package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fma32 (pure Go) rounds exactly like the hardware FMA.
func TestFMA32MatchesHardware(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	r32 := func(spread float64) float32 {
		return float32(rng.NormFloat64() * math.Exp2(math.Round(rng.NormFloat64()*spread)))
	}
	check := func(a, b, c float32) {
		if got, want := fma32(a, b, c), fmaSS(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%x, %x, %x) = %x, hardware %x", math.Float32bits(a), math.Float32bits(b), math.Float32bits(c), math.Float32bits(got), math.Float32bits(want))
		}
	}
	for i := 0; i < 2_000_000; i++ {
		spread := []float64{1, 8, 30, 60}[i%4]
		check(r32(spread), r32(spread), r32(spread))
	}
	// products landing near float32 midpoints of c: a = 1+k·2^-23, b = 2^-24(1±m·2^-23)
	for i := 0; i < 1_000_000; i++ {
		a := float32(1 + float64(rng.IntN(64)-32)*0x1p-23)
		b := float32(math.Ldexp(1+float64(rng.IntN(64)-32)*0x1p-23, -24-rng.IntN(3)))
		c := float32(math.Ldexp(1+float64(rng.IntN(1<<23))*0x1p-23, rng.IntN(3)-1))
		if rng.IntN(2) == 0 {
			b = -b
		}
		check(a, b, c)
	}
	// the float32 subnormal range
	for i := 0; i < 1_000_000; i++ {
		a := math.Float32frombits(rng.Uint32()&0x807fffff | uint32(rng.IntN(40))<<23)
		b := math.Float32frombits(rng.Uint32()&0x807fffff | uint32(100+rng.IntN(40))<<23)
		c := math.Float32frombits(rng.Uint32() & 0x80ffffff)
		check(a, b, c)
	}
}

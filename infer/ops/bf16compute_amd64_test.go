//go:build !purego

package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

func TestDPBF16FeatureCheck(t *testing.T) {
	if hasDPBF16 != (cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16) {
		t.Fatalf("hasDPBF16 %v, cpu says AVX512F %v AVX512_BF16 %v", hasDPBF16, cpu.X86.HasAVX512F, cpu.X86.HasAVX512BF16)
	}
	if !hasDPBF16 {
		t.Skip("no AVX512_BF16 here: the hardware comparisons below skip")
	}
}

// The portable emulation of one VDPBF16PS lane (dpFMA, odd pair first)
// equals the instruction, bit for bit, on random lanes of every kind:
// ordinary values, wide exponent ranges, any finite bf16 (denormals
// included), values near the flush threshold, and accumulators chosen to
// cancel. Also the recorded dpbf16Cases.
func TestDPBF16MatchesHardware(t *testing.T) {
	if !hasDPBF16 {
		t.Skip("no AVX512_BF16")
	}
	for _, c := range dpbf16Cases {
		var acc [16]float32
		var a, b [32]uint16
		acc[0] = math.Float32frombits(c[0])
		a[0], a[1], b[0], b[1] = uint16(c[1]), uint16(c[2]), uint16(c[3]), uint16(c[4])
		dpbf16Lanes(&acc, &a, &b)
		if math.Float32bits(acc[0]) != c[5] {
			t.Errorf("hardware dp(%08x, %04x %04x, %04x %04x) = %08x, recorded %08x", c[0], c[1], c[2], c[3], c[4], math.Float32bits(acc[0]), c[5])
		}
	}
	rng := rand.New(rand.NewPCG(41, 42))
	gen := func(kind int) uint16 {
		switch kind {
		case 0:
			return roundBF16(float32(rng.NormFloat64()))
		case 1:
			return roundBF16(float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(60)-30))))
		case 2: // any finite bf16
			for {
				if v := uint16(rng.Uint32()); v&0x7f80 != 0x7f80 {
					return v
				}
			}
		default: // exponents 0-7: denormals and the smallest normals
			return uint16(rng.IntN(2))<<15 | uint16(rng.IntN(8))<<7 | uint16(rng.IntN(128))
		}
	}
	n := 0
	for it := range 100000 {
		kind := it % 4
		var acc [16]float32
		var a, b [32]uint16
		for i := range a {
			a[i], b[i] = gen(kind), gen(kind)
		}
		for i := range acc {
			switch rng.IntN(4) {
			case 0:
				acc[i] = float32(rng.NormFloat64())
			case 1: // about minus the products: cancellation
				p := float64(bf16ToF32(a[2*i]))*float64(bf16ToF32(b[2*i])) + float64(bf16ToF32(a[2*i+1]))*float64(bf16ToF32(b[2*i+1]))
				acc[i] = float32(-p * (1 + rng.NormFloat64()*1e-3))
			case 2: // denormals and small normals
				acc[i] = math.Float32frombits(rng.Uint32() & 0x80ffffff)
			default:
				acc[i] = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(60)-30)))
			}
			if math.IsInf(float64(acc[i]), 0) || math.IsNaN(float64(acc[i])) {
				acc[i] = 1
			}
		}
		in := acc
		dpbf16Lanes(&acc, &a, &b)
		for i := range acc {
			want := dpbf16Step(in[i], a[2*i], a[2*i+1], b[2*i], b[2*i+1])
			hw := acc[i]
			if math.Float32bits(hw) != math.Float32bits(want) && !(math.IsNaN(float64(hw)) && math.IsNaN(float64(want))) {
				n++
				if n <= 10 {
					t.Errorf("kind %d dp(%08x, w %04x %04x, x %04x %04x): hardware %08x, portable %08x", kind, math.Float32bits(in[i]), a[2*i], a[2*i+1], b[2*i], b[2*i+1], math.Float32bits(hw), math.Float32bits(want))
				}
			}
		}
	}
	if n > 0 {
		t.Fatalf("%d lanes differ", n)
	}
}

// VCVTNEPS2BF16 (the kernels' rounding of the activations) equals
// roundBF16 on every class of float32.
func TestCvtBF16MatchesHardware(t *testing.T) {
	if !hasDPBF16 {
		t.Skip("no AVX512_BF16")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	src := make([]float32, 1<<16+16)
	for i := range src {
		switch i % 4 {
		case 0: // any bits: NaNs, infinities, denormals included
			src[i] = math.Float32frombits(rng.Uint32())
		case 1: // ties and near-ties
			src[i] = math.Float32frombits(rng.Uint32()&^0xffff | uint32(0x7ffe+rng.IntN(4)))
		case 2: // the denormal/normal boundary and the overflow boundary
			src[i] = math.Float32frombits(rng.Uint32()&0x80ffffff | uint32(rng.IntN(2))*0x7f000000)
		default:
			src[i] = float32(rng.NormFloat64())
		}
	}
	got := make([]uint16, len(src))
	if n := archBF16RoundVec(got, src); n != len(src) {
		t.Fatalf("rounded %d of %d", n, len(src))
	}
	for i, f := range src {
		if want := roundBF16(f); got[i] != want {
			t.Fatalf("VCVTNEPS2BF16(%08x) = %04x, roundBF16 %04x", math.Float32bits(f), got[i], want)
		}
	}
	// the encoding with high registers
	var in [16]float32
	var out [16]uint16
	copy(in[:], src[:16])
	cvtBF16Hi(&out, &in)
	for i := range in {
		if want := roundBF16(in[i]); out[i] != want {
			t.Fatalf("cvtBF16Hi lane %d: %04x, want %04x", i, out[i], want)
		}
	}
}

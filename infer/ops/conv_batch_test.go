package ops

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// A batched convolution gives every stream exactly the reference's bits
// (the contract of Forward), whether its windows were gathered with the
// other streams' or run alone, and writes nothing past its outputs: on
// every kernel variant and thread count, for streams of different lengths
// (none included), plain, strided, dilated, partial-panel, transposed and
// depthwise.
func TestConvForwardBatchMatchesReferenceBitForBit(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	type cs struct {
		in, out, k, stride, dil, groups int
		Ts                              []int
	}
	convs := []cs{
		{300, 70, 16, 8, 1, 1, []int{2, 2, 1, 0, 2, 3, 2, 2}}, // deep layer: gathered
		{64, 96, 3, 1, 1, 1, []int{16, 16, 13, 16}},           // gathered, tiles cross streams
		{48, 40, 3, 1, 2, 1, []int{5, 0, 7, 1}},               // dilated, partial panel
		{16, 33, 5, 2, 3, 1, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{1, 64, 7, 1, 1, 1, []int{100, 90}},           // long streams: one by one
		{64, 96, 3, 1, 1, 1, []int{200, 150, 0, 180}}, // one by one, as one parallel job
		{64, 64, 4, 2, 1, 64, []int{1, 1, 2}},         // depthwise
	}
	trs := []cs{
		{96, 48, 16, 8, 1, 1, []int{2, 2, 2, 1, 2, 0, 2, 2, 2}},
		{40, 24, 10, 5, 1, 1, []int{17, 3, 1}},
		{32, 32, 4, 2, 1, 32, []int{1, 1}}, // depthwise
	}
	const sentinel = 12345.5
	segsFor := func(Ts []int, inRows func(int) int, in, outRow int) []ConvSeg {
		var segs []ConvSeg
		for _, T := range Ts {
			src := randSlice(r, inRows(T)*in+3*in) // longer than needed
			dst := make([]float32, T*outRow+5)
			for i := range dst {
				dst[i] = sentinel
			}
			segs = append(segs, ConvSeg{Dst: dst, Src: src, T: T})
		}
		return segs
	}
	check := func(t *testing.T, what string, s ConvSeg, want []float32) {
		t.Helper()
		sameBits(t, what, s.Dst[:len(want)], want)
		for i := len(want); i < len(s.Dst); i++ {
			if s.Dst[i] != sentinel {
				t.Fatalf("%s: value %d past the outputs written", what, i)
			}
		}
	}
	withVariants(t, func(t *testing.T, variant string, threads int) {
		var sc ConvBatchScratch
		for _, tc := range convs {
			w := randSlice(r, tc.out*tc.in/tc.groups*tc.k)
			b := randSlice(r, tc.out)
			c, err := NewConv1d(defaultEngine, weights.Float32Tensor("w", []int{tc.out, tc.in / tc.groups, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, tc.dil, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			segs := segsFor(tc.Ts, c.InRows, tc.in, tc.out)
			wants := make([][]float32, len(segs))
			for i, s := range segs {
				if tc.groups == 1 {
					wants[i] = convRef(w, tc.out, tc.in, tc.k, b, s.Src, s.T, tc.stride, tc.dil)
				} else {
					wants[i] = make([]float32, s.T*tc.out)
					c.Forward(defaultEngine, wants[i], s.Src, s.T, nil)
				}
			}
			c.ForwardBatch(defaultEngine, segs, &sc)
			for i, s := range segs {
				check(t, fmt.Sprintf("%s, %d threads, conv %+v, stream %d", variant, threads, tc, i), s, wants[i])
			}
		}
		for _, tc := range trs {
			w := randSlice(r, tc.in*tc.out/tc.groups*tc.k)
			b := randSlice(r, tc.out)
			c, err := NewConvTranspose1d(defaultEngine, weights.Float32Tensor("w", []int{tc.in, tc.out / tc.groups, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			segs := segsFor(tc.Ts, func(T int) int { return c.Window() - 1 + T }, tc.in, tc.stride*tc.out)
			wants := make([][]float32, len(segs))
			for i, s := range segs {
				if tc.groups == 1 {
					wants[i] = convTrRef(w, tc.in, tc.out, tc.k, b, s.Src, s.T, tc.stride)
				} else {
					wants[i] = make([]float32, s.T*tc.stride*tc.out)
					c.Forward(defaultEngine, wants[i], s.Src, s.T, nil)
				}
			}
			c.ForwardBatch(defaultEngine, segs, &sc)
			for i, s := range segs {
				check(t, fmt.Sprintf("%s, %d threads, conv_transpose %+v, stream %d", variant, threads, tc, i), s, wants[i])
			}
		}
	})
}

// Windows are gathered exactly when that saves a fifth of the tiles: the
// codec's deep layers (a step or two per stream) are, its long first
// layers (hundreds of steps) and a single stream are not.
func TestGatherTilesDecision(t *testing.T) {
	seg := func(Ts ...int) []ConvSeg {
		var s []ConvSeg
		for _, T := range Ts {
			s = append(s, ConvSeg{T: T})
		}
		return s
	}
	cases := []struct {
		segs []ConvSeg
		tr   int
		want bool
	}{
		{seg(2, 2, 2, 2, 2, 2, 2, 2), 12, true},
		{seg(16, 16, 16, 16, 16, 16, 16, 16), 12, true}, // 16 tiles → 11
		{seg(1920, 1920, 1920, 1920), 12, false},
		{seg(2), 12, false},
		{seg(6, 6), 6, false},
		{seg(0, 0), 12, false},
		{seg(1, 1), 12, true},
	}
	for _, c := range cases {
		if got := gatherTiles(c.segs, c.tr); got != c.want {
			t.Errorf("gatherTiles(%v, %d) = %v, want %v", c.segs, c.tr, got, c.want)
		}
	}
}

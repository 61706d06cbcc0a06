package ops

import (
	"math"
	"math/rand"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

func randSlice(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func closeRel(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var maxErr, maxRef float64
	for i := range got {
		maxErr = math.Max(maxErr, math.Abs(float64(got[i]-want[i])))
		maxRef = math.Max(maxRef, math.Abs(float64(want[i])))
	}
	if maxErr > 1e-5*math.Max(maxRef, 1) {
		t.Fatalf("%s: max abs err %g (max |ref| %g)", what, maxErr, maxRef)
	}
}

// Naive torch.nn.functional.conv1d on channel-major x [In][Tin] (padding 0),
// result time-major [T][Out].
func naiveConv(w []float32, out, inG, k int, bias []float32, x []float32, in, tin, stride, dil, groups int) ([]float32, int) {
	T := (tin-(k-1)*dil-1)/stride + 1
	y := make([]float32, T*out)
	outG := out / groups
	for t := 0; t < T; t++ {
		for o := 0; o < out; o++ {
			g := o / outG
			var s float64
			for i := 0; i < inG; i++ {
				for j := 0; j < k; j++ {
					s += float64(w[(o*inG+i)*k+j]) * float64(x[(g*inG+i)*tin+t*stride+j*dil])
				}
			}
			if bias != nil {
				s += float64(bias[o])
			}
			y[t*out+o] = float32(s)
		}
	}
	return y, T
}

// Naive conv_transpose1d on channel-major x [In][T], full output time-major.
func naiveConvTr(w []float32, in, outG, k int, bias []float32, x []float32, T, stride, groups int) []float32 {
	out := outG * groups
	OT := (T-1)*stride + k
	y := make([]float64, OT*out)
	inG := in / groups
	for i := 0; i < in; i++ {
		g := i / inG
		for o := 0; o < outG; o++ {
			for t := 0; t < T; t++ {
				for j := 0; j < k; j++ {
					y[(t*stride+j)*out+g*outG+o] += float64(w[(i*outG+o)*k+j]) * float64(x[i*T+t])
				}
			}
		}
	}
	r := make([]float32, len(y))
	for p := 0; p < OT; p++ {
		for o := 0; o < out; o++ {
			v := y[p*out+o]
			if bias != nil {
				v += float64(bias[o])
			}
			r[p*out+o] = float32(v)
		}
	}
	return r
}

func timeMajor(x []float32, c, t int) []float32 {
	y := make([]float32, len(x))
	for i := 0; i < c; i++ {
		for j := 0; j < t; j++ {
			y[j*c+i] = x[i*t+j]
		}
	}
	return y
}

func TestConv1dMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cases := []struct{ in, out, k, stride, dil, groups, tin int }{
		{1, 8, 7, 1, 1, 1, 30},
		{8, 16, 8, 4, 1, 1, 45},
		{16, 8, 3, 1, 1, 1, 13},
		{16, 8, 3, 1, 2, 1, 20},
		{8, 16, 1, 1, 1, 1, 9},
		{32, 32, 4, 2, 1, 1, 4},
		{5, 3, 5, 5, 1, 1, 27},
		{6, 6, 4, 2, 1, 6, 11},
		{6, 6, 3, 1, 3, 6, 11},
		{64, 32, 3, 1, 1, 1, 50},
		{64, 32, 3, 1, 3, 1, 50},
		{20, 7, 1, 1, 1, 1, 1},
	}
	var sc ConvScratch
	for _, tc := range cases {
		inG := tc.in / tc.groups
		w := randSlice(r, tc.out*inG*tc.k)
		b := randSlice(r, tc.out)
		x := randSlice(r, tc.in*tc.tin)
		want, T := naiveConv(w, tc.out, inG, tc.k, b, x, tc.in, tc.tin, tc.stride, tc.dil, tc.groups)
		c, err := NewConv1d(weights.Float32Tensor("w", []int{tc.out, inG, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, tc.dil, tc.groups)
		if err != nil {
			t.Fatal(err)
		}
		if c.InRows(T) > tc.tin {
			t.Fatalf("%+v: InRows(%d) = %d > %d", tc, T, c.InRows(T), tc.tin)
		}
		got := make([]float32, T*tc.out)
		c.Forward(got, timeMajor(x, tc.in, tc.tin), T, nil)
		closeRel(t, "conv1d", got, want)
		// A reused scratch gives the same values, bit for bit.
		again := make([]float32, T*tc.out)
		c.Forward(again, timeMajor(x, tc.in, tc.tin), T, &sc)
		c.Forward(again, timeMajor(x, tc.in, tc.tin), T, &sc)
		for i := range got {
			if got[i] != again[i] {
				t.Fatalf("%+v: value %d: %g with scratch, %g without", tc, i, again[i], got[i])
			}
		}
	}
}

func TestConvTranspose1dMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	cases := []struct{ in, outG, k, stride, groups, T int }{
		{16, 8, 16, 8, 1, 2},
		{16, 8, 8, 4, 1, 9},
		{7, 3, 10, 5, 1, 5},
		{4, 1, 4, 2, 4, 3},
		{32, 1, 4, 2, 32, 1},
		{64, 32, 12, 6, 1, 16},
	}
	var sc ConvScratch
	for _, tc := range cases {
		w := randSlice(r, tc.in*tc.outG*tc.k)
		out := tc.outG * tc.groups
		b := randSlice(r, out)
		x := randSlice(r, tc.in*tc.T)
		want := naiveConvTr(w, tc.in, tc.outG, tc.k, b, x, tc.T, tc.stride, tc.groups)
		c, err := NewConvTranspose1d(weights.Float32Tensor("w", []int{tc.in, tc.outG, tc.k}, w), weights.Float32Tensor("b", []int{out}, b), tc.stride, tc.groups)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, c.OutRows(tc.T)*out)
		c.Accumulate(got, timeMajor(x, tc.in, tc.T), tc.T, &sc)
		for p := 0; p < c.OutRows(tc.T); p++ {
			Add(got[p*out:(p+1)*out], c.Bias)
		}
		closeRel(t, "conv_transpose1d", got, want)
	}
}

func TestConvRejectsBadGroups(t *testing.T) {
	w := weights.Float32Tensor("w", []int{4, 2, 3}, make([]float32, 24))
	if _, err := NewConv1d(w, nil, 1, 1, 2); err == nil {
		t.Fatal("grouped (non-depthwise) conv accepted")
	}
	if _, err := NewConvTranspose1d(w, nil, 1, 2); err == nil {
		t.Fatal("grouped (non-depthwise) conv transpose accepted")
	}
}

func BenchmarkConv1d(b *testing.B) {
	r := rand.New(rand.NewSource(3))
	in, out, k, T := 256, 128, 3, 96
	c, _ := NewConv1d(weights.Float32Tensor("w", []int{out, in, k}, randSlice(r, out*in*k)), nil, 1, 1, 1)
	x := randSlice(r, c.InRows(T)*in)
	y := make([]float32, T*out)
	var sc ConvScratch
	b.ReportAllocs()
	for b.Loop() {
		c.Forward(y, x, T, &sc)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(T*out*in*k)*1e3, "ps/MAC")
}

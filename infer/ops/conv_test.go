package ops

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
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
		c, err := NewConv1d(defaultEngine, weights.Float32Tensor("w", []int{tc.out, inG, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, tc.dil, tc.groups)
		if err != nil {
			t.Fatal(err)
		}
		if c.InRows(T) > tc.tin {
			t.Fatalf("%+v: InRows(%d) = %d > %d", tc, T, c.InRows(T), tc.tin)
		}
		got := make([]float32, T*tc.out)
		c.Forward(defaultEngine, got, timeMajor(x, tc.in, tc.tin), T, nil)
		closeRel(t, "conv1d", got, want)
		// A reused scratch gives the same values, bit for bit.
		again := make([]float32, T*tc.out)
		c.Forward(defaultEngine, again, timeMajor(x, tc.in, tc.tin), T, &sc)
		c.Forward(defaultEngine, again, timeMajor(x, tc.in, tc.tin), T, &sc)
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
		{5, 3, 7, 3, 1, 4}, // kernel not a multiple of the stride
		{6, 5, 3, 4, 1, 3}, // kernel shorter than the stride
		{4, 1, 4, 2, 4, 3},
		{32, 1, 4, 2, 32, 1},
		{6, 1, 5, 2, 6, 4},
		{64, 32, 12, 6, 1, 16},
	}
	var sc ConvScratch
	for _, tc := range cases {
		w := randSlice(r, tc.in*tc.outG*tc.k)
		out := tc.outG * tc.groups
		b := randSlice(r, out)
		x := randSlice(r, tc.in*tc.T)
		want := naiveConvTr(w, tc.in, tc.outG, tc.k, b, x, tc.T, tc.stride, tc.groups)
		c, err := NewConvTranspose1d(defaultEngine, weights.Float32Tensor("w", []int{tc.in, tc.outG, tc.k}, w), weights.Float32Tensor("b", []int{out}, b), tc.stride, tc.groups)
		if err != nil {
			t.Fatal(err)
		}
		// Zero history, the T steps, then zeros until the full output is out.
		m := c.Window()
		steps := tc.T + m - 1
		src := make([]float32, (m-1+steps)*tc.in)
		copy(src[(m-1)*tc.in:], timeMajor(x, tc.in, tc.T))
		got := make([]float32, steps*tc.stride*out)
		c.Forward(defaultEngine, got, src, steps, &sc)
		full := (tc.T-1)*tc.stride + tc.k
		closeRel(t, "conv_transpose1d", got[:full*out], want)
		// Streaming step by step gives the same values, bit for bit.
		for s := 0; s < steps; s++ {
			one := make([]float32, tc.stride*out)
			c.Forward(defaultEngine, one, src[s*tc.in:], 1, nil)
			for i, v := range one {
				if v != got[s*tc.stride*out+i] {
					t.Fatalf("%+v: step %d value %d: %g alone, %g in a block", tc, s, i, v, got[s*tc.stride*out+i])
				}
			}
		}
	}
}

func TestConvRejectsBadGroups(t *testing.T) {
	w := weights.Float32Tensor("w", []int{4, 2, 3}, make([]float32, 24))
	if _, err := NewConv1d(nil, w, nil, 1, 1, 2); err == nil {
		t.Fatal("grouped (non-depthwise) conv accepted")
	}
	if _, err := NewConvTranspose1d(nil, w, nil, 1, 2); err == nil {
		t.Fatal("grouped (non-depthwise) conv transpose accepted")
	}
}

// BenchmarkConv runs convolutions of the real Mimi's SEANet at the sizes
// one 80 ms frame gives them (output steps T).
func BenchmarkConv(b *testing.B) {
	r := rand.New(rand.NewSource(3))
	for _, tc := range []struct {
		name                  string
		in, out, k, stride, T int
		tr                    bool
	}{
		{"enc0_1x64k7", 1, 64, 7, 1, 1920, false},
		{"res64_64x32k3", 64, 32, 3, 1, 1920, false},
		{"res64_32x64k1", 32, 64, 1, 1, 1920, false},
		{"down_64x128k8s4", 64, 128, 8, 4, 480, false},
		{"res256_256x128k3", 256, 128, 3, 1, 96, false},
		{"down_512x1024k16s8", 512, 1024, 16, 8, 2, false},
		{"dectr_1024x512k16s8", 1024, 512, 16, 8, 2, true},
		{"dectr_128x64k8s4", 128, 64, 8, 4, 480, true},
		{"dec_64x1k3", 64, 1, 3, 1, 1920, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// Weights larger than the caches stream from memory in a frame
			// (the codec reads ~300 MB of weights per frame): rotate through
			// enough copies of those to defeat the 32 MiB L3.
			copies := 1
			if 4*tc.in*tc.out*tc.k > 4<<20 {
				copies = 4
			}
			var runs []func(sc *ConvScratch)
			var rows, cols int
			for range copies {
				w := randSlice(r, tc.out*tc.in*tc.k)
				if tc.tr {
					c, _ := NewConvTranspose1d(defaultEngine, weights.Float32Tensor("w", []int{tc.in, tc.out, tc.k}, w), nil, tc.stride, 1)
					x := randSlice(r, (c.Window()-1+tc.T)*tc.in)
					y := make([]float32, tc.T*tc.stride*tc.out)
					runs = append(runs, func(sc *ConvScratch) { c.Forward(defaultEngine, y, x, tc.T, sc) })
					rows, cols = tc.T*tc.stride, tc.k/tc.stride*tc.in
				} else {
					c, _ := NewConv1d(defaultEngine, weights.Float32Tensor("w", []int{tc.out, tc.in, tc.k}, w), nil, tc.stride, 1, 1)
					x := randSlice(r, c.InRows(tc.T)*tc.in)
					y := make([]float32, tc.T*tc.out)
					runs = append(runs, func(sc *ConvScratch) { c.Forward(defaultEngine, y, x, tc.T, sc) })
					rows, cols = tc.T, tc.k*tc.in
				}
			}
			i := 0
			run := func(sc *ConvScratch) {
				runs[i%len(runs)](sc)
				i++
			}
			for _, th := range []int{1, runtime.NumCPU()} {
				b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
					saved := defaultEngine.Threads()
					setThreads(th)
					defer setThreads(saved)
					var sc ConvScratch
					run(&sc)
					b.ReportAllocs()
					for b.Loop() {
						run(&sc)
					}
					b.ReportMetric(2*float64(rows*tc.out*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}

// convRef is the convolution contract as a plain loop over the torch-layout
// kernel [Out][In][K]: one FMA chain per output over taps, then channels,
// then + bias (0 when none).
func convRef(w []float32, out, in, k int, bias []float32, x []float32, T, stride, dil int) []float32 {
	y := make([]float32, T*out)
	for t := 0; t < T; t++ {
		for o := 0; o < out; o++ {
			var acc float32
			for kk := 0; kk < k; kk++ {
				for i := 0; i < in; i++ {
					acc = fma32(w[(o*in+i)*k+kk], x[(t*stride+kk*dil)*in+i], acc)
				}
			}
			var b float32
			if bias != nil {
				b = bias[o]
			}
			y[t*out+o] = acc + b
		}
	}
	return y
}

// convTrRef is the transposed convolution contract over torch weights
// [In][Out][K]: output step t·S+p, channel o, is one FMA chain over the
// window rows r (input step t−(m−1)+r) and channels i, through tap
// p+(m−1−r)·S (weight 0 past the kernel), then + bias. x starts with m−1
// history rows.
func convTrRef(w []float32, in, out, k int, bias []float32, x []float32, T, S int) []float32 {
	m := (k + S - 1) / S
	y := make([]float32, T*S*out)
	for t := 0; t < T; t++ {
		for p := 0; p < S; p++ {
			for o := 0; o < out; o++ {
				var acc float32
				for r := 0; r < m; r++ {
					for i := 0; i < in; i++ {
						var wv float32
						if tap := p + (m-1-r)*S; tap < k {
							wv = w[(i*out+o)*k+tap]
						}
						acc = fma32(wv, x[(t+r)*in+i], acc)
					}
				}
				var b float32
				if bias != nil {
					b = bias[o]
				}
				y[(t*S+p)*out+o] = acc + b
			}
		}
	}
	return y
}

// withVariants runs f under every kernel variant and thread count.
func withVariants(t *testing.T, f func(t *testing.T, variant string, threads int)) {
	saved, savedThreads := defaultEngine.KernelName(), defaultEngine.Threads()
	defer func() {
		setKernel(saved)
		setThreads(savedThreads)
	}()
	for _, name := range KernelNames() {
		setKernel(name)
		for _, th := range []int{1, 2, 3} {
			setThreads(th)
			f(t, name, th)
		}
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d: %g (%#x), reference %g (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// Every kernel variant and thread count computes exactly the contract.
func TestConvKernelsMatchReferenceBitForBit(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	type cs struct{ in, out, k, stride, dil, T int }
	convs := []cs{
		{1, 64, 7, 1, 1, 100},  // the first SEANet conv
		{64, 32, 3, 1, 1, 77},  // residual branch (partial last tile)
		{32, 64, 1, 1, 1, 61},  // residual 1×1
		{64, 128, 8, 4, 1, 25}, // downsampling
		{48, 40, 3, 1, 2, 30},  // dilated, partial panel
		{64, 1, 3, 1, 1, 130},  // one output channel
		{300, 70, 16, 8, 1, 2}, // few steps, long windows
		{512, 96, 3, 1, 1, 13}, // parallel, 1 tile + remainder
		{16, 33, 5, 2, 3, 40},  // dilated and strided
	}
	trs := []struct{ in, out, k, stride, T int }{
		{64, 32, 8, 4, 30},
		{96, 48, 16, 8, 2},
		{40, 24, 10, 5, 17},
		{12, 7, 7, 3, 9},
	}
	withVariants(t, func(t *testing.T, variant string, threads int) {
		var sc ConvScratch
		for _, tc := range convs {
			w := randSlice(r, tc.out*tc.in*tc.k)
			b := randSlice(r, tc.out)
			c, err := NewConv1d(defaultEngine, weights.Float32Tensor("w", []int{tc.out, tc.in, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, tc.dil, 1)
			if err != nil {
				t.Fatal(err)
			}
			x := randSlice(r, c.InRows(tc.T)*tc.in)
			want := convRef(w, tc.out, tc.in, tc.k, b, x, tc.T, tc.stride, tc.dil)
			got := make([]float32, tc.T*tc.out)
			c.Forward(defaultEngine, got, x, tc.T, &sc)
			sameBits(t, fmt.Sprintf("%s, %d threads, conv %+v", variant, threads, tc), got, want)
			c.Forward(defaultEngine, got, x, tc.T, nil)
			sameBits(t, fmt.Sprintf("%s, %d threads, conv %+v without scratch", variant, threads, tc), got, want)
		}
		for _, tc := range trs {
			w := randSlice(r, tc.in*tc.out*tc.k)
			b := randSlice(r, tc.out)
			c, err := NewConvTranspose1d(defaultEngine, weights.Float32Tensor("w", []int{tc.in, tc.out, tc.k}, w), weights.Float32Tensor("b", []int{tc.out}, b), tc.stride, 1)
			if err != nil {
				t.Fatal(err)
			}
			x := randSlice(r, (c.Window()-1+tc.T)*tc.in)
			want := convTrRef(w, tc.in, tc.out, tc.k, b, x, tc.T, tc.stride)
			got := make([]float32, tc.T*tc.stride*tc.out)
			c.Forward(defaultEngine, got, x, tc.T, &sc)
			sameBits(t, fmt.Sprintf("%s, %d threads, conv_transpose %+v", variant, threads, tc), got, want)
		}
	})
}

// A convolution without bias adds +0.
func TestConvWithoutBias(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	w := randSlice(r, 40*24*3)
	c, err := NewConv1d(defaultEngine, weights.Float32Tensor("w", []int{40, 24, 3}, w), nil, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := randSlice(r, c.InRows(20)*24)
	got := make([]float32, 20*40)
	c.Forward(defaultEngine, got, x, 20, nil)
	sameBits(t, "conv without bias", got, convRef(w, 40, 24, 3, nil, x, 20, 1, 1))
}

// ELUTo is within 2 ulp of ELU (float64 expm1) and bit-identical on every
// variant, at every length (vector body and scalar tail).
func TestELUTo(t *testing.T) {
	var xs []float32
	for v := float32(-30); v < 3; v += 0.00137 {
		xs = append(xs, v)
	}
	for e := -40; e < 0; e++ {
		v := float32(math.Ldexp(1, e))
		xs = append(xs, -v, v, -1.5*v, math.Nextafter32(-v, 0))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), -17.3, -88, -100, float32(math.Inf(-1)), 1e30, float32(math.Inf(1)),
		-0.34657359, -0.34657360, 0.34657359, -0.6931472, -1.0397208)
	want := make([]float32, len(xs))
	copy(want, xs)
	ELU(want)
	ulp := func(a, b float32) int64 {
		ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
		if ia < 0 {
			ia = math.MinInt32 - ia
		}
		if ib < 0 {
			ib = math.MinInt32 - ib
		}
		if ia > ib {
			return ia - ib
		}
		return ib - ia
	}
	ref := make([]float32, len(xs))
	for i, v := range xs {
		ref[i] = eluPortable(v)
		if d := ulp(ref[i], want[i]); d > 2 {
			t.Errorf("ELU(%g) = %g, exact %g: %d ulp", v, ref[i], want[i], d)
		}
	}
	withVariants(t, func(t *testing.T, variant string, threads int) {
		if threads != 1 {
			return
		}
		for _, n := range []int{len(xs), 1, 7, 8, 15, 16, 17, 33} {
			got := make([]float32, n)
			defaultEngine.ELUTo(got, xs[len(xs)-n:])
			sameBits(t, fmt.Sprintf("%s ELUTo, %d values", variant, n), got, ref[len(xs)-n:])
			in := append([]float32(nil), xs[:n]...)
			defaultEngine.ELUTo(in, in) // in place
			sameBits(t, fmt.Sprintf("%s ELUTo in place, %d values", variant, n), in, ref[:n])
		}
	})
}

// ELUTo passes NaN through on every variant, as ELU does.
func TestELUToNaN(t *testing.T) {
	withVariants(t, func(t *testing.T, variant string, threads int) {
		x := make([]float32, 37)
		for i := range x {
			x[i] = float32(math.NaN())
		}
		defaultEngine.ELUTo(x, x)
		for i, v := range x {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("%s: defaultEngine.ELUTo(NaN) = %g at %d", variant, v, i)
			}
		}
	})
}

// A kernel of packParallel weights or more is packed on the default
// engine's pool, a panel a chunk: every panel (the last one partial)
// holds its outputs' weights at [j][c] and zeros past the last output,
// as the one-goroutine packing lays them out.
func TestConvPackParallel(t *testing.T) {
	if saved := defaultEngine.Threads(); saved < 2 {
		setThreads(2)
		defer setThreads(saved)
	}
	const out, taps, in = 100, 2, packParallel/200 + 7 // 4 panels
	L := taps * in
	weight := func(o, j int) float32 { return float32(o*L + j + 1) }
	bias := func(o int) float32 { return -float32(o + 1) }
	p := newConvPack(defaultEngine, out, taps, in, func(o int, dst []float32) {
		for j := range dst {
			dst[j] = weight(o, j)
		}
	}, bias)
	if L*out < packParallel || p.panels != 4 {
		t.Fatalf("%d weights in %d panels: not the parallel case", L*out, p.panels)
	}
	for pi := range p.panels {
		for j := range L {
			for c := range panelCols {
				o, want := pi*panelCols+c, float32(0)
				if o < out {
					want = weight(o, j)
				}
				if got := p.w[(pi*L+j)*panelCols+c]; got != want {
					t.Fatalf("panel %d, j %d, output %d: %g, want %g", pi, j, c, got, want)
				}
			}
		}
	}
	for o := range p.panels * panelCols {
		want := float32(0)
		if o < out {
			want = bias(o)
		}
		if p.bias[o] != want {
			t.Fatalf("bias %d: %g, want %g", o, p.bias[o], want)
		}
	}
}

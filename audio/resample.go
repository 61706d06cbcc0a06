package audio

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// Resampler design.
//
// The reference resamples with sphn.resample, i.e. rubato's FftFixedInOut
// (FFT resampling in 1024-frame chunks), whose output is delayed by the FFT
// filter and padded to whole chunks. This port uses its own band-limited
// resampler instead, so a voice prompt or user input that is not already at
// 24 kHz feeds slightly different samples to Mimi than the reference does (the
// fixtures are all 24 kHz, where both are the identity).
//
// Ours is a polyphase windowed-sinc (Kaiser) filter evaluated at the exact
// rational positions n·from/to: zero phase (no delay), output length
// ceil(len·to/from), samples outside the input taken as zero, float64
// accumulation, deterministic (no dither, same result whatever the number of
// goroutines). The low-pass is designed on the lower of the two rates: pass
// band to 0.90 of its Nyquist frequency, stop band from its Nyquist frequency
// on with ≥ 110 dB design attenuation (Kaiser β = 0.1102·(A−8.7)), cutoff
// 0.95·Nyquist, each polyphase branch normalised to unit DC gain.
const (
	rsPass    = 0.90  // pass-band edge, fraction of the lower Nyquist frequency
	rsStop    = 1.00  // stop-band edge, fraction of the lower Nyquist frequency
	rsAttenDB = 110.0 // Kaiser design attenuation
)

// Sample rates an input may have: below MinRate a file is not audio (a
// 1 Hz WAV once resampled for more than ten minutes), above MaxRate no
// converter writes one.
const (
	MinRate = 1000
	MaxRate = 768000
)

// Resample converts x from rate from to rate to (Hz). It returns x itself when
// the rates are equal.
func Resample(x []float32, from, to int) ([]float32, error) {
	return ResampleContext(context.Background(), x, from, to)
}

// ResampleContext is Resample that stops, returning ctx.Err(), within a
// chunk of output samples of ctx being cancelled.
func ResampleContext(ctx context.Context, x []float32, from, to int) ([]float32, error) {
	if from < MinRate || to < MinRate || from > MaxRate || to > MaxRate {
		return nil, fmt.Errorf("resample: sample rates %d → %d Hz: rates must be in %d..%d Hz", from, to, MinRate, MaxRate)
	}
	if from == to {
		return x, nil
	}
	g := gcd(from, to)
	up, down := to/g, from/g // output n sits at input position n·down/up
	nOut := int((int64(len(x))*int64(up) + int64(down) - 1) / int64(down))
	out := make([]float32, nOut)
	if nOut == 0 {
		return out, nil
	}
	k := newKernel(up, down)

	// Output samples are computed in chunks claimed from a counter; each is
	// written by exactly one goroutine, so the result does not depend on
	// how many there are. Cancellation is seen between chunks.
	const chunk = 1 << 14
	workers := min(runtime.GOMAXPROCS(0), (nOut+chunk-1)/chunk)
	var next atomic.Int64
	work := func() {
		for ctx.Err() == nil {
			s := int(next.Add(chunk) - chunk)
			if s >= nOut {
				return
			}
			k.run(x, out, s, min(s+chunk, nOut))
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// kernel holds the polyphase filter for one up/down pair.
type kernel struct {
	up, down int
	half     int     // taps per branch = 2·half, input indices i0−half+1 … i0+half
	fc       float64 // cutoff in cycles per input sample ×2 (1 = input Nyquist)
	beta     float64
	i0beta   float64
	table    []float64 // up × 2·half taps, nil when computed on the fly
	once     []sync.Once
}

// maxTable bounds the precomputed polyphase table (float64 entries); odd rate
// pairs with more phases compute their taps per output sample instead.
const maxTable = 1 << 21

func newKernel(up, down int) *kernel {
	// Ratio of the input rate to the lower of the two rates.
	scale := 1.0
	if down > up {
		scale = float64(down) / float64(up)
	}
	// Kaiser length for the transition band (rsStop−rsPass)·π rad per
	// low-rate sample, scaled to input samples.
	dw := (rsStop - rsPass) * math.Pi
	nLow := (rsAttenDB - 7.95) / (2.285 * dw)
	half := int(math.Ceil(nLow / 2 * scale))
	k := &kernel{
		up:   up,
		down: down,
		half: half,
		fc:   (rsPass + rsStop) / 2 / scale,
		beta: 0.1102 * (rsAttenDB - 8.7),
	}
	k.i0beta = besselI0(k.beta)
	if up*2*half <= maxTable {
		k.table = make([]float64, up*2*half)
		k.once = make([]sync.Once, up)
	}
	return k
}

// taps fills dst (2·half entries) with the branch for fractional position
// p/up: dst[j] multiplies input sample i0−half+1+j.
func (k *kernel) taps(p int, dst []float64) {
	frac := float64(p) / float64(k.up)
	sum := 0.0
	for j := range dst {
		t := float64(j-k.half+1) - frac // distance from the output position
		r := t / float64(k.half)
		if r <= -1 || r >= 1 {
			dst[j] = 0
			continue
		}
		w := besselI0(k.beta*math.Sqrt(1-r*r)) / k.i0beta
		h := k.fc * sinc(k.fc*t) * w
		dst[j] = h
		sum += h
	}
	for j := range dst {
		dst[j] /= sum
	}
}

func (k *kernel) branch(p int, scratch []float64) []float64 {
	if k.table == nil {
		k.taps(p, scratch)
		return scratch
	}
	n := 2 * k.half
	b := k.table[p*n : (p+1)*n]
	k.once[p].Do(func() { k.taps(p, b) })
	return b
}

func (k *kernel) run(x []float32, out []float32, s, e int) {
	n := 2 * k.half
	var scratch []float64
	if k.table == nil {
		scratch = make([]float64, n)
	}
	up, down := int64(k.up), int64(k.down)
	for o := s; o < e; o++ {
		pos := int64(o) * down
		i0 := int(pos / up)
		p := int(pos % up)
		h := k.branch(p, scratch)
		first := i0 - k.half + 1
		j0, j1 := 0, n
		if first < 0 {
			j0 = -first
		}
		if first+n > len(x) {
			j1 = len(x) - first
		}
		acc := 0.0
		for j := j0; j < j1; j++ {
			acc += float64(x[first+j]) * h[j]
		}
		out[o] = float32(acc)
	}
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// besselI0 is the modified Bessel function of the first kind, order 0, by its
// power series (converges quickly for the arguments a Kaiser window uses).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; k < 500; k++ {
		term *= q / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

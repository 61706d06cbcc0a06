package compare

import "math"

// Log-mel analysis parameters (see the package comment for the full
// definition of the log-mel spectral distance).
const (
	MelFFTSize = 1024 // STFT window and FFT length (samples)
	MelHop     = 256  // STFT hop (samples)
	MelBands   = 80   // mel bands, HTK scale, 0 Hz … rate/2
	// MelTopDB is the dynamic range kept below the loudest mel bin of the
	// reference: both log-mel spectrograms are floored at
	// max(reference mel power)·10^(−MelTopDB/10).
	MelTopDB = 60.0
	// MelAbsFloor is the absolute lower bound of that floor (mel power of a
	// float signal in [−1, 1] analysed with the unnormalised Hann STFT), so
	// that an all-silent reference still has a finite floor.
	MelAbsFloor = 1e-10
)

// MelSpectrogram returns the mel power spectrogram of x, indexed
// [frame][band]: frame t is the periodic-Hann-windowed segment
// x[t·MelHop : t·MelHop+MelFFTSize] (zero-padded past the end of x; no
// centring), there are 1 + ceil(max(len(x)−MelFFTSize, 0)/MelHop) frames (none
// for an empty x), and band b holds Σ_k W[b][k]·|X_t[k]|² over the rfft bins
// k = 0…MelFFTSize/2 with the HTK triangular filters W of melFilterbank.
func MelSpectrogram(x []float32, rate int) [][]float64 {
	n := len(x)
	if n == 0 {
		return nil
	}
	frames := 1
	if n > MelFFTSize {
		frames += (n - MelFFTSize + MelHop - 1) / MelHop
	}
	fb := melFilterbank(rate)
	win := hann(MelFFTSize)
	buf := make([]complex128, MelFFTSize)
	pow := make([]float64, MelFFTSize/2+1)
	tw := twiddles(MelFFTSize)
	out := make([][]float64, frames)
	for t := range out {
		s := t * MelHop
		for i := range buf {
			v := 0.0
			if s+i < n {
				v = float64(x[s+i]) * win[i]
			}
			buf[i] = complex(v, 0)
		}
		fft(buf, tw)
		for k := range pow {
			re, im := real(buf[k]), imag(buf[k])
			pow[k] = re*re + im*im
		}
		row := make([]float64, MelBands)
		for b, f := range fb {
			s := 0.0
			for k := f.lo; k < f.lo+len(f.w); k++ {
				s += f.w[k-f.lo] * pow[k]
			}
			row[b] = s
		}
		out[t] = row
	}
	return out
}

// melFilter is one triangular filter: weights w for rfft bins lo, lo+1, ….
type melFilter struct {
	lo int
	w  []float64
}

// HTK mel scale.
func hzToMel(f float64) float64 { return 2595 * math.Log10(1+f/700) }
func melToHz(m float64) float64 { return 700 * (math.Pow(10, m/2595) - 1) }

// melFilterbank returns the MelBands HTK triangular filters for rfft bins
// 0…MelFFTSize/2 at the given rate (each stored as its non-zero span): band b
// has corners f_b, f_{b+1}, f_{b+2}, where f_0…f_{MelBands+1} are equally
// spaced on the HTK mel scale m = 2595·log10(1 + f/700) from 0 Hz to rate/2,
// and weight max(0, min((f−f_b)/(f_{b+1}−f_b), (f_{b+2}−f)/(f_{b+2}−f_{b+1})))
// at bin frequency f = k·rate/MelFFTSize (peak 1, no area normalisation;
// librosa.filters.mel(htk=True, norm=None) uses the same formula).
func melFilterbank(rate int) []melFilter {
	nb := MelFFTSize/2 + 1
	top := hzToMel(float64(rate) / 2)
	fp := make([]float64, MelBands+2)
	for i := range fp {
		fp[i] = melToHz(top * float64(i) / float64(MelBands+1))
	}
	fb := make([]melFilter, MelBands)
	for b := range fb {
		lo, hi := -1, -1
		ws := make([]float64, nb)
		for k := 0; k < nb; k++ {
			f := float64(k) * float64(rate) / MelFFTSize
			up := (f - fp[b]) / (fp[b+1] - fp[b])
			down := (fp[b+2] - f) / (fp[b+2] - fp[b+1])
			w := math.Max(0, math.Min(up, down))
			ws[k] = w
			if w > 0 {
				if lo < 0 {
					lo = k
				}
				hi = k
			}
		}
		if lo < 0 {
			fb[b] = melFilter{}
			continue
		}
		fb[b] = melFilter{lo: lo, w: ws[lo : hi+1]}
	}
	return fb
}

// MelFloor returns the floor used for both log-mel spectrograms when ref is
// the reference's mel power spectrogram: max(max(ref)·10^(−MelTopDB/10),
// MelAbsFloor).
func MelFloor(ref [][]float64) float64 {
	mx := 0.0
	for _, row := range ref {
		for _, v := range row {
			if v > mx {
				mx = v
			}
		}
	}
	return math.Max(mx*math.Pow(10, -MelTopDB/10), MelAbsFloor)
}

// LogMel returns 10·log10(max(m, floor)) element by element (dB).
func LogMel(m [][]float64, floor float64) [][]float64 {
	out := make([][]float64, len(m))
	for t, row := range m {
		o := make([]float64, len(row))
		for b, v := range row {
			o[b] = 10 * math.Log10(math.Max(v, floor))
		}
		out[t] = o
	}
	return out
}

// logMelInPlace is LogMel overwriting m.
func logMelInPlace(m [][]float64, floor float64) {
	for _, row := range m {
		for b, v := range row {
			row[b] = 10 * math.Log10(math.Max(v, floor))
		}
	}
}

// hann returns the periodic Hann window 0.5 − 0.5·cos(2πi/n), i = 0…n−1
// (scipy.signal.get_window("hann", n)).
func hann(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
	}
	return w
}

func twiddles(n int) []complex128 {
	tw := make([]complex128, n/2)
	for i := range tw {
		s, c := math.Sincos(-2 * math.Pi * float64(i) / float64(n))
		tw[i] = complex(c, s)
	}
	return tw
}

// fft is an in-place iterative radix-2 FFT (len(a) a power of two, tw from
// twiddles(len(a))): a[k] ← Σ_n a[n]·e^{−2πikn/N}.
func fft(a []complex128, tw []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		half, step := size/2, n/size
		for s := 0; s < n; s += size {
			for k := 0; k < half; k++ {
				t := tw[k*step] * a[s+k+half]
				a[s+k+half] = a[s+k] - t
				a[s+k] += t
			}
		}
	}
}

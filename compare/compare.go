// Package compare measures how far a candidate output of pp-offline is from a
// reference (golden) output, for regression checks in CI, and turns the
// measurements into a verdict: exact, equivalent (numerically drifted but
// within thresholds) or different.
//
// # Audio metrics
//
// Reference r and candidate c are float32 sample slices at the same rate.
// All sums are accumulated in float64. Let n = min(len(r), len(c)); every
// metric except the length difference is computed over the common part
// r[:n], c[:n] (a length mismatch still makes the verdict "different").
//
//   - Sample-exact: len(r) == len(c) and r[i] == c[i] for every i.
//   - Max abs difference: max_i |c[i] − r[i]|.
//   - SNR (dB): 10·log10(Σ r² / Σ (c − r)²); +Inf when the difference is all
//     zero, −Inf when r is all zero but c is not.
//   - SI-SDR (dB), scale-invariant signal-to-distortion ratio (Le Roux et
//     al., 2019, no mean removal): α = ⟨c, r⟩/⟨r, r⟩, target = α·r,
//     SI-SDR = 10·log10(‖target‖² / ‖c − target‖²); +Inf when c is an exact
//     multiple of r (c = 2r, c = r, …), −Inf when c ⟂ r or r is all zero
//     (+Inf if c is all zero too).
//   - Log-mel spectral distance (dB): STFT with a 1024-sample periodic Hann
//     window, hop 256, no centring, the last frame zero-padded
//     (1 + ceil(max(n−1024, 0)/256) frames); power |X|² of the 513 rfft
//     bins; 80 triangular mel filters on the HTK scale (m = 2595·log10(1 +
//     f/700)) spanning 0 Hz … rate/2, peak 1, not area-normalised
//     (librosa.filters.mel(htk=True, norm=None)); L = 10·log10(max(M, F))
//     with one floor F for both signals, F = max(max(M_ref)·10⁻⁶, 1e−10),
//     i.e. 60 dB (MelTopDB) below the loudest mel bin of the reference;
//     distance = mean over all frames and bands of |L_cand − L_ref|. See
//     MelSpectrogram.
//   - Length difference: len(c) − len(r) samples.
//   - First differing frame: ⌊i/F⌋ for the first i < n with r[i] ≠ c[i]
//     (i = n when the common part is equal but the lengths differ; −1 when
//     sample-exact), in frames of F = round(0.08·rate) samples (80 ms, the
//     model's frame: 1920 samples at 24 kHz).
//   - Per-frame errors (80 ms frames of the common part, used to mark the
//     differing region): the frame SNR 10·log10((Σ r²/n) / (Σ_frame (c−r)² /
//     frame length)) — the global SNR the whole signal would have if every
//     frame erred like this one, so all frames ≥ T implies SNR ≥ T — and the
//     frame log-mel distance, the mean |ΔL| over the STFT frames whose centre
//     (start + 512) lies in the frame.
//
// # Transcript metrics
//
// Transcripts are the JSON lists of text pieces (one per 80 ms frame) that
// pp-offline writes. Entries are compared as whole strings: the edit distance
// is the Levenshtein distance over the entries (insert, delete, substitute,
// each costing 1) and the first differing token is the first index where the
// lists differ (the shorter length when one is a prefix of the other, −1
// when equal).
//
// # Verdict
//
// Exact: sample-exact audio and identical transcripts. Equivalent: equal
// lengths, SNR ≥ MinSNRdB, log-mel distance ≤ MaxMelDistanceDB and transcript
// edit distance ≤ MaxTextEdits. Different: anything else. The defaults are
// DefaultMinSNRdB, DefaultMaxMelDistanceDB and DefaultMaxTextEdits.
package compare

import "math"

// FrameSeconds is the duration of one model frame (12.5 Hz).
const FrameSeconds = 0.08

// FrameSamples returns the number of samples in one 80 ms frame at rate
// (round(0.08·rate), at least 1): 1920 at 24 kHz.
func FrameSamples(rate int) int {
	f := int(math.Round(float64(rate) * FrameSeconds))
	if f < 1 {
		f = 1
	}
	return f
}

// AudioMetrics are the measurements between a reference and a candidate
// signal; see the package comment for their definitions.
type AudioMetrics struct {
	SampleRate       int
	ReferenceSamples int
	CandidateSamples int
	LengthDiff       int // CandidateSamples − ReferenceSamples
	Compared         int // samples in the common part, min of the two lengths
	Exact            bool
	MaxAbsDiff       float64
	SNRdB            float64
	SISDRdB          float64
	MelDistanceDB    float64
	FirstDiffSample  int // −1 when sample-exact
	FirstDiffFrame   int // in 80 ms frames; −1 when sample-exact
	FrameSamples     int // samples per 80 ms frame
	// Frames holds the per-frame errors of the ceil(Compared/FrameSamples)
	// 80 ms frames of the common part.
	Frames []FrameError
}

// FrameError is the error measured in one 80 ms frame.
type FrameError struct {
	SNRdB         float64 // global reference power over the frame's error power
	MelDistanceDB float64 // mean |ΔL| of the STFT frames centred in the frame
}

// Audio compares candidate with reference, both sampled at rate Hz.
func Audio(ref, cand []float32, rate int) AudioMetrics {
	n := min(len(ref), len(cand))
	fs := FrameSamples(rate)
	m := AudioMetrics{
		SampleRate:       rate,
		ReferenceSamples: len(ref),
		CandidateSamples: len(cand),
		LengthDiff:       len(cand) - len(ref),
		Compared:         n,
		FrameSamples:     fs,
		FirstDiffSample:  -1,
		FirstDiffFrame:   -1,
	}
	r, c := ref[:n], cand[:n]
	for i := range r {
		// Equal values, or the same bits (a NaN is its own equal here: a
		// file compared with itself is exact whatever it holds).
		if r[i] != c[i] && math.Float32bits(r[i]) != math.Float32bits(c[i]) {
			m.FirstDiffSample = i
			break
		}
	}
	if m.FirstDiffSample < 0 && len(ref) != len(cand) {
		m.FirstDiffSample = n
	}
	m.Exact = m.FirstDiffSample < 0
	if m.FirstDiffSample >= 0 {
		m.FirstDiffFrame = m.FirstDiffSample / fs
	}
	m.MaxAbsDiff = MaxAbsDiff(r, c)
	m.SNRdB = SNR(r, c)
	m.SISDRdB = SISDR(r, c)

	nf := (n + fs - 1) / fs
	m.Frames = make([]FrameError, nf)
	var er float64
	for _, v := range r {
		er += float64(v) * float64(v)
	}
	for f := range m.Frames {
		s, e := f*fs, min((f+1)*fs, n)
		var ee float64
		for i := s; i < e; i++ {
			d := float64(c[i]) - float64(r[i])
			ee += d * d
		}
		m.Frames[f].SNRdB = ratioDB(er/float64(n), ee/float64(e-s))
	}

	lr, lc := logMelPair(r, c, rate)
	m.MelDistanceDB = melDistance(lr, lc)
	for f, d := range frameMel(lr, lc, nf, fs) {
		m.Frames[f].MelDistanceDB = d
	}
	return m
}

// ratioDB returns 10·log10(num/den) with +Inf for den = 0 and −Inf for
// num = 0 < den.
func ratioDB(num, den float64) float64 {
	switch {
	case den == 0:
		return math.Inf(1)
	case num == 0:
		return math.Inf(-1)
	}
	return 10 * math.Log10(num/den)
}

// MaxAbsDiff returns max |c[i] − r[i]| over the common part.
func MaxAbsDiff(r, c []float32) float64 {
	n := min(len(r), len(c))
	mx := 0.0
	for i := 0; i < n; i++ {
		d := math.Abs(float64(c[i]) - float64(r[i]))
		if d > mx || math.IsNaN(d) {
			mx = d
		}
	}
	return mx
}

// SNR returns 10·log10(Σ r² / Σ (c − r)²) in dB over the common part.
func SNR(r, c []float32) float64 {
	n := min(len(r), len(c))
	var er, ee float64
	for i := 0; i < n; i++ {
		x := float64(r[i])
		d := float64(c[i]) - x
		er += x * x
		ee += d * d
	}
	return ratioDB(er, ee)
}

// SISDR returns the scale-invariant signal-to-distortion ratio in dB over
// the common part (see the package comment).
func SISDR(r, c []float32) float64 {
	n := min(len(r), len(c))
	var rr, rc, cc float64
	for i := 0; i < n; i++ {
		x, y := float64(r[i]), float64(c[i])
		rr += x * x
		rc += x * y
		cc += y * y
	}
	if rr == 0 {
		if cc == 0 {
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	a := rc / rr
	var et, ee float64
	for i := 0; i < n; i++ {
		t := a * float64(r[i])
		d := float64(c[i]) - t
		et += t * t
		ee += d * d
	}
	if et == 0 { // c ⟂ r, or c all zero
		return math.Inf(-1)
	}
	return ratioDB(et, ee)
}

// MelDistance returns the log-mel spectral distance in dB between the common
// parts of r and c (see the package comment).
func MelDistance(r, c []float32, rate int) float64 {
	n := min(len(r), len(c))
	lr, lc := logMelPair(r[:n], c[:n], rate)
	return melDistance(lr, lc)
}

// logMelPair returns the log-mel spectrograms (dB) of r and c, both floored
// with the floor derived from r.
func logMelPair(r, c []float32, rate int) (lr, lc [][]float64) {
	mr := MelSpectrogram(r, rate)
	mc := MelSpectrogram(c, rate)
	floor := MelFloor(mr)
	logMelInPlace(mr, floor)
	logMelInPlace(mc, floor)
	return mr, mc
}

func melDistance(lr, lc [][]float64) float64 {
	var s float64
	var cnt int
	for t := range lr {
		for b := range lr[t] {
			s += math.Abs(lc[t][b] - lr[t][b])
			cnt++
		}
	}
	if cnt == 0 {
		return 0
	}
	return s / float64(cnt)
}

// frameMel returns, for each of nf 80 ms frames of fs samples, the mean
// |ΔL| over the STFT frames whose centre lies in it (the STFT frame with the
// nearest centre when none does).
func frameMel(lr, lc [][]float64, nf, fs int) []float64 {
	out := make([]float64, nf)
	if len(lr) == 0 {
		return out
	}
	sum := make([]float64, nf)
	cnt := make([]int, nf)
	per := make([]float64, len(lr))
	for t := range lr {
		var s float64
		for b := range lr[t] {
			s += math.Abs(lc[t][b] - lr[t][b])
		}
		per[t] = s / float64(len(lr[t]))
		f := min((t*MelHop+MelFFTSize/2)/fs, nf-1)
		sum[f] += per[t]
		cnt[f]++
	}
	for f := range out {
		if cnt[f] > 0 {
			out[f] = sum[f] / float64(cnt[f])
			continue
		}
		mid := f*fs + fs/2
		t := (mid - MelFFTSize/2 + MelHop/2) / MelHop
		t = max(0, min(t, len(per)-1))
		out[f] = per[t]
	}
	return out
}

// TextMetrics are the measurements between a reference and a candidate
// transcript (JSON lists of text pieces).
type TextMetrics struct {
	ReferenceTokens int
	CandidateTokens int
	EditDistance    int // Levenshtein distance over whole entries
	FirstDiffToken  int // first index where the lists differ; −1 when equal
	Exact           bool
}

// Text compares a candidate transcript with a reference one.
func Text(ref, cand []string) TextMetrics {
	m := TextMetrics{ReferenceTokens: len(ref), CandidateTokens: len(cand), FirstDiffToken: -1}
	n := min(len(ref), len(cand))
	for i := 0; i < n; i++ {
		if ref[i] != cand[i] {
			m.FirstDiffToken = i
			break
		}
	}
	if m.FirstDiffToken < 0 && len(ref) != len(cand) {
		m.FirstDiffToken = n
	}
	m.Exact = m.FirstDiffToken < 0
	m.EditDistance = Levenshtein(ref, cand)
	return m
}

// Levenshtein returns the edit distance between a and b counting insertions,
// deletions and substitutions of whole entries.
func Levenshtein(a, b []string) int {
	// Strip the common prefix and suffix: cheap, and transcripts that
	// drifted usually differ in a short stretch.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(a) == 0 {
		return len(b)
	}
	if len(b) == 0 {
		return len(a)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

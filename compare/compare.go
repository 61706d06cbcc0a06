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
//   - Sample-exact: the same channel count, len(r) == len(c) and r[i] and
//     c[i] the same for every i: equal, or both NaN (a file holding NaN is
//     exact with itself; NaN against a number is a difference).
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
// NaN and infinite samples: a pair of the same non-finite value (both NaN,
// or the same infinity) adds nothing to the sums below and does not differ;
// a non-finite sample on one side only (or opposite infinities) is an
// infinite error: max abs difference +Inf, SNR and SI-SDR −Inf, log-mel
// distance +Inf (the spectra are taken with non-finite samples as zero).
//
// Channels: AudioChannels compares channel by channel and keeps the worst
// value of each metric; a different channel count is a difference.
//
// # Transcript metrics
//
// Transcripts are the JSON lists of text pieces (one per 80 ms frame) that
// pp-offline writes. Entries are compared as whole strings: the edit distance
// is the Levenshtein distance over the entries (insert, delete, substitute,
// each costing 1) and the first differing token is the first index where the
// lists differ (the shorter length when one is a prefix of the other, −1
// when equal). The distance is found by diagonal transition (Ukkonen,
// Myers): O((n+m)·d) time for distance d, O(n+m) memory, stopped after a
// fixed number of steps (about 1.3 s on the development machine, at any
// length); lists that are then still unaligned and too long for the
// quadratic programme (n·m > 10⁸) get a lower bound of the distance
// (EditDistanceAtLeast), and the verdict is "different" since the distance
// cannot be shown to be within the threshold.
//
// # Verdict
//
// Exact: sample-exact audio and identical transcripts. Equivalent: equal
// lengths, SNR ≥ MinSNRdB, log-mel distance ≤ MaxMelDistanceDB and transcript
// edit distance ≤ MaxTextEdits. Different: anything else. The defaults are
// DefaultMinSNRdB, DefaultMaxMelDistanceDB and DefaultMaxTextEdits.
package compare

import (
	"math"
	"slices"
)

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
	SampleRate int
	// ReferenceChannels and CandidateChannels are the channel counts (1
	// for Audio); a difference makes the comparison different.
	ReferenceChannels int
	CandidateChannels int
	ReferenceSamples  int
	CandidateSamples  int
	LengthDiff        int // CandidateSamples − ReferenceSamples
	Compared          int // samples in the common part, min of the two lengths
	Exact             bool
	MaxAbsDiff        float64
	SNRdB             float64
	SISDRdB           float64
	MelDistanceDB     float64
	FirstDiffSample   int // −1 when sample-exact
	FirstDiffFrame    int // in 80 ms frames; −1 when sample-exact
	FrameSamples      int // samples per 80 ms frame
	// NonFiniteDiffs counts the samples of the common part where one side
	// only is NaN or infinite (or the two are opposite infinities);
	// FirstNonFinite is the first of them, −1 when none.
	NonFiniteDiffs int
	FirstNonFinite int
	// Frames holds the per-frame errors of the ceil(Compared/FrameSamples)
	// 80 ms frames of the common part.
	Frames []FrameError
}

// FrameError is the error measured in one 80 ms frame.
type FrameError struct {
	SNRdB         float64 // global reference power over the frame's error power
	MelDistanceDB float64 // mean |ΔL| of the STFT frames centred in the frame
}

// Audio compares candidate with reference, both one channel sampled at
// rate Hz. For files with several channels use AudioChannels.
func Audio(ref, cand []float32, rate int) AudioMetrics {
	n := min(len(ref), len(cand))
	fs := FrameSamples(rate)
	m := AudioMetrics{
		SampleRate:        rate,
		ReferenceChannels: 1,
		CandidateChannels: 1,
		ReferenceSamples:  len(ref),
		CandidateSamples:  len(cand),
		LengthDiff:        len(cand) - len(ref),
		Compared:          n,
		FrameSamples:      fs,
		FirstDiffSample:   -1,
		FirstDiffFrame:    -1,
		FirstNonFinite:    -1,
	}
	r, c := ref[:n], cand[:n]
	for i := range r {
		if !same(r[i], c[i]) {
			m.FirstDiffSample = i
			break
		}
	}
	if m.FirstDiffSample >= 0 {
		for i := m.FirstDiffSample; i < n; i++ {
			if !same(r[i], c[i]) && !(finite(r[i]) && finite(c[i])) {
				if m.NonFiniteDiffs == 0 {
					m.FirstNonFinite = i
				}
				m.NonFiniteDiffs++
			}
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
		if finite(v) {
			er += float64(v) * float64(v)
		}
	}
	for f := range m.Frames {
		s, e := f*fs, min((f+1)*fs, n)
		var ee float64
		for i := s; i < e; i++ {
			_, d2 := pairTerms(r[i], c[i])
			ee += d2
		}
		m.Frames[f].SNRdB = ratioDB(er/float64(n), ee/float64(e-s))
	}

	lr, lc := logMelPair(r, c, rate)
	m.MelDistanceDB = melDistance(lr, lc)
	for f, d := range frameMel(lr, lc, nf, fs) {
		m.Frames[f].MelDistanceDB = d
	}
	if m.NonFiniteDiffs > 0 {
		// The spectra were taken with the non-finite samples as zero; a
		// NaN or Inf on one side only is an infinite spectral difference.
		m.MelDistanceDB = math.Inf(1)
		for i := m.FirstNonFinite; i < n; i++ {
			if !same(r[i], c[i]) && !(finite(r[i]) && finite(c[i])) {
				m.Frames[i/fs].MelDistanceDB = math.Inf(1)
			}
		}
	}
	return m
}

// AudioChannels compares every channel of candidate with the same channel
// of reference (each a slice of one channel's samples, all sampled at rate
// Hz). A different channel count makes the comparison not exact (every
// sample of a missing channel differs: FirstDiffSample is at most 0) and
// Evaluate says so in the reasons; the metrics are taken over the channels
// both have, each the worst over the channels: the lowest SNR and SI-SDR,
// the highest max abs difference and log-mel distance, the earliest first
// difference, and per 80 ms frame the lowest SNR and highest log-mel
// distance. With one channel on each side it returns Audio(ref[0], cand[0]).
func AudioChannels(ref, cand [][]float32, rate int) AudioMetrics {
	nc := min(len(ref), len(cand))
	if nc == 0 {
		var r, c []float32
		if len(ref) > 0 {
			r = ref[0]
		}
		if len(cand) > 0 {
			c = cand[0]
		}
		m := Audio(r, c, rate)
		m.ReferenceChannels, m.CandidateChannels = len(ref), len(cand)
		markChannelDiff(&m)
		return m
	}
	m := Audio(ref[0], cand[0], rate)
	for ch := 1; ch < nc; ch++ {
		o := Audio(ref[ch], cand[ch], rate)
		m.Exact = m.Exact && o.Exact
		m.MaxAbsDiff = max(m.MaxAbsDiff, o.MaxAbsDiff)
		m.SNRdB = min(m.SNRdB, o.SNRdB)
		m.SISDRdB = min(m.SISDRdB, o.SISDRdB)
		m.MelDistanceDB = max(m.MelDistanceDB, o.MelDistanceDB)
		if o.FirstDiffSample >= 0 && (m.FirstDiffSample < 0 || o.FirstDiffSample < m.FirstDiffSample) {
			m.FirstDiffSample, m.FirstDiffFrame = o.FirstDiffSample, o.FirstDiffFrame
		}
		if o.NonFiniteDiffs > 0 && (m.NonFiniteDiffs == 0 || o.FirstNonFinite < m.FirstNonFinite) {
			m.FirstNonFinite = o.FirstNonFinite
		}
		m.NonFiniteDiffs += o.NonFiniteDiffs
		for f := range min(len(m.Frames), len(o.Frames)) {
			m.Frames[f].SNRdB = min(m.Frames[f].SNRdB, o.Frames[f].SNRdB)
			m.Frames[f].MelDistanceDB = max(m.Frames[f].MelDistanceDB, o.Frames[f].MelDistanceDB)
		}
	}
	m.ReferenceChannels, m.CandidateChannels = len(ref), len(cand)
	markChannelDiff(&m)
	return m
}

// markChannelDiff makes metrics of files with different channel counts not
// exact.
func markChannelDiff(m *AudioMetrics) {
	if m.ReferenceChannels == m.CandidateChannels {
		return
	}
	m.Exact = false
	if m.FirstDiffSample < 0 {
		m.FirstDiffSample, m.FirstDiffFrame = 0, 0
	}
}

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// same reports whether two samples are equal for the comparison: equal
// values (0 and −0 included, +Inf and +Inf) or both NaN. NaN against a
// number is a difference.
func same(r, c float32) bool { return r == c || (r != r && c != c) }

// pairTerms returns one sample pair's contributions to the reference power
// and to the error power. Finite pairs give r² and (c − r)². A pair of the
// same non-finite value (both NaN, or the same infinity) adds nothing to
// either: it is not a measurable signal, and it does not differ. A
// non-finite sample on one side only (or opposite infinities) is an
// infinite error, and only a finite reference sample counts as power.
func pairTerms(r, c float32) (r2, d2 float64) {
	if finite(r) && finite(c) {
		x := float64(r)
		d := float64(c) - x
		return x * x, d * d
	}
	if same(r, c) {
		return 0, 0
	}
	if finite(r) {
		r2 = float64(r) * float64(r)
	}
	return r2, math.Inf(1)
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

// MaxAbsDiff returns max |c[i] − r[i]| over the common part: 0 for a pair
// of the same non-finite value, +Inf for a non-finite sample on one side
// only.
func MaxAbsDiff(r, c []float32) float64 {
	n := min(len(r), len(c))
	mx := 0.0
	for i := 0; i < n; i++ {
		_, d2 := pairTerms(r[i], c[i])
		mx = max(mx, math.Sqrt(d2))
	}
	return mx
}

// SNR returns 10·log10(Σ r² / Σ (c − r)²) in dB over the common part, with
// the non-finite samples taken as pairTerms says (−Inf when one side only
// has a NaN or an infinity).
func SNR(r, c []float32) float64 {
	n := min(len(r), len(c))
	var er, ee float64
	for i := 0; i < n; i++ {
		r2, d2 := pairTerms(r[i], c[i])
		er += r2
		ee += d2
	}
	if math.IsInf(ee, 1) {
		return math.Inf(-1)
	}
	return ratioDB(er, ee)
}

// SISDR returns the scale-invariant signal-to-distortion ratio in dB over
// the common part (see the package comment): −Inf when one side only has a
// NaN or an infinity at some sample; pairs of the same non-finite value are
// left out.
func SISDR(r, c []float32) float64 {
	n := min(len(r), len(c))
	var rr, rc, cc float64
	for i := 0; i < n; i++ {
		if !finite(r[i]) || !finite(c[i]) {
			if !same(r[i], c[i]) {
				return math.Inf(-1)
			}
			continue
		}
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
		if !finite(r[i]) || !finite(c[i]) {
			continue
		}
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
// parts of r and c (see the package comment): +Inf when one side only has a
// NaN or an infinity at some sample.
func MelDistance(r, c []float32, rate int) float64 {
	n := min(len(r), len(c))
	for i := 0; i < n; i++ {
		if !same(r[i], c[i]) && !(finite(r[i]) && finite(c[i])) {
			return math.Inf(1)
		}
	}
	lr, lc := logMelPair(r[:n], c[:n], rate)
	return melDistance(lr, lc)
}

// zeroNonFinite returns x with its NaN and infinite samples set to zero (x
// itself when it has none).
func zeroNonFinite(x []float32) []float32 {
	var out []float32
	for i, v := range x {
		if !finite(v) {
			if out == nil {
				out = append([]float32(nil), x...)
			}
			out[i] = 0
		}
	}
	if out == nil {
		return x
	}
	return out
}

// logMelPair returns the log-mel spectrograms (dB) of r and c, both floored
// with the floor derived from r; NaN and infinite samples are taken as zero
// (the callers account for those that differ).
func logMelPair(r, c []float32, rate int) (lr, lc [][]float64) {
	r, c = zeroNonFinite(r), zeroNonFinite(c)
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
	// EditDistanceAtLeast is set when the transcripts were too different
	// to align within the alignment's work bound (alignWork steps):
	// EditDistance is then a proven lower bound, not the distance.
	EditDistanceAtLeast bool
	FirstDiffToken      int // first index where the lists differ; −1 when equal
	Exact               bool
}

// Text compares a candidate transcript with a reference one. The edit
// distance is exact unless the alignment would take more than alignWork
// steps (see editDistance) and the lists are too long for the quadratic
// dynamic programme (more than dpCells cells); then EditDistance is the
// lower bound reached and EditDistanceAtLeast is set.
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
	d, exact := levenshteinBounded(ref, cand, alignWork)
	m.EditDistance, m.EditDistanceAtLeast = d, !exact
	return m
}

// alignWork bounds the steps (diagonal updates plus token comparisons) of
// one transcript alignment: about 1.3 s here (6.5 ns a step on unrelated
// transcripts, BenchmarkTextMillion), whatever the lengths; about 14,000
// edits when every step is a diagonal update. A
// variable so that tests can lower it.
var alignWork int64 = 200_000_000

// dpCells is the largest len(a)·len(b) (after the common prefix and
// suffix) for which an alignment stopped by alignWork is finished by the
// quadratic dynamic programme instead (≈ 0.3 s here). Lists this short are
// always exact, as before the bound.
var dpCells int64 = 100_000_000

// Levenshtein returns the edit distance between a and b counting insertions,
// deletions and substitutions of whole entries. It is exact, in
// O((len(a)+len(b))·d) time for distance d and O(len(a)+len(b)) memory (no
// work bound: Text bounds it).
func Levenshtein(a, b []string) int {
	d, _ := levenshteinBounded(a, b, math.MaxInt64)
	return d
}

// levenshteinBounded returns the edit distance of a and b and true, or,
// when the alignment needs more than work steps and the lists are too long
// for the dynamic programme, a lower bound of the distance and false.
func levenshteinBounded(a, b []string, work int64) (int, bool) {
	// Strip the common prefix and suffix: cheap, and transcripts that
	// drifted usually differ in a short stretch.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(a) == 0 {
		return len(b), true
	}
	if len(b) == 0 {
		return len(a), true
	}
	// Tokens as small integers: comparisons in the slides are then one
	// load each, and the lists take 4 bytes an entry.
	ids := map[string]int32{}
	intern := func(x []string) []int32 {
		out := make([]int32, len(x))
		for i, s := range x {
			id, ok := ids[s]
			if !ok {
				id = int32(len(ids))
				ids[s] = id
			}
			out[i] = id
		}
		return out
	}
	ia, ib := intern(a), intern(b)
	d, ok := editDistance(ia, ib, work)
	if !ok && int64(len(a))*int64(len(b)) <= dpCells {
		return levenshteinDP(ia, ib), true
	}
	return d, ok
}

// editDistance is the diagonal-transition form of the unit-cost edit
// distance (Ukkonen 1985; Myers 1986 for insert/delete): for d = 0, 1, …
// and each diagonal k = j − i with |k| ≤ d, row[k] is the furthest row i
// such that a[:i] and b[:i+k] are within d edits, found from round d−1's
// neighbours (substitution: row[k]+1, insertion: row[k−1], deletion:
// row[k+1]+1) and then slid along the diagonal over equal tokens. The
// distance is the first d at which diagonal len(b)−len(a) reaches row
// len(a). On one diagonal the slides of successive rounds cover disjoint
// stretches, so the time is O((n+m)·d) and the memory O(d) (two rounds).
// It stops once work steps (diagonal updates plus comparisons) are spent
// and then returns the lower bound it proved (every round below the
// current one ended short of the end) and false.
func editDistance(a, b []int32, work int64) (int, bool) {
	n, m := len(a), len(b)
	target := m - n
	i0 := 0
	for i0 < n && i0 < m && a[i0] == b[i0] {
		i0++
	}
	work -= int64(i0) + 1
	if target == 0 && i0 == n {
		return 0, true
	}
	// Round d's row of diagonal k, for k in [−d−2, d+2], is at
	// buf[k+d+2]; diagonals not reached (|k| > d, or off the grid) hold
	// unreached, which loses every max.
	const unreached = math.MinInt32 / 2
	prev := []int32{unreached, unreached, int32(i0), unreached, unreached}
	var cur []int32
	for d := 1; ; d++ {
		cur = slices.Grow(cur[:0], 2*d+5)[:2*d+5]
		for i := range cur {
			cur[i] = unreached
		}
		lo, hi := max(-d, -n), min(d, m)
		for k := lo; k <= hi; k++ {
			// Round d−1's diagonal k is at prev[k+d+1].
			p := k + d + 1
			i := max(prev[p]+1, prev[p+1]+1, prev[p-1]) // substitution, deletion, insertion
			i = min(i, int32(n), int32(m-k))
			s, j := int(i), int(i)+k
			for s < n && j < m && a[s] == b[j] {
				s++
				j++
			}
			work -= int64(s-int(i)) + 1
			if k == target && s == n {
				return d, true
			}
			if work < 0 {
				// No round below d reached the end.
				return max(d, abs(target)), false
			}
			cur[k+d+2] = int32(s)
		}
		prev, cur = cur, prev
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// levenshteinDP is the textbook dynamic programme over two rows: O(n·m)
// time, O(m) memory.
func levenshteinDP(a, b []int32) int {
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

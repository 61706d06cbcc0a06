package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
)

const (
	goldenWAV = "../testdata/tiny/expected/run_pt/output.wav" // noise-like model output
	inputWAV  = "../testdata/tiny/input.wav"                  // speech with digital silence
	rate      = 24000
)

func readMono(t *testing.T, path string) []float32 {
	t.Helper()
	c, err := audio.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.SampleRate != rate {
		t.Fatalf("%s: rate %d", path, c.SampleRate)
	}
	return c.Channels[0]
}

// approx checks |got − want| ≤ tol·max(1, |want|) (relative for large
// values, absolute near zero); infinities must match exactly.
func approx(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
		return
	}
	if !(math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))) {
		t.Errorf("%s = %.12g, want %.12g (tol %g)", name, got, want, tol)
	}
}

// addNoise returns x plus Gaussian white noise at db relative to x's RMS,
// rounded to 16-bit PCM as if written to and read back from a WAV file.
func addNoise(x []float32, db float64, seed uint64) []float32 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	sigma := math.Sqrt(e/float64(len(x))) * math.Pow(10, db/20)
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]float32, len(x))
	for i, v := range x {
		y := math.Round((float64(v) + sigma*rng.NormFloat64()) * 32768)
		out[i] = float32(math.Max(-32768, math.Min(32767, y)) / 32768)
	}
	return out
}

func shift(x []float32, by int) []float32 {
	out := make([]float32, len(x))
	copy(out[by:], x)
	return out
}

func sine(n int, amp, freq float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/rate))
	}
	return x
}

// Closed forms: for r = A·sin(2π·440t) and e = B·sin(2π·1000t) over a whole
// second (integer numbers of periods, so ⟨r, e⟩ = 0), SNR(r, r+e) =
// SI-SDR(r, r+e) = 20·log10(A/B); SI-SDR(r, g·r+e) = 20·log10(g·A/B) and
// SNR(r, g·r+e) = 10·log10(A² / ((g−1)²A² + B²)).
func TestClosedFormSines(t *testing.T) {
	const A, B = 0.5, 0.005
	r := sine(rate, A, 440)
	e := sine(rate, B, 1000)
	c := make([]float32, rate)
	for i := range c {
		c[i] = r[i] + e[i]
	}
	approx(t, "SNR(r, r+e)", SNR(r, c), 40, 1e-4)
	approx(t, "SI-SDR(r, r+e)", SISDR(r, c), 40, 1e-4)
	const g = 0.7
	for i := range c {
		c[i] = float32(g*float64(r[i])) + e[i]
	}
	approx(t, "SI-SDR(r, 0.7r+e)", SISDR(r, c), 20*math.Log10(g*A/B), 1e-4)
	approx(t, "SNR(r, 0.7r+e)", SNR(r, c), 10*math.Log10(A*A/((g-1)*(g-1)*A*A+B*B)), 1e-4)
	approx(t, "max abs diff", MaxAbsDiff(r, c), 0.3*A+B, 1e-3)
}

// A sine plus Gaussian noise of variance σ² has SNR 10·log10((A²/2)/σ²);
// with 10 s of samples the estimate is within ±0.02 dB (1σ ≈ 0.006 dB).
func TestSineWithNoiseSNR(t *testing.T) {
	const A, sigma = 0.5, 0.002
	r := sine(10*rate, A, 440)
	rng := rand.New(rand.NewPCG(1, 2))
	c := make([]float32, len(r))
	for i := range c {
		c[i] = r[i] + float32(sigma*rng.NormFloat64())
	}
	want := 10 * math.Log10(A*A/2/(sigma*sigma)) // 47.96 dB
	approx(t, "SNR", SNR(r, c), want, 0.02/want)
	approx(t, "SI-SDR", SISDR(r, c), want, 0.02/want)
	m := Audio(r, c, rate)
	if m.Exact || m.FirstDiffSample != 0 || m.FirstDiffFrame != 0 {
		t.Errorf("noisy copy: exact %v first diff %d/%d", m.Exact, m.FirstDiffSample, m.FirstDiffFrame)
	}
	// The per-frame SNR measures the same thing frame by frame.
	for i, f := range m.Frames {
		if math.Abs(f.SNRdB-want) > 0.6 {
			t.Errorf("frame %d SNR %.2f, want ≈ %.2f", i, f.SNRdB, want)
		}
	}
}

func TestScaledCopies(t *testing.T) {
	r := readMono(t, goldenWAV)
	scaled := func(g float32) []float32 {
		c := make([]float32, len(r))
		for i, v := range r {
			c[i] = g * v
		}
		return c
	}
	// Exact multiples (power-of-two gains, or −1) are exactly projected.
	for _, g := range []float32{2, 0.5, -1} {
		if s := SISDR(r, scaled(g)); !math.IsInf(s, 1) {
			t.Errorf("SI-SDR(r, %g·r) = %v, want +Inf", g, s)
		}
	}
	if s := SISDR(r, scaled(0.3)); s < 120 {
		t.Errorf("SI-SDR(r, 0.3·r) = %v, want > 120 dB (float32 rounding only)", s)
	}
	// SNR(r, g·r) = −20·log10|1 − g|.
	approx(t, "SNR(r, 0.5r)", SNR(r, scaled(0.5)), 20*math.Log10(2), 1e-12)
	approx(t, "SNR(r, -r)", SNR(r, scaled(-1)), -20*math.Log10(2), 1e-12)
	// Nothing in output.wav is floored, so every log-mel bin moves by
	// exactly 20·log10(2).
	approx(t, "mel(r, 0.5r)", MelDistance(r, scaled(0.5), rate), 20*math.Log10(2), 1e-9)
	approx(t, "mel(r, 2r)", MelDistance(r, scaled(2), rate), 20*math.Log10(2), 1e-9)
}

func TestEdgeCases(t *testing.T) {
	zero := make([]float32, 100)
	x := sine(100, 0.1, 1000)
	if s := SNR(x, x); !math.IsInf(s, 1) {
		t.Errorf("SNR(x, x) = %v", s)
	}
	if s := SNR(zero, x); !math.IsInf(s, -1) {
		t.Errorf("SNR(0, x) = %v", s)
	}
	if s := SISDR(zero, zero); !math.IsInf(s, 1) {
		t.Errorf("SI-SDR(0, 0) = %v", s)
	}
	if s := SISDR(zero, x); !math.IsInf(s, -1) {
		t.Errorf("SI-SDR(0, x) = %v", s)
	}
	if s := SISDR(x, zero); !math.IsInf(s, -1) {
		t.Errorf("SI-SDR(x, 0) = %v", s)
	}
	if d := MelDistance(zero, zero, rate); d != 0 {
		t.Errorf("mel(0, 0) = %v", d)
	}
	// Empty and short signals.
	m := Audio(nil, nil, rate)
	if !m.Exact || m.Compared != 0 || len(m.Frames) != 0 || m.MelDistanceDB != 0 {
		t.Errorf("empty: %+v", m)
	}
	m = Audio(x[:10], x[:10], rate)
	if !m.Exact || len(m.Frames) != 1 || m.FirstDiffFrame != -1 {
		t.Errorf("10 samples: %+v", m)
	}
	// Length mismatch with an equal common part: first difference at the end
	// of the shorter signal.
	long := sine(5000, 0.1, 300)
	m = Audio(long, long[:4000], rate)
	if m.Exact || m.LengthDiff != -1000 || m.Compared != 4000 || m.FirstDiffSample != 4000 ||
		m.FirstDiffFrame != 2 || !math.IsInf(m.SNRdB, 1) || m.MelDistanceDB != 0 {
		t.Errorf("truncated: %+v", m)
	}
	// One changed sample.
	c := append([]float32(nil), long...)
	c[3900] += 0.25
	m = Audio(long, c, rate)
	if m.FirstDiffSample != 3900 || m.FirstDiffFrame != 2 || math.Abs(m.MaxAbsDiff-0.25) > 1e-6 {
		t.Errorf("one sample: first %d frame %d max %v", m.FirstDiffSample, m.FirstDiffFrame, m.MaxAbsDiff)
	}
	if got := FrameSamples(24000); got != 1920 {
		t.Errorf("FrameSamples(24000) = %d", got)
	}
	if got := FrameSamples(16000); got != 1280 {
		t.Errorf("FrameSamples(16000) = %d", got)
	}
}

// Reference values computed by scripts/compare_reference_metrics.py (numpy
// 1.24.2, scipy 1.10.1: scipy.signal.stft, np.interp mel triangles), run as
//
//	/usr/bin/python3 scripts/compare_reference_metrics.py
//
// from the repository root. Cases: ref/cand as named; "shift240" is input.wav
// delayed by 240 samples (10 ms, zeros in front, same length); "plus 1%
// input" is float32(output + float32(0.01)·input); "half" is 0.5·output;
// "input_first_60000" compares output.wav with the first 60000 samples of
// input.wav (length mismatch: metrics over the common 60000 samples).
func TestAgainstNumpy(t *testing.T) {
	out := readMono(t, goldenWAV)
	inp := readMono(t, inputWAV)
	mixed := make([]float32, len(out))
	half := make([]float32, len(out))
	for i := range out {
		mixed[i] = out[i] + float32(float32(0.01)*inp[i])
		half[i] = out[i] * 0.5
	}
	type want struct{ maxAbs, snr, sisdr, mel float64 }
	inf := math.Inf(1)
	cases := []struct {
		name      string
		ref, cand []float32
		first     int
		want      want
	}{
		{"input_vs_output", inp, out, 0, want{1.0509033203125, -4.589555145493479, -50.638858167810014, 24.79521154676263}},
		{"input_vs_shift240", inp, shift(inp, 240), 304, want{0.895751953125, -2.8160036551771834, -27.171645954135258, 2.27116943927681}},
		{"output_vs_plus_1pct_input", out, mixed, 304, want{0.007036132737994194, 42.716256320139, 42.71610714549507, 0.03949658977631858}},
		{"output_vs_half", out, half, 0, want{0.2694549560546875, 6.020599913279624, inf, 6.020599913279626}},
		{"output_vs_input_first_60000", out, inp[:60000], 0, want{1.0509033203125, -1.9640619318188193, -49.41472812632035, 25.523385776918406}},
	}
	for _, tc := range cases {
		m := Audio(tc.ref, tc.cand, rate)
		approx(t, tc.name+" max abs diff", m.MaxAbsDiff, tc.want.maxAbs, 1e-12)
		approx(t, tc.name+" SNR", m.SNRdB, tc.want.snr, 1e-10)
		approx(t, tc.name+" SI-SDR", m.SISDRdB, tc.want.sisdr, 1e-8)
		approx(t, tc.name+" mel distance", m.MelDistanceDB, tc.want.mel, 1e-9)
		if m.FirstDiffSample != tc.first {
			t.Errorf("%s: first diff sample %d, want %d", tc.name, m.FirstDiffSample, tc.first)
		}
	}

	// Per-frame SNR of the 10 ms shift (global reference power over the
	// frame's error power); +Inf where both are digital silence.
	frameSNR := []float64{8.411189332180278, 0.02568081690058041, 1.2770902254886103, -5.473906406205792,
		-4.482522288654777, -3.8325772999335745, 5.390536023577997, inf, inf, 9.572542874709281,
		-3.625884480033359, 3.5080074450741803, 1.2941975596638657, 8.18740163769706, -2.8338599024306648,
		-9.879898488365559, -3.372490525750039, 2.650024794367341, -6.0993996031076945, 1.6946981316836673,
		-7.650522484935875, -6.102131811080822, 1.600807003655485, -3.486605945555298, 6.8096359290525275,
		6.419927832304003, -8.529351657062136, -5.973443638687112, -7.46218757230162, 9.165230764982207,
		14.663170587962288, 0.15490910464142912, -5.360293596994379, -5.720325028941372, 0.7586543175556513,
		11.21844055446431, inf, inf, inf}
	m := Audio(inp, shift(inp, 240), rate)
	if len(m.Frames) != len(frameSNR) {
		t.Fatalf("%d frames, want %d", len(m.Frames), len(frameSNR))
	}
	for i, f := range m.Frames {
		approx(t, "frame SNR", f.SNRdB, frameSNR[i], 1e-10)
	}

	// The mel power spectrogram itself (window, FFT, filterbank, scale).
	mo := MelSpectrogram(out, rate)
	if len(mo) != 283 {
		t.Errorf("output.wav: %d STFT frames, want 283", len(mo))
	}
	approx(t, "floor", MelFloor(mo), 0.0008601305015376997, 1e-9)
	for i, b := range []int{0, 1, 10, 40, 79} {
		want := []float64{10.073106200951411, 0.11626268983651597, 1.4305031958103722, 30.800078215500637, 36.94542065438638}[i]
		approx(t, "mel power frame 100", mo[100][b], want, 1e-9)
	}
	if n := len(MelSpectrogram(inp[:60000], rate)); n != 232 {
		t.Errorf("60000 samples: %d STFT frames, want 232", n)
	}
}

func TestFFTMatchesDFT(t *testing.T) {
	const n = 64
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]complex128, n)
	for i := range x {
		x[i] = complex(rng.NormFloat64(), rng.NormFloat64())
	}
	y := append([]complex128(nil), x...)
	fft(y, twiddles(n))
	for k := 0; k < n; k++ {
		var s complex128
		for j := 0; j < n; j++ {
			s += x[j] * cmplx.Exp(complex(0, -2*math.Pi*float64(j*k)/n))
		}
		if cmplx.Abs(s-y[k]) > 1e-10 {
			t.Fatalf("bin %d: %v, want %v", k, y[k], s)
		}
	}
}

func TestMelFilterbank(t *testing.T) {
	fb := melFilterbank(rate)
	if len(fb) != MelBands {
		t.Fatalf("%d bands", len(fb))
	}
	for b, f := range fb {
		if len(f.w) == 0 {
			t.Errorf("band %d is empty", b)
			continue
		}
		peak := 0.0
		for _, w := range f.w {
			peak = math.Max(peak, w)
		}
		if peak > 1 || peak < 0.4 {
			t.Errorf("band %d peak %v", b, peak)
		}
		if b > 0 && f.lo < fb[b-1].lo {
			t.Errorf("band %d starts below band %d", b, b-1)
		}
	}
}

// The measurement behind DefaultMaxMelDistanceDB (see its comment): −40 dB
// white noise passes the mel threshold on both real signals, −30 dB noise on
// speech and 10 ms shifts do not.
func TestMelThresholdCalibration(t *testing.T) {
	for _, tc := range []struct {
		path                 string
		lo40, hi40, shiftMin float64
	}{
		{inputWAV, 0.45, 0.65, 2.0},
		{goldenWAV, 0.03, 0.07, 1.5},
	} {
		x := readMono(t, tc.path)
		d40 := MelDistance(x, addNoise(x, -40, 1), rate)
		if d40 < tc.lo40 || d40 > tc.hi40 || d40 > DefaultMaxMelDistanceDB {
			t.Errorf("%s: −40 dB noise: mel distance %.3f, want in [%g, %g] and ≤ %g", tc.path, d40, tc.lo40, tc.hi40, DefaultMaxMelDistanceDB)
		}
		if d := MelDistance(x, shift(x, 240), rate); d < tc.shiftMin || d <= DefaultMaxMelDistanceDB {
			t.Errorf("%s: 10 ms shift: mel distance %.3f, want > %g", tc.path, d, tc.shiftMin)
		}
	}
	x := readMono(t, inputWAV)
	if d := MelDistance(x, addNoise(x, -30, 1), rate); d <= DefaultMaxMelDistanceDB {
		t.Errorf("input.wav −30 dB noise: mel distance %.3f accepted", d)
	}
}

func TestVerdicts(t *testing.T) {
	th := DefaultThresholds()
	for _, path := range []string{goldenWAV, inputWAV} {
		x := readMono(t, path)
		other := readMono(t, map[string]string{goldenWAV: inputWAV, inputWAV: goldenWAV}[path])
		check := func(name string, cand []float32, want Verdict) *Result {
			t.Helper()
			r := Evaluate(Audio(x, cand, rate), nil, th)
			if r.Verdict != want {
				t.Errorf("%s, %s: verdict %s, want %s (SNR %.2f, mel %.3f, reasons %q)",
					path, name, r.Verdict, want, r.Audio.SNRdB, r.Audio.MelDistanceDB, r.Reasons)
			}
			return r
		}
		r := check("identical", append([]float32(nil), x...), Exact)
		if len(r.FramesOverThreshold()) != 0 || r.Audio.FirstDiffFrame != -1 {
			t.Errorf("identical: frames over %v, first %d", r.FramesOverThreshold(), r.Audio.FirstDiffFrame)
		}
		r = check("−60 dB noise", addNoise(x, -60, 5), Equivalent)
		if r.Audio.Exact || r.Audio.SNRdB < 55 || r.Audio.SNRdB > 61 {
			t.Errorf("−60 dB noise: exact %v, SNR %.2f", r.Audio.Exact, r.Audio.SNRdB)
		}
		check("10 ms shift", shift(x, 240), Different)
		check("0.5 ms shift", shift(x, 12), Different)
		check("other signal", other, Different)
		r = check("one sample short", x[:len(x)-1], Different)
		if len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "length") {
			t.Errorf("one sample short: reasons %q", r.Reasons)
		}
		if fo := r.FramesOverThreshold(); len(fo) != 0 {
			// 73200 = 38.125 frames: the shorter signal still reaches frame 38.
			t.Errorf("one sample short: frames over %v", fo)
		}
	}

	// Transcripts.
	x := readMono(t, goldenWAV)
	a := Audio(x, x, rate)
	ref := []string{"PAD", " Hello", "EPAD", " there"}
	same := Text(ref, append([]string(nil), ref...))
	if r := Evaluate(a, &same, th); r.Verdict != Exact {
		t.Errorf("same text: %s", r.Verdict)
	}
	changed := Text(ref, []string{"PAD", " Hello", "EPAD", " here"})
	if r := Evaluate(a, &changed, th); r.Verdict != Different || changed.FirstDiffToken != 3 || changed.EditDistance != 1 {
		t.Errorf("changed text: %s %+v", r.Verdict, changed)
	}
	th1 := th
	th1.MaxTextEdits = 1
	if r := Evaluate(a, &changed, th1); r.Verdict != Equivalent {
		t.Errorf("changed text, 1 edit allowed: %s", r.Verdict)
	}
}

func TestText(t *testing.T) {
	s := func(x string) []string {
		if x == "" {
			return nil
		}
		return strings.Split(x, "")
	}
	for _, tc := range []struct {
		a, b        string
		dist, first int
	}{
		{"kitten", "sitting", 3, 0},
		{"sitting", "kitten", 3, 0},
		{"abc", "abc", 0, -1},
		{"", "", 0, -1},
		{"", "abc", 3, 0},
		{"abc", "ab", 1, 2},
		{"abcdef", "abXdef", 1, 2},
		{"abcdef", "acdef", 1, 1},
		{"flaw", "lawn", 2, 0},
		{"intention", "execution", 5, 0},
	} {
		m := Text(s(tc.a), s(tc.b))
		if m.EditDistance != tc.dist || m.FirstDiffToken != tc.first || m.Exact != (tc.dist == 0) {
			t.Errorf("%q vs %q: %+v, want distance %d, first %d", tc.a, tc.b, m, tc.dist, tc.first)
		}
	}
	// Entries are whole tokens: " Hello" ≠ "Hello".
	m := Text([]string{"PAD", " Hello"}, []string{"PAD", "Hello"})
	if m.EditDistance != 1 || m.FirstDiffToken != 1 {
		t.Errorf("whole-token comparison: %+v", m)
	}
}

func TestReportJSON(t *testing.T) {
	x := readMono(t, goldenWAV)
	ref := []string{"PAD", " a", "b"}
	cand := []string{"PAD", " a", "c", "d"}
	tm := Text(ref, cand)
	r := Evaluate(Audio(x, x, rate), &tm, DefaultThresholds())
	rep := r.Report(Inputs{Reference: "a.wav", Candidate: "b.wav", ReferenceText: "a.json", CandidateText: "b.json"}, ref, cand)
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	au := got["audio"].(map[string]any)
	if au["snr_db"] != "+Inf" || au["si_sdr_db"] != "+Inf" || au["sample_exact"] != true || au["first_diff_frame"] != -1.0 {
		t.Errorf("audio section: %v", au)
	}
	tx := got["text"].(map[string]any)
	if tx["edit_distance"] != 2.0 || tx["first_diff_token"] != 2.0 || tx["reference_token"] != "b" || tx["candidate_token"] != "c" {
		t.Errorf("text section: %v", tx)
	}
	if got["verdict"] != "different" || got["pass"] != false || len(got["reasons"].([]any)) != 1 {
		t.Errorf("verdict: %v %v %v", got["verdict"], got["pass"], got["reasons"])
	}
	if b, _ := Float(math.NaN()).MarshalJSON(); string(b) != "null" {
		t.Errorf("NaN → %s", b)
	}
	if b, _ := Float(math.Inf(-1)).MarshalJSON(); string(b) != `"-Inf"` {
		t.Errorf("-Inf → %s", b)
	}

	var tab bytes.Buffer
	if err := r.WriteTable(&tab, Inputs{Reference: "a.wav", Candidate: "b.wav", ReferenceText: "a.json", CandidateText: "b.json"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SNR", "+Inf dB", "text edit distance", "2 (3 vs 4 tokens)", "verdict: DIFFERENT"} {
		if !strings.Contains(tab.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, tab.String())
		}
	}
}

func TestPlot(t *testing.T) {
	x := readMono(t, inputWAV)
	cand := append([]float32(nil), x...)
	// Change frames 20 and 21 (samples 38400 … 42239) only.
	for i := 20 * 1920; i < 22*1920; i++ {
		cand[i] *= 0.5
	}
	r := Evaluate(Audio(x, cand, rate), nil, DefaultThresholds())
	over := r.FramesOverThreshold()
	if len(over) != 2 || over[0] != 20 || over[1] != 21 || r.Audio.FirstDiffFrame != 20 {
		t.Fatalf("frames over %v, first %d", over, r.Audio.FirstDiffFrame)
	}
	var buf bytes.Buffer
	if err := Plot(&buf, x, cand, r, Inputs{Reference: "ref.wav", Candidate: "cand.wav"}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	if b.Dx() != plotWidth || b.Dy() < 800 {
		t.Fatalf("plot size %v", b)
	}
	// The 80 ms frame strip (second-last panel) is red at frame 20, green at
	// frame 5.
	stripY := b.Max.Y - 34 - plotGap - 2 - stripH/2
	p := &plotter{total: len(x), x0: plotLeft, w: plotWidth - plotLeft - plotRight}
	at := func(frame int) [3]uint32 {
		c := img.At(p.col(frame*1920+960), stripY)
		r, g, bl, _ := c.RGBA()
		return [3]uint32{r >> 8, g >> 8, bl >> 8}
	}
	if c := at(20); c != [3]uint32{uint32(colOver.R), uint32(colOver.G), uint32(colOver.B)} {
		t.Errorf("frame 20 cell %v, want red", c)
	}
	if c := at(5); c != [3]uint32{uint32(colOK.R), uint32(colOK.G), uint32(colOK.B)} {
		t.Errorf("frame 5 cell %v, want green", c)
	}
	if os.Getenv("COMPARE_PLOT_OUT") != "" {
		var out bytes.Buffer
		Plot(&out, x, cand, r, Inputs{Reference: "ref.wav", Candidate: "cand.wav"})
		os.WriteFile(os.Getenv("COMPARE_PLOT_OUT"), out.Bytes(), 0o644)
	}
}

// A file holding NaN compared with itself is sample-exact (NaN != NaN must
// not make a file "different" from itself).
func TestNaNFileExactWithItself(t *testing.T) {
	x := []float32{0.1, float32(math.NaN()), -0.2, float32(math.Inf(1))}
	if m := Audio(x, x, 24000); !m.Exact || m.FirstDiffSample != -1 {
		t.Fatalf("%+v", m)
	}
	y := append([]float32(nil), x...)
	y[1] = 0
	if m := Audio(x, y, 24000); m.Exact || m.FirstDiffSample != 1 {
		t.Fatalf("NaN vs 0: %+v", m)
	}
}

// A NaN file is exact with itself through the whole verdict (not only the
// sample comparison); NaN or Inf on one side only is a difference, said in
// the reasons.
func TestNaNVerdicts(t *testing.T) {
	x := readMono(t, goldenWAV)
	x = append([]float32(nil), x...)
	x[100] = float32(math.NaN())
	x[5000] = float32(math.Inf(1))
	x[7000] = float32(math.Inf(-1))
	y := append([]float32(nil), x...)
	// A NaN with other payload bits is still NaN.
	y[100] = math.Float32frombits(math.Float32bits(x[100]) | 1)
	tm := Text([]string{"a"}, []string{"a"})
	r := Evaluate(Audio(x, y, rate), &tm, DefaultThresholds())
	if r.Verdict != Exact || len(r.Reasons) != 0 || r.Audio.MaxAbsDiff != 0 || !math.IsInf(r.Audio.SNRdB, 1) ||
		r.Audio.MelDistanceDB != 0 || r.Audio.NonFiniteDiffs != 0 || len(r.FramesOverThreshold()) != 0 {
		t.Fatalf("NaN file vs itself: %s %v %+v", r.Verdict, r.Reasons, r.Audio)
	}
	// The finite part is measured as usual: halve one sample far from the
	// non-finite ones.
	z := append([]float32(nil), y...)
	z[20000] *= 0.5
	fin := func(v []float32) []float32 { return zeroNonFinite(v) }
	want := SNR(fin(x), fin(z))
	if got := SNR(x, z); got != want || math.IsInf(got, 0) {
		t.Errorf("SNR with matching NaNs %v, want %v (as with them zeroed)", got, want)
	}

	for _, tc := range []struct {
		name string
		at   int
		v    float32
	}{
		{"NaN vs number", 200, float32(math.NaN())},
		{"number vs NaN", 100, 0.25},
		{"+Inf vs -Inf", 5000, float32(math.Inf(-1))},
		{"Inf vs number", 300, float32(math.Inf(1))},
	} {
		c := append([]float32(nil), x...)
		c[tc.at] = tc.v
		r := Evaluate(Audio(x, c, rate), nil, DefaultThresholds())
		a := r.Audio
		if r.Verdict != Different || a.Exact || a.FirstDiffSample != tc.at || a.NonFiniteDiffs != 1 ||
			a.FirstNonFinite != tc.at || !math.IsInf(a.MaxAbsDiff, 1) || !math.IsInf(a.SNRdB, -1) ||
			!math.IsInf(a.SISDRdB, -1) || !math.IsInf(a.MelDistanceDB, 1) {
			t.Errorf("%s: %s %+v", tc.name, r.Verdict, a)
			continue
		}
		want := fmt.Sprintf("1 samples are NaN or infinite in one file only (first at sample %d)", tc.at)
		if !slices.Contains(r.Reasons, want) {
			t.Errorf("%s: reasons %q lack %q", tc.name, r.Reasons, want)
		}
		if over := r.FramesOverThreshold(); !slices.Contains(over, tc.at/1920) {
			t.Errorf("%s: frame %d not over threshold: %v", tc.name, tc.at/1920, over)
		}
	}
}

// Channel counts are compared: mono against stereo (even with the same
// first channel) is different, said in the reasons, the report and the
// table; every channel is compared, the worst one decides.
func TestChannels(t *testing.T) {
	x := readMono(t, goldenWAV)
	mono := [][]float32{x}
	stereo := [][]float32{x, x}
	if m := AudioChannels(mono, mono, rate); !m.Exact || m.ReferenceChannels != 1 || m.CandidateChannels != 1 {
		t.Fatalf("mono vs mono: %+v", m)
	}
	single := Audio(x, x, rate)
	if m := AudioChannels(mono, mono, rate); !reflect.DeepEqual(m, single) {
		t.Errorf("one channel each is not Audio's result")
	}
	if r := Evaluate(AudioChannels(stereo, stereo, rate), nil, DefaultThresholds()); r.Verdict != Exact {
		t.Errorf("stereo vs itself: %s %v", r.Verdict, r.Reasons)
	}
	for _, tc := range []struct{ ref, cand [][]float32 }{{mono, stereo}, {stereo, mono}} {
		a := AudioChannels(tc.ref, tc.cand, rate)
		r := Evaluate(a, nil, DefaultThresholds())
		want := fmt.Sprintf("channel count differs: candidate has %d channels, reference %d", len(tc.cand), len(tc.ref))
		if a.Exact || r.Verdict != Different || !slices.Contains(r.Reasons, want) || a.FirstDiffSample != 0 {
			t.Errorf("%d vs %d channels: %s %v %+v", len(tc.ref), len(tc.cand), r.Verdict, r.Reasons, a)
		}
		rep := r.Report(Inputs{Reference: "a.wav", Candidate: "b.wav"}, nil, nil)
		if rep.Audio.ReferenceChannels != len(tc.ref) || rep.Audio.CandidateChannels != len(tc.cand) || rep.Pass {
			t.Errorf("report: %+v", rep.Audio)
		}
		var tab strings.Builder
		r.WriteTable(&tab, Inputs{Reference: "a.wav", Candidate: "b.wav"})
		if !strings.Contains(tab.String(), fmt.Sprintf("%d (reference %d)", len(tc.cand), len(tc.ref))) {
			t.Errorf("table lacks the channel row:\n%s", tab.String())
		}
	}
	// A difference in the second channel only is found.
	y := append([]float32(nil), x...)
	for i := 30 * 1920; i < 31*1920; i++ {
		y[i] *= 0.5
	}
	a := AudioChannels(stereo, [][]float32{x, y}, rate)
	b := Audio(x, y, rate)
	if a.Exact || a.FirstDiffSample != b.FirstDiffSample || a.SNRdB != b.SNRdB || a.MelDistanceDB != b.MelDistanceDB ||
		a.Frames[30] != b.Frames[30] || a.Frames[5] != single.Frames[5] {
		t.Errorf("second channel differs: %+v", a)
	}
}

// oldLevenshtein is the quadratic dynamic programme Text used before the
// diagonal-transition alignment, kept here as the reference.
func oldLevenshtein(a, b []string) int {
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

// randomTranscript returns n tokens, mostly "PAD" as a model's are, from a
// vocabulary of voc words.
func randomTranscript(rng *rand.Rand, n, voc int) []string {
	out := make([]string, n)
	for i := range out {
		if rng.IntN(3) > 0 {
			out[i] = "PAD"
		} else {
			out[i] = fmt.Sprintf(" w%d", rng.IntN(voc))
		}
	}
	return out
}

// mutate returns x with edits random insertions, deletions and
// substitutions.
func mutate(rng *rand.Rand, x []string, edits, voc int) []string {
	y := append([]string(nil), x...)
	for range edits {
		i := rng.IntN(len(y) + 1)
		w := fmt.Sprintf(" w%d", rng.IntN(voc))
		switch op := rng.IntN(3); {
		case op == 0 || len(y) == 0 || i == len(y):
			y = slices.Insert(y, i, w)
		case op == 1:
			y = slices.Delete(y, i, i+1)
		default:
			y[i] = w
		}
	}
	return y
}

// The bounded diagonal alignment gives the old algorithm's distance on
// random small inputs (small vocabularies, so that tokens match often and
// in runs), and with a tiny work bound a lower bound of it.
func TestEditDistanceMatchesOld(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for it := range 20000 {
		voc := 1 + rng.IntN(4)
		a := randomTranscript(rng, rng.IntN(30), voc)
		var b []string
		if it%2 == 0 {
			b = mutate(rng, a, rng.IntN(8), voc)
		} else {
			b = randomTranscript(rng, rng.IntN(30), voc)
		}
		want := oldLevenshtein(a, b)
		if got := Text(a, b); got.EditDistance != want || got.EditDistanceAtLeast {
			t.Fatalf("%q vs %q: %+v, want distance %d", a, b, got, want)
		}
		if got := Levenshtein(a, b); got != want {
			t.Fatalf("Levenshtein %q vs %q: %d, want %d", a, b, got, want)
		}
		// A small work bound and no quadratic fallback: exact, or a
		// lower bound flagged as such.
		got, exact := levenshteinWith(a, b, 20, 0)
		if exact && got != want || !exact && got > want {
			t.Fatalf("bounded %q vs %q: %d (exact %v), distance %d", a, b, got, exact, want)
		}
		// The fallback to the programme finishes what the bound stopped.
		if got, exact := levenshteinWith(a, b, 20, 1<<20); !exact || got != want {
			t.Fatalf("fallback %q vs %q: %d (exact %v), distance %d", a, b, got, exact, want)
		}
	}
}

func levenshteinWith(a, b []string, work, cells int64) (int, bool) {
	defer func(c int64) { dpCells = c }(dpCells)
	dpCells = cells
	return levenshteinBounded(a, b, work)
}

// Transcripts too different to align within the work bound: the distance
// is reported as a lower bound, said in the reason, the table and the
// report, and never passes.
func TestTextTooDifferent(t *testing.T) {
	defer func(w, c int64) { alignWork, dpCells = w, c }(alignWork, dpCells)
	alignWork, dpCells = 5000, 0
	rng := rand.New(rand.NewPCG(3, 4))
	a := randomTranscript(rng, 3000, 50)
	b := randomTranscript(rng, 3000, 50)
	tm := Text(a, b)
	want := oldLevenshtein(a, b)
	if !tm.EditDistanceAtLeast || tm.EditDistance < 1 || tm.EditDistance > want {
		t.Fatalf("%+v, distance %d", tm, want)
	}
	th := DefaultThresholds()
	th.MaxTextEdits = want // the true distance would pass: unknown here
	x := readMono(t, goldenWAV)
	r := Evaluate(Audio(x, x, rate), &tm, th)
	reason := fmt.Sprintf("transcripts too different to align within the work bound: edit distance at least %d (threshold %d)",
		tm.EditDistance, want)
	if r.Verdict != Different || !slices.Contains(r.Reasons, reason) {
		t.Errorf("%s %q, want %q", r.Verdict, r.Reasons, reason)
	}
	var tab strings.Builder
	r.WriteTable(&tab, Inputs{Reference: "a.wav", Candidate: "b.wav", ReferenceText: "a.json", CandidateText: "b.json"})
	if !strings.Contains(tab.String(), fmt.Sprintf("at least %d (3000 vs 3000 tokens)", tm.EditDistance)) {
		t.Errorf("table:\n%s", tab.String())
	}
	if rep := r.Report(Inputs{}, a, b); !rep.Text.EditDistanceAtLeast || rep.Text.EditDistance != tm.EditDistance {
		t.Errorf("report: %+v", rep.Text)
	}
}

// BenchmarkTextMillion aligns two 10^6-token transcripts (two thirds
// "PAD"): one 2000 edits apart (exact), and two unrelated ones (stopped by
// the work bound).
func BenchmarkTextMillion(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ref := randomTranscript(rng, 1_000_000, 2000)
	near := mutate(rng, ref, 2000, 2000)
	far := randomTranscript(rng, 1_000_000, 2000)
	b.Run("2000-edits", func(b *testing.B) {
		for b.Loop() {
			if m := Text(ref, near); m.EditDistanceAtLeast || m.EditDistance > 2000 || m.EditDistance == 0 {
				b.Fatalf("%+v", m)
			}
		}
	})
	b.Run("unrelated", func(b *testing.B) {
		for b.Loop() {
			if m := Text(ref, far); !m.EditDistanceAtLeast {
				b.Fatalf("%+v", m)
			}
		}
	})
}

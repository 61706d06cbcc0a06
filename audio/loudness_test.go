package audio

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

type loudnessCase struct {
	Name       string `json:"name"`
	SampleRate int    `json:"sample_rate"`
	Segments   []struct {
		FreqHz  float64 `json:"freq_hz"`
		DBFS    float64 `json:"dbfs"`
		Seconds float64 `json:"seconds"`
	} `json:"segments"`
	LUFS          *float64 `json:"lufs"`
	MinusInfinity bool     `json:"minus_infinity"`
	Error         *string  `json:"error"`
	Gain          *float64 `json:"gain_to_minus24"`
}

// signal regenerates a case from the formula in loudness_cases.json's
// "about": concatenated segments x[n] = float32(10^(dbfs/20)·sin(2π·f·n/sr)),
// n = 0 … round(sr·seconds)−1, restarting at 0 in each segment.
func (c *loudnessCase) signal() []float32 {
	var x []float32
	sr := float64(c.SampleRate)
	for _, s := range c.Segments {
		n := int(math.RoundToEven(sr * s.Seconds))
		amp := math.Pow(10, s.DBFS/20)
		for i := 0; i < n; i++ {
			x = append(x, float32(amp*math.Sin(2*math.Pi*s.FreqHz*float64(i)/sr)))
		}
	}
	return x
}

func TestLoudnessCases(t *testing.T) {
	raw, err := os.ReadFile("../testdata/loudness_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []loudnessCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) != 14 {
		t.Fatalf("%d cases", len(doc.Cases))
	}
	var worst64, worst32 float64
	for _, c := range doc.Cases {
		x := c.signal()
		x64 := make([]float64, len(x))
		for i, v := range x {
			x64[i] = float64(v) // "pyloudnorm is given the float32 samples widened to float64"
		}
		l64 := IntegratedLoudness64(x64, c.SampleRate)
		l32 := IntegratedLoudness(x, c.SampleRate)
		switch {
		case c.Error != nil:
			if !math.IsNaN(l64) || !math.IsNaN(l32) {
				t.Errorf("%s: pyloudnorm raised %q, got %v / %v (want NaN)", c.Name, *c.Error, l64, l32)
			}
		case c.MinusInfinity:
			if !math.IsInf(l64, -1) || !math.IsInf(l32, -1) {
				t.Errorf("%s: got %v / %v, want -Inf", c.Name, l64, l32)
			}
		default:
			d64, d32 := math.Abs(l64-*c.LUFS), math.Abs(l32-*c.LUFS)
			worst64, worst32 = max(worst64, d64), max(worst32, d32)
			if d64 > 1e-9 || d32 > 1e-4 {
				t.Errorf("%s: %.12f (float64 path) / %.12f (float32 path), pyloudnorm %.12f", c.Name, l64, l32, *c.LUFS)
			}
			if g := LoudnessGain(l64, -24); math.Abs(g / *c.Gain - 1) > 1e-9 {
				t.Errorf("%s: gain %.15g, want %.15g", c.Name, g, *c.Gain)
			}
		}
	}
	t.Logf("loudness_cases.json: max |error| %.3g LU (float64 input), %.3g LU (same samples as float32)", worst64, worst32)
}

func TestVoicePromptLoudness(t *testing.T) {
	raw, err := os.ReadFile("../testdata/tiny/expected/mimi/voice_prompt_loudness.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		LUFS   float64   `json:"integrated_loudness_lufs"`
		Target float64   `json:"target_lufs"`
		Gain   float64   `json:"gain"`
		Dtype  string    `json:"normalized_dtype"`
		First8 []float64 `json:"normalized_first8"`
		SumAbs float64   `json:"normalized_sum_abs"`
		MaxAbs float64   `json:"normalized_max_abs"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	x, err := LoadMono("../testdata/tiny/voices/TINYF0.wav", 24000)
	if err != nil {
		t.Fatal(err)
	}
	l := IntegratedLoudness(x, 24000)
	t.Logf("TINYF0.wav: %.15f LUFS, pyloudnorm %.15f (error %.3g LU)", l, want.LUFS, math.Abs(l-want.LUFS))
	if math.Abs(l-want.LUFS) > 1e-12 {
		t.Errorf("loudness %.15f, want %.15f", l, want.LUFS)
	}
	g := LoudnessGain(l, want.Target)
	if math.Abs(g/want.Gain-1) > 1e-12 || float32(g) != float32(want.Gain) {
		t.Errorf("gain %.17g, want %.17g", g, want.Gain)
	}
	y := NormalizeLoudness(x, 24000, want.Target)
	for i, w := range want.First8 {
		if y[i] != float32(w) {
			t.Errorf("normalised[%d] = %v, want %v", i, y[i], float32(w))
		}
	}
	var sum, mx float64
	for _, v := range y {
		a := math.Abs(float64(v))
		sum += a
		mx = max(mx, a)
	}
	if float32(mx) != float32(want.MaxAbs) {
		t.Errorf("max |y| %v, want %v", mx, want.MaxAbs)
	}
	if math.Abs(sum-want.SumAbs) > 1e-9*want.SumAbs {
		t.Errorf("sum |y| %.10f, want %.10f", sum, want.SumAbs)
	}
}

func TestNormalizeSilenceAndShort(t *testing.T) {
	silence := make([]float32, 24000)
	if l := IntegratedLoudness(silence, 24000); !math.IsInf(l, -1) {
		t.Errorf("silence: %v, want -Inf", l)
	}
	y := NormalizeLoudness(silence, 24000, -24)
	for _, v := range y {
		if v != 0 {
			t.Fatal("silence not returned unchanged")
		}
	}
	quiet := sine(24000, 24000, 1000, 1e-4) // −80 dBFS: below the absolute gate
	y = NormalizeLoudness(quiet, 24000, -24)
	if !sameBits(y, quiet) || &y[0] == &quiet[0] {
		t.Error("gated-out signal not returned as an unchanged copy")
	}
	short := sine(9599, 24000, 1000, 0.1) // one sample short of a 400 ms block
	if l := IntegratedLoudness(short, 24000); !math.IsNaN(l) {
		t.Errorf("short: %v, want NaN", l)
	}
	if y := NormalizeLoudness(short, 24000, -24); !sameBits(y, short) {
		t.Error("short signal not returned unchanged")
	}
	if l := IntegratedLoudness(sine(9600, 24000, 1000, 0.1), 24000); math.IsNaN(l) || math.IsInf(l, 0) {
		t.Errorf("exactly one block: %v", l)
	}
	if l := IntegratedLoudness(short, 0); !math.IsNaN(l) {
		t.Errorf("rate 0: %v", l)
	}
	// Normalising twice is stable: the result measures the target.
	x := sine(48000, 24000, 440, 0.3)
	if l := IntegratedLoudness(NormalizeLoudness(x, 24000, -24), 24000); math.Abs(l+24) > 1e-4 {
		t.Errorf("normalised loudness %v", l)
	}
}

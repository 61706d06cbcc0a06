package audio

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

func sine(n, rate int, freq, amp float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return x
}

// snrDB compares y (at rate) with the ideal amp·sin(2π·freq·t), skipping
// edge seconds at both ends.
func snrDB(y []float32, rate int, freq, amp, edge float64) float64 {
	skip := int(edge * float64(rate))
	var sig, noise float64
	for i := skip; i < len(y)-skip; i++ {
		want := amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate))
		d := float64(y[i]) - want
		sig += want * want
		noise += d * d
	}
	return 10 * math.Log10(sig/noise)
}

// rmsDB is the RMS level of y relative to a sine of amplitude amp, skipping
// edge seconds at both ends.
func rmsDB(y []float32, rate int, amp, edge float64) float64 {
	skip := int(edge * float64(rate))
	var e float64
	for _, v := range y[skip : len(y)-skip] {
		e += float64(v) * float64(v)
	}
	rms := math.Sqrt(e / float64(len(y)-2*skip))
	return 20 * math.Log10(rms/(amp/math.Sqrt2))
}

func TestResampleSNR(t *testing.T) {
	for _, from := range []int{8000, 16000, 22050, 32000, 44100, 48000, 96000} {
		x := sine(from, from, 1000, 0.5) // 1 s
		y, err := Resample(x, from, 24000)
		if err != nil {
			t.Fatal(err)
		}
		if len(y) != 24000 {
			t.Fatalf("%d → 24000: %d samples", from, len(y))
		}
		snr := snrDB(y, 24000, 1000, 0.5, 0.05)
		t.Logf("1 kHz sine %d → 24000 Hz: SNR %.1f dB", from, snr)
		if snr < 90 {
			t.Errorf("%d → 24000: SNR %.1f dB < 90", from, snr)
		}
	}
	// And away from 24 kHz, including an odd pair whose taps are computed per
	// sample (24000 phases).
	for _, p := range [][2]int{{24000, 48000}, {24000, 16000}, {24000, 44100}, {44101, 24000}} {
		n := p[0] / 5
		if p[0] == 44101 {
			n = p[0] / 20
		}
		y, err := Resample(sine(n, p[0], 1000, 0.5), p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		snr := snrDB(y, p[1], 1000, 0.5, 0.01)
		t.Logf("1 kHz sine %d → %d Hz: SNR %.1f dB", p[0], p[1], snr)
		if snr < 90 {
			t.Errorf("%d → %d: SNR %.1f dB < 90", p[0], p[1], snr)
		}
	}
}

func TestResampleStopBand(t *testing.T) {
	worst := math.Inf(-1)
	for _, from := range []int{48000, 44100, 32000} {
		for _, f := range []float64{12000, 12500, 13000, 15000, 18000, 21000, 23500} {
			if f >= float64(from)/2 {
				continue
			}
			y, err := Resample(sine(from/2, from, f, 0.9), from, 24000)
			if err != nil {
				t.Fatal(err)
			}
			db := rmsDB(y, 24000, 0.9, 0.02)
			worst = max(worst, db)
			if db > -80 {
				t.Errorf("%g Hz tone at %d Hz: only %.1f dB down in the 24 kHz output", f, from, db)
			}
		}
	}
	t.Logf("stop band (tones ≥ 12 kHz into 24 kHz): worst level %.1f dB", worst)
	// Upsampling: images of a 7 kHz tone (0.875 of the 8 kHz Nyquist) at 16 kHz must not appear.
	y, _ := Resample(sine(8000, 16000, 7000, 0.5), 16000, 24000)
	snr := snrDB(y, 24000, 7000, 0.5, 0.02)
	t.Logf("7 kHz sine 16000 → 24000 Hz: SNR %.1f dB", snr)
	if snr < 80 {
		t.Errorf("16000 → 24000 with a 7 kHz tone: SNR %.1f dB", snr)
	}
	// Pass band: a 10.5 kHz tone (0.875 of the 12 kHz Nyquist) goes through.
	y, _ = Resample(sine(24000, 48000, 10500, 0.5), 48000, 24000)
	if db := rmsDB(y, 24000, 0.5, 0.02); math.Abs(db) > 0.01 {
		t.Errorf("10.5 kHz pass-band tone changed level by %.4f dB", db)
	}
}

func TestResampleBasics(t *testing.T) {
	x := sine(1000, 24000, 440, 0.3)
	y, err := Resample(x, 24000, 24000)
	if err != nil || &y[0] != &x[0] {
		t.Errorf("same rate is not the identity")
	}
	if _, err := Resample(x, 0, 24000); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := Resample(x, 24000, -1); err == nil {
		t.Error("negative rate accepted")
	}
	for _, tc := range []struct{ n, from, to, want int }{
		{0, 48000, 24000, 0}, {1, 48000, 24000, 1}, {3, 48000, 24000, 2},
		{44100, 44100, 24000, 24000}, {44101, 44100, 24000, 24001}, {5, 16000, 24000, 8},
	} {
		y, _ := Resample(make([]float32, tc.n), tc.from, tc.to)
		if len(y) != tc.want {
			t.Errorf("%d samples %d → %d: %d, want %d", tc.n, tc.from, tc.to, len(y), tc.want)
		}
	}
	// DC stays DC (each branch has unit gain) away from the edges.
	dc := make([]float32, 4410)
	for i := range dc {
		dc[i] = 0.25
	}
	y, _ = Resample(dc, 44100, 24000)
	for i := 200; i < len(y)-200; i++ {
		if math.Abs(float64(y[i])-0.25) > 1e-6 {
			t.Fatalf("DC sample %d = %v", i, y[i])
		}
	}
}

func TestResampleDeterministic(t *testing.T) {
	x := sine(96000, 48000, 1234, 0.7) // long enough for the parallel path
	a, _ := Resample(x, 48000, 22050)
	old := runtime.GOMAXPROCS(1)
	b, _ := Resample(x, 48000, 22050)
	runtime.GOMAXPROCS(old)
	if !sameBits(a, b) {
		t.Error("result depends on the number of goroutines")
	}
}

// Resampling stops on a cancelled context; rates outside audio rates are
// refused before any work.
func TestResampleContextAndRates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ResampleContext(ctx, make([]float32, 1<<20), 44100, 24000); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	for _, r := range [][2]int{{1, 24000}, {999, 24000}, {24000, 800000}} {
		if _, err := Resample(make([]float32, 10), r[0], r[1]); err == nil || !strings.Contains(err.Error(), "rates must be in") {
			t.Errorf("%v: %v", r, err)
		}
	}
}

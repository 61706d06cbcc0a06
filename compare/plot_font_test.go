package compare

import (
	"image"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// File names keep their case: the font draws lower and upper case apart
// (the old bitmap font upper-cased everything).
func TestPlotTextKeepsCase(t *testing.T) {
	render := func(s string) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, 200, 30))
		drawText(img, 0, 0, s, colText, 1)
		return img
	}
	a, b := render("Out_Agent.wav"), render("OUT_AGENT.WAV")
	if string(a.Pix) == string(b.Pix) {
		t.Fatal("mixed and upper case render the same")
	}
	inked := 0
	for i := 3; i < len(a.Pix); i += 4 {
		if a.Pix[i] != 0 {
			inked++
		}
	}
	if inked < 50 {
		t.Fatalf("only %d pixels drawn", inked)
	}
	if w := textWidth("ab", 1); w <= 0 || textWidth("abab", 1) <= w {
		t.Fatalf("text widths %d, %d", w, textWidth("abab", 1))
	}
	if s := fitWidth(strings.Repeat("x", 500)+"/Name.wav", 200, 1); !strings.HasSuffix(s, "/Name.wav") || textWidth(s, 1) > 200 {
		t.Fatalf("fitWidth kept %q", s)
	}
}

// The difference panel is scaled against the reference signal: −50 dB noise
// stays a thin band (magnified by a printed power of ten only when it would
// be under a pixel), −20 dB noise is drawn at the reference scale.
func TestDiffScaleAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ref := make([]float32, 24000)
	for i := range ref {
		ref[i] = float32(0.5 * math.Sin(float64(i)*0.05))
	}
	noise := func(db float64) []float32 {
		d := make([]float32, len(ref))
		a := 0.5 * math.Pow(10, db/20)
		for i := range d {
			d[i] = float32(a * (2*rng.Float64() - 1))
		}
		return d
	}
	for _, tc := range []struct {
		db        float64
		gain      float64
		label     string
		maxHeight float64 // drawn peak as a fraction of the panel's half-height
	}{
		{-20, 1, "reference scale (×1)", 0.11},
		{-50, 10, "reference scale ×10", 0.05},
	} {
		d := newDiffScale(ref, noise(tc.db))
		if d.gain != tc.gain || d.refPeak != 0.5 || math.Abs(d.fullScale-0.5/tc.gain) > 1e-12 {
			t.Errorf("%g dB: scale %+v", tc.db, d)
		}
		if h := d.peak / d.fullScale; h > tc.maxHeight || h*diffPixels < 1 {
			t.Errorf("%g dB: drawn at %.3f of full scale", tc.db, h)
		}
		if l := d.label(); !strings.Contains(l, tc.label) || !strings.Contains(l, "dB re ref") {
			t.Errorf("%g dB: label %q", tc.db, l)
		}
	}
	if l := newDiffScale(ref, make([]float32, len(ref))).label(); l != "reference scale" {
		t.Errorf("identical: label %q", l)
	}
}

//go:build !purego

package ops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The NEON convolution tiles run (the hook reports it did) for every row
// count up to tileRows and give the portable tile's bits, on odd window
// shapes; so does the NEON ELU on every length.
func TestNEONConvHooksDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sh := range [][2]int{{1, 1}, {1, 7}, {3, 5}, {2, 33}, {7, 16}} {
		taps, in := sh[0], sh[1]
		L := taps * in
		w, bias := randVec(rng, L*panelCols), randVec(rng, panelCols)
		rowStep, tapStep, outRow := in+3, in+1, panelCols+5
		for R := 1; R <= tileRows(kNEON); R++ {
			x := randVec(rng, (R-1)*rowStep+(taps-1)*tapStep+in)
			want := make([]float32, (R-1)*outRow+panelCols)
			got := make([]float32, len(want))
			convTilePortable(R, panelCols, x, rowStep, tapStep, taps, in, w, want, outRow, bias)
			if !archConvTile(kNEON, R, x, rowStep, tapStep, taps, in, w, got, outRow, bias) {
				t.Fatal("archConvTile did not run")
			}
			for r := range R {
				o := r * outRow
				if i := bitsEqual(got[o:o+panelCols], want[o:o+panelCols]); i >= 0 {
					t.Fatalf("taps %d in %d R %d: row %d output %d = %x, portable %x", taps, in, R, r, i, math.Float32bits(got[o+i]), math.Float32bits(want[o+i]))
				}
			}
		}
	}
	x := make([]float32, 203)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 8)
	}
	x[3], x[9] = float32(math.NaN()), float32(math.Inf(-1))
	got := make([]float32, len(x))
	if n := archELU(kNEON, got, x); n != 200 {
		t.Fatalf("archELU did %d of 203", n)
	}
	for i := range 200 {
		if want := eluPortable(x[i]); math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
			t.Fatalf("ELU(%g) = %x, portable %x", x[i], math.Float32bits(got[i]), math.Float32bits(want))
		}
	}
}

package compare

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"
)

// diffScale is how the difference panel is scaled: against the reference
// signal, so that a difference looks as large as it is next to the signal
// (−50 dB noise is a thin line, not a full-scale waveform). The panel's full
// scale is the reference peak divided by gain; gain is 1 unless the
// difference would stay under one pixel, then the smallest power of ten
// (at most 10^4) that makes it visible, and the label says so. The label
// also gives the difference peak in dB relative to the reference peak.
type diffScale struct {
	refPeak, peak float64 // peaks of |ref| and |cand − ref|
	gain          float64 // magnification against the reference scale
	fullScale     float64 // the value drawn at the panel edge: refPeak / gain
}

// diffPixels is the panel half-height in pixels below which the difference
// counts as invisible.
const diffPixels = (waveHeight - 2) / 2

func newDiffScale(ref, diff []float32) diffScale {
	var d diffScale
	for _, v := range ref {
		d.refPeak = math.Max(d.refPeak, math.Abs(float64(v)))
	}
	for _, v := range diff {
		d.peak = math.Max(d.peak, math.Abs(float64(v)))
	}
	if d.refPeak == 0 {
		d.refPeak = math.Max(d.peak, 1e-30) // silent reference: own scale
	}
	d.gain = 1
	for d.peak > 0 && d.peak*d.gain/d.refPeak*diffPixels < 1 && d.gain < 1e4 {
		d.gain *= 10
	}
	d.fullScale = d.refPeak / d.gain
	return d
}

// label describes the scale for the panel.
func (d diffScale) label() string {
	if d.peak == 0 {
		return "reference scale"
	}
	rel := 20 * math.Log10(d.peak/d.refPeak)
	s := fmt.Sprintf("peak %.3g (%.1f dB re ref)\n", d.peak, rel)
	if d.gain == 1 {
		return s + "reference scale (×1)"
	}
	return s + fmt.Sprintf("reference scale ×%g", d.gain)
}

// Plot layout (pixels).
const (
	plotWidth  = 1400
	plotLeft   = 170 // label column
	plotRight  = 20
	plotGap    = 8
	waveHeight = 100
	melHeight  = 2 * MelBands // two pixel rows per mel band
	stripH     = 24
	plotDiffDB = 20.0 // |ΔL| colour scale: 0 … 20 dB
)

var (
	colBG      = color.RGBA{255, 255, 255, 255}
	colPanel   = color.RGBA{250, 250, 250, 255}
	colFrame   = color.RGBA{170, 170, 170, 255}
	colText    = color.RGBA{20, 20, 20, 255}
	colDim     = color.RGBA{90, 90, 90, 255}
	colRef     = color.RGBA{31, 119, 180, 255}
	colCand    = color.RGBA{230, 110, 0, 255}
	colDiff    = color.RGBA{200, 30, 30, 255}
	colZero    = color.RGBA{200, 200, 200, 255}
	colAbsent  = color.RGBA{225, 225, 225, 255}
	colOver    = color.RGBA{230, 0, 0, 255}
	colOK      = color.RGBA{60, 170, 80, 255}
	colFirst   = color.RGBA{200, 0, 200, 255}
	shadeAlpha = 0.28
)

// plotter maps samples to pixel columns of the plotting area.
type plotter struct {
	img   *image.RGBA
	total int // samples spanned by the time axis: the longer signal
	x0, w int // plotting area: columns x0 … x0+w−1
}

// span returns the sample range [s0, s1) drawn in column col (0-based
// within the plotting area).
func (p *plotter) span(col int) (int, int) {
	s0 := int(int64(col) * int64(p.total) / int64(p.w))
	s1 := int(int64(col+1) * int64(p.total) / int64(p.w))
	if s1 <= s0 {
		s1 = s0 + 1
	}
	return s0, s1
}

// col returns the column of sample s.
func (p *plotter) col(s int) int { return p.x0 + int(int64(s)*int64(p.w)/int64(p.total)) }

func (p *plotter) fill(r image.Rectangle, c color.RGBA) {
	draw.Draw(p.img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

// shade blends c with the given opacity over r.
func (p *plotter) shade(r image.Rectangle, c color.RGBA, alpha float64) {
	r = r.Intersect(p.img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			o := p.img.RGBAAt(x, y)
			mix := func(a, b uint8) uint8 { return uint8(float64(a)*(1-alpha) + float64(b)*alpha + 0.5) }
			p.img.SetRGBA(x, y, color.RGBA{mix(o.R, c.R), mix(o.G, c.G), mix(o.B, c.B), 255})
		}
	}
}

func (p *plotter) vline(x, y0, y1 int, c color.RGBA) {
	for y := y0; y < y1; y++ {
		p.img.SetRGBA(x, y, c)
	}
}

func (p *plotter) border(r image.Rectangle) {
	for x := r.Min.X - 1; x <= r.Max.X; x++ {
		p.img.SetRGBA(x, r.Min.Y-1, colFrame)
		p.img.SetRGBA(x, r.Max.Y, colFrame)
	}
	p.vline(r.Min.X-1, r.Min.Y-1, r.Max.Y+1, colFrame)
	p.vline(r.Max.X, r.Min.Y-1, r.Max.Y+1, colFrame)
}

// wave draws x (scaled so that ±peak fills the panel) into r; columns past
// the end of x are drawn as absent.
func (p *plotter) wave(r image.Rectangle, x []float32, peak float64, c color.RGBA) {
	p.fill(r, colPanel)
	mid := (r.Min.Y + r.Max.Y) / 2
	half := float64(r.Dy()-2) / 2
	for col := 0; col < p.w; col++ {
		px := p.x0 + col
		s0, s1 := p.span(col)
		if s0 >= len(x) {
			p.vline(px, r.Min.Y, r.Max.Y, colAbsent)
			continue
		}
		p.img.SetRGBA(px, mid, colZero)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range x[s0:min(s1, len(x))] {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		y0 := mid - int(math.Round(math.Max(-1, math.Min(1, hi/peak))*half))
		y1 := mid - int(math.Round(math.Max(-1, math.Min(1, lo/peak))*half))
		p.vline(px, y0, y1+1, c)
	}
}

// spec draws a spectrogram-like [frame][band] matrix into r with colour
// map cm over [lo, hi] (column: the STFT frame centred nearest to it);
// columns past sigLen samples are drawn as absent.
func (p *plotter) spec(r image.Rectangle, m [][]float64, sigLen int, lo, hi float64, cm func(float64) color.RGBA) {
	for col := 0; col < p.w; col++ {
		px := p.x0 + col
		s0, s1 := p.span(col)
		centre := (s0 + s1) / 2
		t := int(math.Round(float64(centre-MelFFTSize/2) / MelHop))
		t = max(0, min(t, len(m)-1))
		if centre >= sigLen || len(m) == 0 {
			p.vline(px, r.Min.Y, r.Max.Y, colAbsent)
			continue
		}
		for b := 0; b < MelBands; b++ {
			v := (m[t][b] - lo) / (hi - lo)
			c := cm(math.Max(0, math.Min(1, v)))
			y := r.Max.Y - 2*(b+1) // low bands at the bottom
			p.img.SetRGBA(px, y, c)
			p.img.SetRGBA(px, y+1, c)
		}
	}
}

// ramp interpolates linearly between colour stops spaced evenly over [0, 1].
func ramp(stops []color.RGBA) func(float64) color.RGBA {
	return func(v float64) color.RGBA {
		f := v * float64(len(stops)-1)
		i := int(f)
		if i >= len(stops)-1 {
			return stops[len(stops)-1]
		}
		a, b, u := stops[i], stops[i+1], f-float64(i)
		l := func(x, y uint8) uint8 { return uint8(float64(x) + (float64(y)-float64(x))*u + 0.5) }
		return color.RGBA{l(a.R, b.R), l(a.G, b.G), l(a.B, b.B), 255}
	}
}

var (
	viridis = ramp([]color.RGBA{{68, 1, 84, 255}, {59, 82, 139, 255}, {33, 145, 140, 255}, {94, 201, 98, 255}, {253, 231, 37, 255}})
	// white (equal) … dark red (≥ 20 dB apart)
	heat = ramp([]color.RGBA{{255, 255, 255, 255}, {255, 225, 110, 255}, {240, 120, 30, 255}, {180, 20, 20, 255}, {60, 0, 0, 255}})
)

// tickStep returns a time-axis tick interval (seconds) giving at most ~12
// ticks over dur seconds.
func tickStep(dur float64) float64 {
	for _, s := range []float64{0.08, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600} {
		if dur/s <= 12 {
			return s
		}
	}
	return 7200
}

// Plot draws the comparison as a PNG: both waveforms on a common scale, their
// difference (on the reference's scale, magnified by a printed power of ten
// only when it would otherwise be under a pixel; see diffScale), both log-mel spectrograms (same colour scale: the
// 60 dB above the floor), |ΔL| (0–20 dB), and one cell per 80 ms frame (green
// within the thresholds, red over). Frames over the thresholds are shaded red
// in the waveform panels and marked by a red bar above the spectrograms; a
// magenta line marks the first differing sample. ref and cand are the
// compared signals, res the result of comparing them.
func Plot(w io.Writer, ref, cand []float32, res *Result, in Inputs) error {
	a := res.Audio
	rate := a.SampleRate
	total := max(len(ref), len(cand), 1)
	fs := a.FrameSamples
	if fs <= 0 {
		fs = FrameSamples(rate)
	}

	const header = 84
	panels := []int{waveHeight, waveHeight, waveHeight, melHeight, melHeight, melHeight, stripH}
	h := header
	for _, ph := range panels {
		h += ph + plotGap + 2
	}
	h += 34 // time axis
	img := image.NewRGBA(image.Rect(0, 0, plotWidth, h))
	p := &plotter{img: img, total: total, x0: plotLeft, w: plotWidth - plotLeft - plotRight}
	p.fill(img.Rect, colBG)
	over := res.FramesOverThreshold()
	plotHeader(img, res, in, over, total, fs)

	// Panel rectangles.
	rects := make([]image.Rectangle, len(panels))
	y := header
	for i, ph := range panels {
		rects[i] = image.Rect(p.x0, y, p.x0+p.w, y+ph)
		y += ph + plotGap + 2
	}
	axisY := y - plotGap

	peak, ds := p.waveforms(rects, ref, cand)
	lo := p.mels(rects, ref, cand, rate)
	p.frames(rects, over, total, fs, a.FirstDiffSample)
	for _, r := range rects {
		p.border(r)
	}
	plotLabels(img, rects, peak, ds, lo)
	p.timeAxis(axisY, total, rate)
	return png.Encode(w, img)
}

// plotHeader writes the verdict, the inputs, the figures and the legend
// above the panels.
func plotHeader(img *image.RGBA, res *Result, in Inputs, over []int, total, fs int) {
	a := res.Audio
	rate := a.SampleRate
	vc := colOK
	if !res.Pass() {
		vc = colOver
	}
	title := "pp-offline compare   verdict: "
	drawText(img, 10, 6, title, colText, 2)
	drawText(img, 10+textWidth(title, 2), 6, string(res.Verdict), vc, 2)
	maxW := plotWidth - 20
	drawText(img, 10, 28, fitWidth("reference: "+in.Reference, maxW, 1), colRef, 1)
	drawText(img, 10, 41, fitWidth("candidate: "+in.Candidate, maxW, 1), colCand, 1)
	line := fmt.Sprintf("SNR %s dB   SI-SDR %s dB   log-mel distance %.3f dB   max abs diff %.3g   length %d vs %d (%+d)   rate %d Hz",
		fmtDB(a.SNRdB), fmtDB(a.SISDRdB), a.MelDistanceDB, a.MaxAbsDiff, a.ReferenceSamples, a.CandidateSamples, a.LengthDiff, rate)
	if res.Text != nil {
		line += fmt.Sprintf("   text edits %d", res.Text.EditDistance)
	}
	drawText(img, 10, 54, fitWidth(line, maxW, 1), colText, 1)
	legend := fmt.Sprintf("red: 80 ms frames over threshold (frame SNR < %g dB or frame log-mel distance > %g dB): %d of %d",
		res.Thresholds.MinSNRdB, res.Thresholds.MaxMelDistanceDB, len(over), (total+fs-1)/fs)
	if a.FirstDiffSample >= 0 {
		legend += fmt.Sprintf("   magenta: first difference (frame %d, %.2f s)", a.FirstDiffFrame, float64(a.FirstDiffSample)/float64(rate))
	}
	drawText(img, 10, 67, fitWidth(legend, maxW, 1), colDim, 1)

}

// waveforms draws the reference, the candidate (on a common scale) and
// their difference, and returns the common peak and the difference's scale.
func (p *plotter) waveforms(rects []image.Rectangle, ref, cand []float32) (float64, diffScale) {
	img := p.img
	peak := 0.0
	for _, v := range ref {
		peak = math.Max(peak, math.Abs(float64(v)))
	}
	for _, v := range cand {
		peak = math.Max(peak, math.Abs(float64(v)))
	}
	if peak == 0 {
		peak = 1
	}
	p.wave(rects[0], ref, peak, colRef)
	p.wave(rects[1], cand, peak, colCand)
	n := min(len(ref), len(cand))
	diff := make([]float32, n)
	for i := range diff {
		diff[i] = cand[i] - ref[i]
	}
	ds := newDiffScale(ref, diff)
	p.wave(rects[2], diff, ds.fullScale, colDiff)
	if ds.peak == 0 {
		drawText(img, rects[2].Min.X+8, rects[2].Min.Y+8, "identical over the common part", colDim, 2)
	}

	return peak, ds
}

// mels draws both log-mel spectrograms and |ΔL|, and returns the bottom of
// their dB scale.
func (p *plotter) mels(rects []image.Rectangle, ref, cand []float32, rate int) float64 {
	n := min(len(ref), len(cand))
	// Log-mel spectrograms (floor from the reference, as in the metric).
	mr := MelSpectrogram(ref, rate)
	mc := MelSpectrogram(cand, rate)
	floor := MelFloor(mr)
	logMelInPlace(mr, floor)
	logMelInPlace(mc, floor)
	lr, lc := mr, mc
	lo := 10 * math.Log10(floor)
	p.spec(rects[3], lr, len(ref), lo, lo+MelTopDB, viridis)
	p.spec(rects[4], lc, len(cand), lo, lo+MelTopDB, viridis)
	nt := min(len(lr), len(lc))
	ld := make([][]float64, nt)
	for t := range ld {
		ld[t] = make([]float64, MelBands)
		for b := range ld[t] {
			ld[t][b] = math.Abs(lc[t][b] - lr[t][b])
		}
	}
	p.spec(rects[5], ld, n, 0, plotDiffDB, heat)

	return lo
}

// frames draws the per-frame strip, shades the frames over the thresholds
// and marks the first differing sample (firstDiff; < 0: none).
func (p *plotter) frames(rects []image.Rectangle, over []int, total, fs, firstDiff int) {
	img := p.img
	// Per-frame strip and shading of frames over the thresholds.
	isOver := make(map[int]bool, len(over))
	for _, f := range over {
		isOver[f] = true
	}
	nf := (total + fs - 1) / fs
	for f := 0; f < nf; f++ {
		x0, x1 := p.col(f*fs), p.col(min((f+1)*fs, total))
		if x1 <= x0 {
			x1 = x0 + 1
		}
		c := colOK
		if isOver[f] {
			c = colOver
		}
		strip := rects[6]
		p.fill(image.Rect(x0, strip.Min.Y, x1, strip.Max.Y), c)
		if x1-x0 >= 4 {
			p.vline(x0, strip.Min.Y, strip.Max.Y, colBG)
		}
		if !isOver[f] {
			continue
		}
		for _, r := range rects[:3] {
			p.shade(image.Rect(x0, r.Min.Y, x1, r.Max.Y), colOver, shadeAlpha)
		}
		for _, r := range rects[3:6] {
			p.fill(image.Rect(x0, r.Min.Y-6, x1, r.Min.Y-2), colOver)
		}
	}
	if firstDiff >= 0 {
		x := p.col(firstDiff)
		for _, r := range rects {
			for yy := r.Min.Y; yy < r.Max.Y; yy++ {
				if (yy/3)%2 == 0 {
					img.SetRGBA(x, yy, colFirst)
				}
			}
		}
	}

}

// plotLabels names each panel and its scale.
func plotLabels(img *image.RGBA, rects []image.Rectangle, peak float64, ds diffScale, lo float64) {
	labels := []struct{ name, sub string }{
		{"reference", fmt.Sprintf("peak %.3g", peak)},
		{"candidate", "same scale"},
		{"cand − ref", ds.label()},
		{"ref log-mel", fmt.Sprintf("%.0f … %.0f dB", lo, lo+MelTopDB)},
		{"cand log-mel", "same scale"},
		{"log-mel diff", fmt.Sprintf("|ΔL| 0 … %.0f dB", plotDiffDB)},
		{"80 ms frames", ""},
	}
	for i, l := range labels {
		r := rects[i]
		c := colText
		switch i {
		case 0, 3:
			c = colRef
		case 1, 4:
			c = colCand
		}
		scale := 2
		if textWidth(l.name, 2) > plotLeft-16 {
			scale = 1
		}
		ty := r.Min.Y + 2
		if i == 6 {
			ty = r.Min.Y + (r.Dy()-lineHeight(scale))/2
		}
		drawText(img, 8, ty, l.name, c, scale)
		for k, sub := range strings.Split(l.sub, "\n") {
			if sub != "" {
				drawText(img, 8, ty+lineHeight(scale)+2+k*lineHeight(1), sub, colDim, 1)
			}
		}
		if i >= 3 && i <= 5 {
			drawText(img, 8, r.Max.Y-glyphH-2, "mel bands 0–79", colDim, 1)
		}
	}

}

// timeAxis draws the ticks and seconds under the panels.
func (p *plotter) timeAxis(axisY, total, rate int) {
	img := p.img
	dur := float64(total) / float64(rate)
	step := tickStep(dur)
	for k := 0; float64(k)*step <= dur+1e-9; k++ {
		t := float64(k) * step
		x := p.col(int(math.Round(t * float64(rate))))
		x = min(x, p.x0+p.w-1)
		p.vline(x, axisY, axisY+5, colText)
		lab := fmt.Sprintf("%g s", math.Round(t*1000)/1000)
		lx := max(x-textWidth(lab, 1)/2, 0)
		lx = min(lx, plotWidth-textWidth(lab, 1))
		drawText(img, lx, axisY+8, lab, colText, 1)
	}
	drawText(img, 8, axisY+8, "time", colText, 1)

}

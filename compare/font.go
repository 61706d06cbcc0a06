package compare

// Text in the comparison plot is drawn with the Go fonts (Go Regular, by
// Bigelow & Holmes, BSD-licensed, from golang.org/x/image/font/gofont):
// a real proportional font, so file names keep their case and every
// character a path may hold is drawn. It replaced a 5×7 upper-case bitmap
// font. golang.org/x/image is maintained by the Go team; the font is
// embedded (no file is read at run time).

import (
	"image"
	"image/color"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Text sizes: scale 1 is the body text, scale 2 titles and panel names.
var textSizes = map[int]float64{1: 12, 2: 17}

// glyphH is the line height at scale 1 (pixels).
const glyphH = 14

var (
	faceOnce sync.Once
	faces    map[int]font.Face
)

func face(scale int) font.Face {
	faceOnce.Do(func() {
		f, err := opentype.Parse(goregular.TTF)
		if err != nil {
			panic("compare: embedded Go font: " + err.Error()) // cannot happen: the font is embedded
		}
		faces = map[int]font.Face{}
		for s, size := range textSizes {
			fc, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
			if err != nil {
				panic("compare: embedded Go font: " + err.Error())
			}
			faces[s] = fc
		}
	})
	if fc, ok := faces[scale]; ok {
		return fc
	}
	return faces[1]
}

// textWidth returns the width in pixels of s drawn at the given scale.
func textWidth(s string, scale int) int {
	return font.MeasureString(face(scale), s).Ceil()
}

// lineHeight is the height of a line of text at the given scale.
func lineHeight(scale int) int {
	return face(scale).Metrics().Height.Ceil()
}

// drawText draws s with its top-left corner at (x, y) in colour c.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	fc := face(scale)
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: fc,
		Dot: fixed.P(x, y+fc.Metrics().Ascent.Ceil())}
	d.DrawString(s)
}

// fitWidth shortens s (keeping its end, which holds the file name) to at
// most px pixels at the given scale.
func fitWidth(s string, px, scale int) string {
	if textWidth(s, scale) <= px {
		return s
	}
	r := []rune(s)
	for i := 1; i < len(r); i++ {
		t := "…" + string(r[i:])
		if textWidth(t, scale) <= px {
			return t
		}
	}
	return "…"
}

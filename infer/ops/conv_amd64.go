//go:build !purego

package ops

// Assembly tiles of the convolutions (conv_amd64.s, written by conv_gen.go).
// Pointers are to the first element; archConvTile checks every bound first.

//go:noescape
func convTile512R1(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R2(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R3(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R4(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R5(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R6(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R7(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R8(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R9(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R10(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R11(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile512R12(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R1(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R2(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R3(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R4(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R5(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTile256R6(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func eluAVX512(dst, src *float32, n int)

//go:noescape
func eluAVX2(dst, src *float32, n int)

// archConvTile runs the assembly tile of variant id on R window rows and
// the full 32-column panel w (AVX2: as two 16-column halves); false if the
// variant has none.
func archConvTile(id kernelID, R int, x []float32, rowStep, tapStep, taps, in int, w, out []float32, outRow int, bias []float32) bool {
	if id != kAVX512 && id != kAVX2 {
		return false
	}
	if R <= 0 || R > tileRows(id) || taps <= 0 || in <= 0 || rowStep < 0 || tapStep < 0 ||
		len(x) < (R-1)*rowStep+(taps-1)*tapStep+in || len(w) < taps*in*panelCols ||
		len(out) < (R-1)*outRow+panelCols || len(bias) < panelCols {
		panic("ops: kernel bounds")
	}
	xp, wp, op, bp := &x[0], &w[0], &out[0], &bias[0]
	xr, xt, orow := 4*rowStep, 4*tapStep, 4*outRow
	if id == kAVX512 {
		switch R {
		case 1:
			convTile512R1(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 2:
			convTile512R2(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 3:
			convTile512R3(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 4:
			convTile512R4(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 5:
			convTile512R5(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 6:
			convTile512R6(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 7:
			convTile512R7(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 8:
			convTile512R8(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 9:
			convTile512R9(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 10:
			convTile512R10(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 11:
			convTile512R11(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 12:
			convTile512R12(xp, xr, xt, taps, in, wp, op, orow, bp)
		}
		return true
	}
	for h := 0; h < 2; h++ {
		if h == 1 {
			wp, op, bp = &w[16], &out[16], &bias[16]
		}
		switch R {
		case 1:
			convTile256R1(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 2:
			convTile256R2(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 3:
			convTile256R3(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 4:
			convTile256R4(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 5:
			convTile256R5(xp, xr, xt, taps, in, wp, op, orow, bp)
		case 6:
			convTile256R6(xp, xr, xt, taps, in, wp, op, orow, bp)
		}
	}
	return true
}

// archELU runs the assembly ELU on the longest prefix it handles and
// returns its length.
func archELU(id kernelID, dst, src []float32) int {
	src = src[:len(dst)]
	switch id {
	case kAVX512:
		n := len(dst) &^ 15
		if n > 0 {
			eluAVX512(&dst[0], &src[0], n)
		}
		return n
	case kAVX2:
		n := len(dst) &^ 7
		if n > 0 {
			eluAVX2(&dst[0], &src[0], n)
		}
		return n
	}
	return 0
}

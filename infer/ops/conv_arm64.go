//go:build !purego

package ops

// Assembly tiles of the convolutions (conv_arm64.s): up to 6 window rows ×
// 16 outputs. Pointers are to the first element; archConvTile checks every
// bound first.

//go:noescape
func convTileNEONR1(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTileNEONR2(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTileNEONR3(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTileNEONR4(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTileNEONR5(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

//go:noescape
func convTileNEONR6(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)

// neonConvRows is the most window rows of one NEON tile: 6 rows × 4
// accumulator registers of a half panel, the half panel's 4 weight
// registers and the broadcast value fit the 32 registers.
const neonConvRows = 6

// archConvTile runs the NEON tiles on R window rows (at most
// tileRows(kNEON) = 12: as groups of up to 6 rows) and the full 32-column
// panel w (as two 16-column halves); false for another variant.
func archConvTile(id kernelID, R int, x []float32, rowStep, tapStep, taps, in int, w, out []float32, outRow int, bias []float32) bool {
	if id != kNEON {
		return false
	}
	if R <= 0 || R > tileRows(id) || taps <= 0 || in <= 0 || rowStep < 0 || tapStep < 0 ||
		len(x) < (R-1)*rowStep+(taps-1)*tapStep+in || len(w) < taps*in*panelCols ||
		len(out) < (R-1)*outRow+panelCols || len(bias) < panelCols {
		panic("ops: kernel bounds")
	}
	for r0 := 0; r0 < R; r0 += neonConvRows {
		n := min(neonConvRows, R-r0)
		for h := 0; h < panelCols; h += 16 {
			xp, wp, op, bp := &x[r0*rowStep], &w[h], &out[r0*outRow+h], &bias[h]
			switch n {
			case 1:
				convTileNEONR1(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			case 2:
				convTileNEONR2(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			case 3:
				convTileNEONR3(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			case 4:
				convTileNEONR4(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			case 5:
				convTileNEONR5(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			default:
				convTileNEONR6(xp, rowStep, tapStep, taps, in, wp, op, outRow, bp)
			}
		}
	}
	return true
}

//go:noescape
func eluNEON(dst, src *float32, n int)

// archELU runs the NEON ELU on the longest prefix of a multiple of 4 values
// and returns its length.
func archELU(id kernelID, dst, src []float32) int {
	if id != kNEON {
		return 0
	}
	src = src[:len(dst)]
	n := len(dst) &^ 3
	if n > 0 {
		eluNEON(&dst[0], &src[0], n)
	}
	return n
}

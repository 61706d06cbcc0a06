//go:build amd64 && !purego && !amd64.v3

package ops

// The assembly kernels of mathvec_amd64.s. They reproduce GOAMD64=v1 code
// of math.erf (no fused multiply-adds), so they are not built for v3 and
// above, where the compiler fuses erf's multiply-adds: there
// mathvec_other.go's scalar loops run for all three functions.
//
// Pointers are to the first element; the wrappers below have checked the
// lengths (n ≤ every slice's length, n a multiple of the kernel's block).

//go:noescape
func expAVX512(dst, x *float32, n int)

//go:noescape
func expAVX2(dst, x *float32, n int)

//go:noescape
func siluMulAVX512(dst, gt, m *float32, n int) int

//go:noescape
func siluMulAVX2(dst, gt, m *float32, n int) int

//go:noescape
func geluAVX512(x *float32, n int) int

//go:noescape
func geluAVX2(x *float32, n int) int

// archExpTo runs the assembly exp on the longest prefix it handles and
// returns its length.
func archExpTo(id kernelID, dst, x []float32) int {
	x = x[:len(dst)]
	var n int
	switch id {
	case kAVX512:
		if n = len(dst) &^ 15; n > 0 {
			expAVX512(&dst[0], &x[0], n)
		}
	case kAVX2:
		if n = len(dst) &^ 7; n > 0 {
			expAVX2(&dst[0], &x[0], n)
		}
	}
	return n
}

// archSiLUMul runs the assembly SiLU·gate on the longest prefix it handles,
// the blocks holding a NaN in g or m by the scalar code, and returns the
// prefix's length.
func archSiLUMul(id kernelID, dst, g, m []float32) int {
	g, m = g[:len(dst)], m[:len(dst)]
	var n, w int
	switch id {
	case kAVX512:
		n, w = len(dst)&^15, 16
	case kAVX2:
		n, w = len(dst)&^7, 8
	default:
		return 0
	}
	for i := 0; i < n; {
		if id == kAVX512 {
			i += siluMulAVX512(&dst[i], &g[i], &m[i], n-i)
		} else {
			i += siluMulAVX2(&dst[i], &g[i], &m[i], n-i)
		}
		if i < n {
			siluMulGo(dst[i:i+w], g[i:i+w], m[i:i+w])
			i += w
		}
	}
	return n
}

// archGELU runs the assembly GELU on the longest prefix it handles, the
// blocks holding a NaN by the scalar code, and returns the prefix's length.
func archGELU(id kernelID, x []float32) int {
	var n, w int
	switch id {
	case kAVX512:
		n, w = len(x)&^15, 16
	case kAVX2:
		n, w = len(x)&^3, 4
	default:
		return 0
	}
	for i := 0; i < n; {
		if id == kAVX512 {
			i += geluAVX512(&x[i], n-i)
		} else {
			i += geluAVX2(&x[i], n-i)
		}
		if i < n {
			GELU(x[i : i+w])
			i += w
		}
	}
	return n
}

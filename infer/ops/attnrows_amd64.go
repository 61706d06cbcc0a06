//go:build !purego

package ops

// Row kernels of attnrows_amd64.s. Pointers are to the first element; the
// callers (DotRows, AxpyRows) have checked that every row's elements lie
// within mat.

//go:noescape
func dotRowsAVX512(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)

//go:noescape
func dotRowsAVX2(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)

//go:noescape
func axpyRowsAVX512(dst, w, mat *float32, stride int, rows *int32, nrows, n int)

//go:noescape
func axpyRowsAVX2(dst, w, mat *float32, stride int, rows *int32, nrows, n int)

// archDotRows computes the first nl (a positive multiple of 32) elements'
// dot products of every row into dst; false if the variant has no kernel.
func archDotRows(id kernelID, dst, q, mat []float32, stride int, rows []int32, nl int) bool {
	if nl <= 0 || nl%lanes != 0 || len(q) < nl || len(dst) < len(rows) || len(rows) == 0 {
		panic("ops: kernel bounds")
	}
	switch id {
	case kAVX512:
		dotRowsAVX512(&dst[0], &q[0], &mat[0], stride, &rows[0], len(rows), nl)
	case kAVX2:
		dotRowsAVX2(&dst[0], &q[0], &mat[0], stride, &rows[0], len(rows), nl)
	default:
		return false
	}
	return true
}

// archAxpyRows accumulates every row into the largest multiple of the
// vector width of dst and returns how many elements it did; false if the
// variant has no kernel.
func archAxpyRows(id kernelID, dst, w, mat []float32, stride int, rows []int32) (int, bool) {
	if len(w) < len(rows) || len(rows) == 0 {
		panic("ops: kernel bounds")
	}
	var n int
	switch id {
	case kAVX512:
		if n = len(dst) &^ 15; n > 0 {
			axpyRowsAVX512(&dst[0], &w[0], &mat[0], stride, &rows[0], len(rows), n)
		}
	case kAVX2:
		if n = len(dst) &^ 7; n > 0 {
			axpyRowsAVX2(&dst[0], &w[0], &mat[0], stride, &rows[0], len(rows), n)
		}
	default:
		return 0, false
	}
	return n, true
}

//go:build !purego

package ops

// Row kernels of attnrows_arm64.s. Pointers are to the first element; the
// callers (DotRows, AxpyRows) have checked that every row's elements lie
// within mat.

//go:noescape
func dotRowsNEON(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)

//go:noescape
func axpyRowsNEON(dst, w, mat *float32, stride int, rows *int32, nrows, n int)

// archDotRows computes the first nl (a positive multiple of 32) elements'
// dot products of every row into dst; false if the variant has no kernel.
func archDotRows(id kernelID, dst, q, mat []float32, stride int, rows []int32, nl int) bool {
	if id != kNEON {
		return false
	}
	if nl <= 0 || nl%lanes != 0 || len(q) < nl || len(dst) < len(rows) || len(rows) == 0 {
		panic("ops: kernel bounds")
	}
	dotRowsNEON(&dst[0], &q[0], &mat[0], stride, &rows[0], len(rows), nl)
	return true
}

// archAxpyRows accumulates every row into the largest multiple of 16
// elements of dst and returns how many it did; false if the variant has
// no kernel.
func archAxpyRows(id kernelID, dst, w, mat []float32, stride int, rows []int32) (int, bool) {
	if id != kNEON {
		return 0, false
	}
	if len(w) < len(rows) || len(rows) == 0 {
		panic("ops: kernel bounds")
	}
	n := len(dst) &^ 15
	if n > 0 {
		axpyRowsNEON(&dst[0], &w[0], &mat[0], stride, &rows[0], len(rows), n)
	}
	return n, true
}

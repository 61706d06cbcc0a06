//go:build !purego

package ops

// arm64 has no row kernels yet: DotRows runs the NEON dot kernel row by
// row and AxpyRows the NEON Axpy kernel row by row.

func archDotRows(id kernelID, dst, q, mat []float32, stride int, rows []int32, nl int) bool {
	return false
}

func archAxpyRows(id kernelID, dst, w, mat []float32, stride int, rows []int32) (int, bool) {
	return 0, false
}

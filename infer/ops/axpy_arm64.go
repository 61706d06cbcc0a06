//go:build !purego

package ops

//go:noescape
func axpyNEON(dst, x *float32, a float32, n int)

// archAxpy handles the largest multiple of 16 elements and returns how many
// it did.
func archAxpy(id kernelID, dst []float32, a float32, x []float32) int {
	if id != kNEON {
		return 0
	}
	n := len(dst) &^ 15
	if n > 0 {
		axpyNEON(&dst[0], &x[0], a, n)
	}
	return n
}

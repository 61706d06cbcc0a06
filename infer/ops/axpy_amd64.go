//go:build amd64 && !purego

package ops

//go:noescape
func axpyAVX512(dst, x *float32, a float32, n int)

//go:noescape
func axpyAVX2(dst, x *float32, a float32, n int)

// archAxpy handles the largest multiple of the vector width and returns how
// many elements it did.
func archAxpy(id kernelID, dst []float32, a float32, x []float32) int {
	switch id {
	case kAVX512:
		n := len(dst) &^ 15
		if n > 0 {
			axpyAVX512(&dst[0], &x[0], a, n)
		}
		return n
	case kAVX2:
		n := len(dst) &^ 7
		if n > 0 {
			axpyAVX2(&dst[0], &x[0], a, n)
		}
		return n
	}
	return 0
}

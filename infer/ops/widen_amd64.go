//go:build amd64 && !purego

package ops

//go:noescape
func widenBF16AVX512(dst *float32, src *uint16, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

// archWidenBF16 widens the largest multiple of the vector width and returns
// how many elements it did.
func archWidenBF16(id kernelID, dst []float32, src []uint16) int {
	switch id {
	case kAVX512:
		n := len(src) &^ 15
		if n > 0 {
			widenBF16AVX512(&dst[0], &src[0], n)
		}
		return n
	case kAVX2:
		n := len(src) &^ 7
		if n > 0 {
			widenBF16AVX2(&dst[0], &src[0], n)
		}
		return n
	}
	return 0
}

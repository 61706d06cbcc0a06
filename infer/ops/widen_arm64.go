//go:build !purego

package ops

//go:noescape
func widenBF16NEON(dst *float32, src *uint16, n int)

// archWidenBF16 widens the largest multiple of 16 elements and returns how
// many it did.
func archWidenBF16(id kernelID, dst []float32, src []uint16) int {
	if id != kNEON {
		return 0
	}
	n := len(src) &^ 15
	if n > 0 {
		widenBF16NEON(&dst[0], &src[0], n)
	}
	return n
}

//go:build !purego

package ops

//go:noescape
func readSumNEON(p *byte, n int) uint64

// readSum is the streaming read of MeasureReadBandwidth (len(p) a multiple
// of 128).
func readSum(p []byte) uint64 {
	if n := len(p) &^ 127; n > 0 {
		return readSumNEON(&p[0], n) + readSumGo(p[n:])
	}
	return readSumGo(p)
}

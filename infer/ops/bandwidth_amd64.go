//go:build !purego

package ops

import "golang.org/x/sys/cpu"

//go:noescape
func readSumAVX2(p *byte, n int) uint64

// readSum is the streaming read of MeasureReadBandwidth (len(p) a multiple
// of 128).
func readSum(p []byte) uint64 {
	if cpu.X86.HasAVX2 && len(p) > 0 {
		return readSumAVX2(&p[0], len(p)&^127)
	}
	return readSumGo(p)
}

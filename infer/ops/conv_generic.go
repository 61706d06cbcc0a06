//go:build (!amd64 && !arm64) || purego

package ops

// No assembly convolution tiles on this platform: the portable ones run.
func archConvTile(id kernelID, R int, x []float32, rowStep, tapStep, taps, in int, w, out []float32, outRow int, bias []float32) bool {
	return false
}

func archELU(id kernelID, dst, src []float32) int { return 0 }

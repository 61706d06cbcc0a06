//go:build (!amd64 && !arm64) || purego

package ops

import "github.com/pp-offline/pp-offline/infer/weights"

// No assembly kernels on this platform: the portable ones run.
func addArchKernels() {}

func archMV(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool { return false }

func archMM(id kernelID, m Mat, r, nl int, xs [][]float32, out *[16]float32, pf bool) bool {
	return false
}

func archDot(id kernelID, a, b []float32, nl int) (float32, bool) { return 0, false }

func archDQ(id kernelID, dt weights.DType, row []byte, nl int, dst []float32) bool { return false }

//go:build !purego

package ops

import "github.com/pp-offline/pp-offline/infer/weights"

// No NEON kernels over quantized blocks yet: the portable ones run.

func archMVQ(id kernelID, m Mat, r0, r1, nl int, x, dst []float32) bool { return false }

func archDQ(id kernelID, dt weights.DType, row []byte, nl int, dst []float32) bool { return false }

//go:build !amd64 || purego

package ops

// No bf16 assembly kernels on this platform: the portable ones run.
const hasDPBF16 = false

func archBF16RoundVec(dst []uint16, src []float32) int { return 0 }

func archBF16MV(m Mat, r0, r1, nl int, xb []uint16, dst []float32) {
	panic("ops: no bf16 assembly kernels")
}

func archBF16MM(m Mat, r, cb, n int, xb []uint16, t, T int, out *[16]float32, acc []float32, flags int, pf bool) {
	panic("ops: no bf16 assembly kernels")
}

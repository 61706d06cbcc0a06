//go:build !amd64 || purego || amd64.v3

package ops

// No vector exp, GELU or SiLU here (arm64 has none yet; under GOAMD64=v3
// and above the compiler fuses math.erf's multiply-adds, which the amd64
// kernels do not reproduce): the scalar loops of mathvec.go do all of it.

func archExpTo(id kernelID, dst, x []float32) int      { return 0 }
func archSiLUMul(id kernelID, dst, g, m []float32) int { return 0 }
func archGELU(id kernelID, x []float32) int            { return 0 }

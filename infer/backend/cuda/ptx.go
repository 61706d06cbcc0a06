package cuda

import (
	"embed"
	"fmt"
)

// The kernels' PTX, generated from kernels/*.cu by scripts/build-ptx.sh
// (TestPTXUpToDate checks it is what the sources compile to).
//
//go:embed kernels/ptx/*.ptx
var ptxFS embed.FS

// families are the kernel source files, one PTX module each.
var families = []string{"matmul", "norm", "elementwise", "attention"}

// ptxFor is the PTX of a family for a device of compute capability
// major.minor: compute_90 on Hopper and later, else compute_80 (the driver
// JIT-compiles it for the actual GPU).
func ptxFor(family string, major int) ([]byte, error) {
	arch := "80"
	if major >= 9 {
		arch = "90"
	}
	if major < 8 {
		return nil, fmt.Errorf("compute capability %d.x: the CUDA backend needs 8.0 (Ampere) or later", major)
	}
	return ptxFS.ReadFile("kernels/ptx/" + family + ".sm_" + arch + ".ptx")
}

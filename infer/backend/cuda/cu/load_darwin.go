//go:build !nocuda && darwin

package cu

import "fmt"

// load on macOS: NVIDIA has no CUDA driver for it, so nothing is looked
// for (no dlopen of a library that cannot be there); --device auto runs on
// the CPU and --device cuda says why in one line.
func load() error {
	return fmt.Errorf("%w: CUDA is not available on macOS (NVIDIA ships no driver for it)", ErrNoDriver)
}

//go:build !nocuda && windows

package cu

import "fmt"

// load on Windows: the binding opens libcuda.so.1 through purego's dlopen,
// which Windows does not have (its driver is nvcuda.dll, not bound yet).
func load() error {
	return fmt.Errorf("%w: the CUDA backend is not supported on Windows yet", ErrNoDriver)
}

//go:build unix

package weights

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// A checkpoint truncated under the scan of a large tensor: the scan's
// goroutines read pages past the file's new end. The fault comes back to
// the caller as the panic SetPanicOnFault gives there (which a job turns
// into an error), not as a crash of the process from another goroutine.
func TestCheckFiniteFaultReachesCaller(t *testing.T) {
	n := 3 * scanChunk / 2 // bytes of BF16 zeros: two chunks, both scanned off the caller
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := WriteFile(path, []*Tensor{{Name: "w", DType: BF16, Shape: []int{n / 2}, Data: make([]byte, n)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.mapped {
		t.Skip("the file is not mapped here")
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if _, ok := r.(interface{ Addr() uintptr }); !ok {
			t.Fatalf("recovered %v, want the fault of a read past the file's end", r)
		}
	}()
	err = f.CheckFinite()
	t.Fatalf("the scan of a truncated mapping returned %v", err)
}

package cuda_test

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/backendtest"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
)

// The CUDA backend passes the conformance check against the portable
// one-thread CPU backend: within a tolerance of its values (another
// reduction order), and the batching contract exactly. f32 compute runs
// the float32 kernels; bf16 runs bf16 weights on tensor cores with bf16
// activations (the CPU's bf16 mode's rounding, within bf16 of f32).
// Skipped without a GPU (scripts/gpu-check.sh runs it on one).
func TestConformance(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	ref, err := cpu.New(cpu.Options{Threads: 1, Kernel: "portable", ComputeDType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, c := range []struct {
		dtype string
		tol   float64
	}{{"f32", 1e-4}, {"bf16", 2e-2}} {
		be, err := cuda.New(cuda.Options{ComputeDType: c.dtype})
		if err != nil {
			t.Fatal(err)
		}
		t.Run(be.Name(), func(t *testing.T) { backendtest.Run(t, be, ref, backendtest.Options{Tol: c.tol}) })
		be.Close()
	}
}

// A memory limit is a hard limit: allocations past it fail with the
// offload package's out-of-memory error (a job turns it into its error).
func TestMemoryLimit(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	be, err := cuda.New(cuda.Options{Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	func() {
		defer func() {
			r := recover()
			if _, ok := r.(*cuda.Failure); !ok {
				t.Fatalf("allocating past the limit: %v, want a *cuda.Failure", r)
			}
		}()
		be.NewActs(1<<13, 1<<12) // 128 MiB
	}()
	if used, _, limit := be.Memory(); used > limit {
		t.Fatalf("%d bytes used of a %d limit", used, limit)
	}
}

// Without a driver (this machine, CI): a clear error value, no exit.
func TestUnavailable(t *testing.T) {
	err := cuda.Available()
	if err == nil {
		t.Skip("a GPU is present")
	}
	if !cuda.IsUnavailable(err) {
		t.Fatalf("Available: %v, not an unavailability", err)
	}
	if _, err := cuda.New(cuda.Options{}); err == nil || !cuda.IsUnavailable(err) {
		t.Fatalf("New without a GPU: %v", err)
	}
	t.Logf("without a GPU: %v", err)
}

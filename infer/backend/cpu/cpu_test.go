package cpu_test

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/backendtest"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// Every kernel variant and thread count of the CPU backend passes the
// conformance check with the bits of the portable one-thread backend.
func TestConformance(t *testing.T) {
	ref, err := cpu.New(cpu.Options{Threads: 1, Kernel: "portable", ComputeDType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, k := range ops.KernelNames() {
		for _, threads := range []int{1, 3} {
			be, err := cpu.New(cpu.Options{Threads: threads, Kernel: k, ComputeDType: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			t.Run(be.Name(), func(t *testing.T) { backendtest.Run(t, be, ref, backendtest.Options{Exact: true}) })
			be.Close()
		}
	}
}

// The bf16 compute dtype keeps the batching contract exactly and stays
// within bf16 rounding of the f32 reference.
func TestConformanceBF16(t *testing.T) {
	ref, err := cpu.New(cpu.Options{Threads: 1, Kernel: "portable", ComputeDType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	be, err := cpu.New(cpu.Options{Threads: 2, ComputeDType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	backendtest.Run(t, be, ref, backendtest.Options{Tol: 2e-2})
}

package ops

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMatMulBatchCPU is BenchmarkMatMulBatch on one thread, timed by
// the thread's CPU time as well as the clock: on a machine that other work
// shares, cpu-ms/op and GFLOP/s-cpu (per core) stay close to what a quiet
// core gives while ns/op does not. Compare the variants and batch sizes by
// those; the memory bound of 2 threads is BenchmarkMatMulBatch's.
func BenchmarkMatMulBatchCPU(b *testing.B) {
	const rows, cols = 2048, 8448
	rng := rand.New(rand.NewPCG(5, 5))
	xs := make([][]float32, 32)
	dst := make([][]float32, len(xs))
	for i := range xs {
		xs[i] = randVec(rng, cols)
		dst[i] = make([]float32, rows)
	}
	// "BF16c" is BF16 weights in the bf16 compute dtype (VDPBF16PS where
	// the CPU has AVX512_BF16; skipped where it runs the portable code).
	for _, label := range []string{"BF16", "BF16c", "Q8_0", "Q4_K", "F16", "F32"} {
		dt, compute := weights.F32, "f32"
		switch label {
		case "BF16":
			dt = weights.BF16
		case "BF16c":
			dt, compute = weights.BF16, "bf16"
		case "Q8_0":
			dt = weights.Q8_0
		case "Q4_K":
			dt = weights.Q4_K
		case "F16":
			dt = weights.F16
		}
		m := benchMat(dt, rows, cols)
		for _, B := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16, 32} {
			for _, name := range KernelNames() {
				if name == "portable" {
					continue
				}
				b.Run(fmt.Sprintf("%s/B=%d/%s", label, B, name), func(b *testing.B) {
					e, err := NewEngine(EngineOptions{Threads: 1, Kernel: name, ComputeDType: compute})
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close()
					if compute == "bf16" && e.BF16KernelName() == "portable" {
						b.Skip("no bf16 compute kernel here")
					}
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.SetBytes(m.Bytes())
					c0, n := threadCPU(b), 0
					for b.Loop() {
						n++
						if B == 1 {
							e.MatVec(m, dst[0], xs[0])
						} else {
							e.MatMul(m, dst[:B], xs[:B])
						}
					}
					cpu := (threadCPU(b) - c0).Seconds()
					flops := 2 * float64(rows) * float64(cols) * float64(B) * float64(n)
					b.ReportMetric(cpu*1e3/float64(n), "cpu-ms/op")
					b.ReportMetric(flops/cpu/1e9, "GFLOP/s-cpu")
				})
			}
		}
	}
}

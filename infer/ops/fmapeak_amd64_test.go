//go:build !purego

package ops

import (
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/cpu"
)

// BenchmarkFMAPeak is the machine's float32 FMA peak, the bound the batch
// tiles are measured against (docs/PERFORMANCE.md): independent FMA
// chains (24 on zmm, 12 on ymm: fmapeak_amd64.go), on one thread and on
// every thread at once (GOMAXPROCS goroutines, each locked to its OS
// thread), with zmm and ymm registers.
// GFLOP/s counts 2 a lane (an FMA); "dpbf16" is the bf16 mode's
// VDPBF16PS (AVX512_BF16) in the same chains, 4 a lane (two products, two
// additions).
func BenchmarkFMAPeak(b *testing.B) {
	// ~2–4 ms a run, so that waking the goroutines' threads (tens of µs
	// in a VM) stays under 1 %.
	const rounds = 1 << 20
	for _, w := range []struct {
		name   string
		lanes  int // FLOPs an instruction, over 2
		chains int
		has    bool
		run    func(int) float32
	}{{"zmm", 16, 24, cpu.X86.HasAVX512F, fmaPeak512}, {"ymm", 8, 12, cpu.X86.HasAVX2 && cpu.X86.HasFMA, fmaPeak256}, {"dpbf16", 32, 24, hasDPBF16, dpbf16Peak512}} {
		for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(w.name+"/threads="+strconv.Itoa(threads), func(b *testing.B) {
				if !w.has {
					b.Skip("not on this CPU")
				}
				for b.Loop() {
					var wg sync.WaitGroup
					for range threads {
						wg.Go(func() {
							runtime.LockOSThread()
							defer runtime.UnlockOSThread()
							w.run(rounds)
						})
					}
					wg.Wait()
				}
				flops := 2 * float64(w.chains*w.lanes) * rounds * float64(threads) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestFMAPeakRounds: the benchmark's chains run all their rounds (each
// ends at n), so the GFLOP/s it reports count FMAs that ran.
func TestFMAPeakRounds(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		if cpu.X86.HasAVX512F {
			if got := fmaPeak512(n); got != float32(n) {
				t.Errorf("fmaPeak512(%d) = %g, want %d", n, got, n)
			}
		}
		if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
			if got := fmaPeak256(n); got != float32(n) {
				t.Errorf("fmaPeak256(%d) = %g, want %d", n, got, n)
			}
		}
		if hasDPBF16 {
			if got := dpbf16Peak512(n); got != float32(2*n) {
				t.Errorf("dpbf16Peak512(%d) = %g, want %d", n, got, 2*n)
			}
		}
	}
}

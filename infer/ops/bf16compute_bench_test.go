package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// The f32 and bf16 compute modes side by side on the best kernel variant
// (bf16: VDPBF16PS where the CPU has AVX512_BF16), plus the bf16 mode's
// portable fallback on the smallest shape. MB/s counts the weight bytes
// (the same in both modes); the matrix-vector benchmarks cycle through
// ≥ 256 MiB of matrices so that the weights come from memory, as in decode.

func benchComputeMatVec(b *testing.B, rows, cols int, portable bool) {
	ms := []Mat{benchMat(weights.BF16, rows, cols)}
	for len(ms)*int(ms[0].Bytes()) < 256<<20 {
		ms = append(ms, benchMat(weights.BF16, rows, cols))
	}
	x := randVec(rand.New(rand.NewPCG(1, 1)), cols)
	dst := make([]float32, rows)
	run := func(b *testing.B, mode string) {
		withComputeDType(b, mode, func() {
			b.SetBytes(ms[0].Bytes())
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ms[i%len(ms)].MatVec(dst, x)
				i++
			}
		})
	}
	b.Run("f32", func(b *testing.B) { run(b, "f32") })
	b.Run("bf16", func(b *testing.B) { run(b, "bf16") })
	if portable {
		b.Run("bf16-portable", func(b *testing.B) { withKernel(b, "portable", func() { run(b, "bf16") }) })
	}
}

func BenchmarkComputeMatVec_4096x4096(b *testing.B)  { benchComputeMatVec(b, 4096, 4096, true) }
func BenchmarkComputeMatVec_11264x4096(b *testing.B) { benchComputeMatVec(b, 11264, 4096, false) }
func BenchmarkComputeMatVec_4096x11264(b *testing.B) { benchComputeMatVec(b, 4096, 11264, false) }

func benchComputeMatMul(b *testing.B, rows, cols, T int) {
	m := benchMat(weights.BF16, rows, cols)
	rng := rand.New(rand.NewPCG(2, 2))
	xs := make([][]float32, T)
	dst := make([][]float32, T)
	for i := range xs {
		xs[i] = randVec(rng, cols)
		dst[i] = make([]float32, rows)
	}
	for _, mode := range []string{"f32", "bf16"} {
		b.Run(mode, func(b *testing.B) {
			withComputeDType(b, mode, func() {
				b.SetBytes(m.Bytes())
				b.ReportAllocs()
				for b.Loop() {
					m.MatMul(dst, xs)
				}
				flops := 2 * float64(rows) * float64(cols) * float64(T) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}

func BenchmarkComputeMatMul_4096x4096_T64(b *testing.B)  { benchComputeMatMul(b, 4096, 4096, 64) }
func BenchmarkComputeMatMul_11264x4096_T64(b *testing.B) { benchComputeMatMul(b, 11264, 4096, 64) }

package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Benchmarks report the weight bytes streamed per op as MB/s (b.SetBytes):
// compare with BenchmarkReadBandwidth / MeasureReadBandwidth. Each runs every
// kernel variant this CPU has as a sub-benchmark. The matrix-vector ones
// cycle through copies of the matrix totalling ≥ 256 MiB, so that the
// weights come from memory as in a 7B decode step, not from the 32 MiB L3
// (except _1024x1024, which is cache-resident on purpose).

var benchSeed uint64

func benchMat(dt weights.DType, rows, cols int) Mat {
	benchSeed++
	s := benchSeed * 0x9e3779b97f4a7c15
	next := func() uint64 { // cheap LCG: the values do not matter here
		s = s*6364136223846793005 + 1442695040888963407
		return s >> 33
	}
	m := Mat{Rows: rows, Cols: cols, DType: dt}
	if dt.Quantized() {
		m.q = make([]byte, int64(rows)*dt.RowBytes(cols))
		for i := range m.q {
			m.q[i] = byte(next())
		}
		for o := 0; o < len(m.q); o += dt.BlockBytes() {
			m.q[o], m.q[o+1], m.q[o+2], m.q[o+3] = 0x00, 0x20, 0x00, 0x1c // small f16 scales
		}
		return m
	}
	if dt == weights.F32 {
		m.f32 = make([]float32, rows*cols)
		for i := range m.f32 {
			m.f32[i] = float32(int(next()&0xffff)-0x8000) / 0x8000
		}
	} else {
		m.u16 = make([]uint16, rows*cols)
		for i := range m.u16 {
			m.u16[i] = uint16(0x3c00 + int(next()&0x7ff) - 0x400) // finite bf16 and f16
		}
	}
	return m
}

func benchMatVec(b *testing.B, dt weights.DType, rows, cols int) {
	ms := []Mat{benchMat(dt, rows, cols)}
	if rows*cols > 1<<20 {
		for len(ms)*int(ms[0].Bytes()) < 256<<20 {
			ms = append(ms, benchMat(dt, rows, cols))
		}
	}
	x := randVec(rand.New(rand.NewPCG(1, 1)), cols)
	dst := make([]float32, rows)
	for _, name := range KernelNames() {
		b.Run(name, func(b *testing.B) {
			withKernel(b, name, func() {
				b.SetBytes(ms[0].Bytes())
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					ms[i%len(ms)].MatVec(dst, x)
					i++
				}
			})
		})
	}
}

func BenchmarkMatVecBF16_4096x4096(b *testing.B)  { benchMatVec(b, weights.BF16, 4096, 4096) }
func BenchmarkMatVecBF16_11264x4096(b *testing.B) { benchMatVec(b, weights.BF16, 11264, 4096) }
func BenchmarkMatVecBF16_4096x11264(b *testing.B) { benchMatVec(b, weights.BF16, 4096, 11264) }
func BenchmarkMatVecBF16_1024x1024(b *testing.B)  { benchMatVec(b, weights.BF16, 1024, 1024) }
func BenchmarkMatVecF16_4096x4096(b *testing.B)   { benchMatVec(b, weights.F16, 4096, 4096) }
func BenchmarkMatVecF32_4096x4096(b *testing.B)   { benchMatVec(b, weights.F32, 4096, 4096) }
func BenchmarkMatVecF32_11264x4096(b *testing.B)  { benchMatVec(b, weights.F32, 11264, 4096) }

func BenchmarkMatVecQ8_0_4096x4096(b *testing.B)  { benchMatVec(b, weights.Q8_0, 4096, 4096) }
func BenchmarkMatVecQ8_0_11264x4096(b *testing.B) { benchMatVec(b, weights.Q8_0, 11264, 4096) }
func BenchmarkMatVecQ4_K_4096x4096(b *testing.B)  { benchMatVec(b, weights.Q4_K, 4096, 4096) }
func BenchmarkMatVecQ4_K_11264x4096(b *testing.B) { benchMatVec(b, weights.Q4_K, 11264, 4096) }

func benchMatMul(b *testing.B, dt weights.DType, rows, cols, T int) {
	m := benchMat(dt, rows, cols)
	rng := rand.New(rand.NewPCG(2, 2))
	xs := make([][]float32, T)
	dst := make([][]float32, T)
	for i := range xs {
		xs[i] = randVec(rng, cols)
		dst[i] = make([]float32, rows)
	}
	for _, name := range KernelNames() {
		if name == "portable" && rows*cols*T > 1<<28 {
			continue // minutes per op
		}
		b.Run(name, func(b *testing.B) {
			withKernel(b, name, func() {
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

func BenchmarkMatMulBF16_4096x4096_T64(b *testing.B) { benchMatMul(b, weights.BF16, 4096, 4096, 64) }
func BenchmarkMatMulBF16_11264x4096_T64(b *testing.B) {
	benchMatMul(b, weights.BF16, 11264, 4096, 64)
}
func BenchmarkMatMulF32_4096x4096_T64(b *testing.B)  { benchMatMul(b, weights.F32, 4096, 4096, 64) }
func BenchmarkMatMulBF16_4096x4096_T8(b *testing.B)  { benchMatMul(b, weights.BF16, 4096, 4096, 8) }
func BenchmarkMatMulBF16_2048x2048_T16(b *testing.B) { benchMatMul(b, weights.BF16, 2048, 2048, 16) }
func BenchmarkMatMulBF16_4224x512_T16(b *testing.B)  { benchMatMul(b, weights.BF16, 4224, 512, 16) }

// Mimi's transformer FFN at B = 16 (two positions a stream a frame): f32
// weights, 512 columns.
func BenchmarkMatMulF32_2048x512_T32(b *testing.B) { benchMatMul(b, weights.F32, 2048, 512, 32) }
func BenchmarkMatMulF32_512x2048_T32(b *testing.B) { benchMatMul(b, weights.F32, 512, 2048, 32) }

// The same at B = 1 (two positions).
func BenchmarkMatMulF32_2048x512_T2(b *testing.B)   { benchMatMul(b, weights.F32, 2048, 512, 2) }
func BenchmarkMatMulQ8_0_4096x4096_T8(b *testing.B) { benchMatMul(b, weights.Q8_0, 4096, 4096, 8) }
func BenchmarkMatMulQ4_K_4096x4096_T8(b *testing.B) { benchMatMul(b, weights.Q4_K, 4096, 4096, 8) }
func BenchmarkMatMulQ8_0_4096x4096_T64(b *testing.B) {
	benchMatMul(b, weights.Q8_0, 4096, 4096, 64)
}

func BenchmarkDot(b *testing.B) {
	for _, n := range []int{64, 128, 1024} {
		x := randVec(rand.New(rand.NewPCG(3, 3)), n)
		y := randVec(rand.New(rand.NewPCG(4, 4)), n)
		for _, name := range KernelNames() {
			b.Run(fmt.Sprintf("%d/%s", n, name), func(b *testing.B) {
				withKernel(b, name, func() {
					var s float32
					for b.Loop() {
						s += Dot(x, y)
					}
					sinkF = s
				})
			})
		}
		b.Run(fmt.Sprintf("%d/ref", n), func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += refDotF32(x, y)
			}
			sinkF = s
		})
	}
}

var sinkF float32

func BenchmarkMatVecQ4_K_1024x1024(b *testing.B) { benchMatVec(b, weights.Q4_K, 1024, 1024) }

// BenchmarkMatMulBatch times the batched product at the lockstep batch
// sizes over one matrix of the ~1.3B model's shape (the FFN's output
// projection, 2048×8448: 35 MB in bf16, more than L3), per weight dtype,
// batch size and assembly variant; B = 1 is the matrix-vector product.
// GFLOP/s against the FMA peak, MB/s of weights against
// BenchmarkReadBandwidth tell which bound a batch size reaches.
func BenchmarkMatMulBatch(b *testing.B) {
	const rows, cols = 2048, 8448
	rng := rand.New(rand.NewPCG(5, 5))
	xs := make([][]float32, 32)
	dst := make([][]float32, len(xs))
	for i := range xs {
		xs[i] = randVec(rng, cols)
		dst[i] = make([]float32, rows)
	}
	for _, dt := range []weights.DType{weights.BF16, weights.Q8_0, weights.Q4_K, weights.F32} {
		m := benchMat(dt, rows, cols)
		for _, B := range []int{1, 2, 4, 8, 16, 32} {
			for _, name := range KernelNames() {
				if name == "portable" {
					continue
				}
				b.Run(fmt.Sprintf("%s/B=%d/%s", dt, B, name), func(b *testing.B) {
					withKernel(b, name, func() {
						b.SetBytes(m.Bytes())
						b.ReportAllocs()
						for b.Loop() {
							if B == 1 {
								m.MatVec(dst[0], xs[0])
							} else {
								m.MatMul(dst[:B], xs[:B])
							}
						}
						flops := 2 * float64(rows) * float64(cols) * float64(B) * float64(b.N)
						b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					})
				})
			}
		}
	}
}

// BenchmarkMatMulLayerStack times the products of four of the ~1.3B
// temporal transformer's layers (qkv 6144×2048, output 2048×2048, gated
// FFN 11264×2048 and 2048×5632: 411 MB in bf16, so every matrix comes from
// memory, as in a lockstep step) on two threads, per weight dtype, batch
// size and assembly variant: the bench LM step's products without the rest
// of the step, for tuning the tiles' blocking and prefetch.
func BenchmarkMatMulLayerStack(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	xs := make([][]float32, 32)
	dst := make([][]float32, len(xs))
	for i := range xs {
		xs[i] = randVec(rng, 11264)
		dst[i] = make([]float32, 11264)
	}
	// "BF16c" is bf16 weights in the bf16 compute dtype (VDPBF16PS where
	// the CPU has AVX512_BF16; skipped where it runs the portable code).
	for _, label := range []string{"BF16", "BF16c", "Q8_0", "F32"} {
		dt, compute := weights.BF16, "f32"
		switch label {
		case "BF16c":
			compute = "bf16"
		case "Q8_0":
			dt = weights.Q8_0
		case "F32":
			dt = weights.F32
		}
		var ms []Mat
		var flop float64
		for range 4 {
			for _, sh := range [][2]int{{6144, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}} {
				ms = append(ms, benchMat(dt, sh[0], sh[1]))
				flop += 2 * float64(sh[0]*sh[1])
			}
		}
		for _, B := range []int{4, 8, 12, 16, 32} {
			for _, name := range KernelNames() {
				if name == "portable" {
					continue
				}
				b.Run(fmt.Sprintf("%s/B=%d/%s", label, B, name), func(b *testing.B) {
					e, err := NewEngine(EngineOptions{Threads: 2, Kernel: name, ComputeDType: compute})
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close()
					if compute == "bf16" && e.BF16KernelName() == "portable" {
						b.Skip("no bf16 compute kernel here")
					}
					for b.Loop() {
						for _, m := range ms {
							e.MatMul(m, dst[:B], xs[:B])
						}
					}
					b.ReportMetric(flop*float64(B)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkMatMulDepformerStack times the products of the 8 steps a
// frame runs of the ~1.3B depformer (4 layers a step, each qkv 1536×512,
// output 512×512, gated FFN 4224×512 and 512×2112: 275 MB in bf16, every
// matrix from memory) on two threads, per batch size and assembly variant:
// the rows of 512 that run row-major on AVX-512 (mmtRowMajorPart), and
// the FFN's output, which does not.
func BenchmarkMatMulDepformerStack(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	xs := make([][]float32, 32)
	dst := make([][]float32, len(xs))
	for i := range xs {
		xs[i] = randVec(rng, 4224)
		dst[i] = make([]float32, 4224)
	}
	var ms []Mat
	var flop float64
	for range 8 {
		for range 4 {
			for _, sh := range [][2]int{{1536, 512}, {512, 512}, {4224, 512}, {512, 2112}} {
				ms = append(ms, benchMat(weights.BF16, sh[0], sh[1]))
				flop += 2 * float64(sh[0]*sh[1])
			}
		}
	}
	for _, B := range []int{8, 12, 16, 32} {
		for _, name := range KernelNames() {
			if name == "portable" {
				continue
			}
			b.Run(fmt.Sprintf("B=%d/%s", B, name), func(b *testing.B) {
				e, err := NewEngine(EngineOptions{Threads: 2, Kernel: name})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				for b.Loop() {
					for _, m := range ms {
						e.MatMul(m, dst[:B], xs[:B])
					}
				}
				b.ReportMetric(flop*float64(B)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatMulBF16Offset is the 1.3B shape's largest product (the FFN's
// linear_in, 11264 × 2048) at B = 16 with its rows 64-byte aligned and 40
// bytes past a cache line, as a safetensors checkpoint's tensors lie when
// its data starts 40 bytes into a line (the header's length decides; the
// random-weights model of scripts/bench-batch.sh is such a file). Two
// copies of the weights cycle so that they come from memory.
func BenchmarkMatMulBF16Offset(b *testing.B) {
	const rows, cols, T = 11264, 2048, 16
	rng := rand.New(rand.NewPCG(3, 3))
	xs := make([][]float32, T)
	dst := make([][]float32, T)
	for i := range xs {
		xs[i] = randVec(rng, cols)
		dst[i] = make([]float32, rows)
	}
	for _, off := range []int{0, 40} {
		var ms []Mat
		for range 2 {
			m := benchMat(weights.BF16, rows, cols)
			buf := make([]uint16, len(m.u16)+64)
			at := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64) + off) % 64 / 2
			m.u16 = buf[at : at+copy(buf[at:], m.u16)]
			ms = append(ms, m)
		}
		for _, name := range KernelNames() {
			if name == "portable" {
				continue
			}
			b.Run(fmt.Sprintf("offset=%d/%s", off, name), func(b *testing.B) {
				withKernel(b, name, func() {
					i := 0
					for b.Loop() {
						ms[i%len(ms)].MatMul(dst, xs)
						i++
					}
					b.ReportMetric(2*rows*cols*T*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			})
		}
	}
}

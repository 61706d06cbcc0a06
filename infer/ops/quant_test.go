package ops

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

var quantDTypes = []weights.DType{weights.Q8_0, weights.Q4_K}

// randQuantMat makes a rows×cols matrix of random blocks: any int8 or
// nibble, any 6-bit scale and min, f16 scales of varied magnitude
// (subnormal and zero included).
func randQuantMat(rng *rand.Rand, dt weights.DType, rows, cols int) Mat {
	b := make([]byte, int64(rows)*dt.RowBytes(cols))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	half := func() uint16 {
		switch rng.IntN(20) {
		case 0:
			return 0
		case 1:
			return uint16(rng.IntN(1024)) | uint16(rng.IntN(2))<<15 // subnormal
		}
		return weights.FloatToHalf(float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()) * 0.01))
	}
	bb := dt.BlockBytes()
	for o := 0; o < len(b); o += bb {
		binary.LittleEndian.PutUint16(b[o:], half())
		if dt == weights.Q4_K {
			binary.LittleEndian.PutUint16(b[o+2:], half())
		}
	}
	m, err := MatFromBytes(rows, cols, dt, b)
	if err != nil {
		panic(err)
	}
	return m
}

// The portable quantized product is exactly "dequantize the row, then the
// F32 product", and every kernel variant gives its bits, for MatVec and
// every row of MatMul, on odd sizes, at 1 and 3 threads.
func TestQuantKernelsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cols := []int{1, 31, 32, 33, 64, 95, 255, 256, 257, 300, 513, 768, 1000}
	for _, dt := range quantDTypes {
		for _, c := range cols {
			for _, rows := range []int{1, 2, 3, 4, 7, 13, 33} {
				m := randQuantMat(rng, dt, rows, c)
				f := MatFromF32(rows, c, m.Float32s())
				x := randVec(rng, c+3)
				want := make([]float32, rows)
				withKernel(t, "portable", func() { f.MatVec(want, x) })
				xs := make([][]float32, 9)
				for i := range xs {
					xs[i] = randVec(rng, c)
				}
				wantMM := make([][]float32, len(xs))
				for i := range xs {
					wantMM[i] = make([]float32, rows)
					withKernel(t, "portable", func() { f.MatVec(wantMM[i], xs[i]) })
				}
				for _, name := range KernelNames() {
					for _, threads := range []int{1, 3} {
						withThreads(threads, func() {
							withKernel(t, name, func() {
								got := make([]float32, rows)
								m.MatVec(got, x)
								if i := bitsEqual(got, want); i >= 0 {
									t.Fatalf("%s %s %dx%d MatVec row %d: %g (%08x), dequantized F32 %g (%08x)", name, dt, rows, c, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
								}
								for _, T := range []int{2, 3, 5, 9} {
									dst := make([][]float32, T)
									for i := range dst {
										dst[i] = make([]float32, rows)
									}
									m.MatMul(dst, xs[:T])
									for i := range T {
										if j := bitsEqual(dst[i], wantMM[i]); j >= 0 {
											t.Fatalf("%s %s %dx%d MatMul T=%d input %d row %d: %g, MatVec %g", name, dt, rows, c, T, i, j, dst[i][j], wantMM[i][j])
										}
									}
								}
							})
						})
					}
				}
			}
		}
	}
}

// The kernels' dequantization (the MatMul path) gives DequantizeRow's bits.
func TestQuantDequantKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range quantDTypes {
		for _, c := range []int{32, 33, 64, 100, 256, 288, 600} {
			m := randQuantMat(rng, dt, 3, c)
			want := make([]float32, 3*c)
			for r := range 3 {
				weights.DequantizeRow(dt, want[r*c:(r+1)*c], m.qrow(r))
			}
			for _, k := range allKernels {
				got := make([]float32, 3*c)
				m.dequantRows(k, 0, 3, got)
				if i := bitsEqual(got, want); i >= 0 {
					t.Fatalf("%s %s cols %d: element %d = %g, want %g", k.name, dt, c, i, got[i], want[i])
				}
			}
		}
	}
}

// A large quantized product on the pool (chunks of rows on several
// threads) equals the single-threaded one.
func TestQuantParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range quantDTypes {
		m := randQuantMat(rng, dt, 600, 1024)
		x := randVec(rng, 1024)
		var want []float32
		for _, th := range []int{1, 2, 5} {
			withThreads(th, func() {
				got := make([]float32, 600)
				m.MatVec(got, x)
				if want == nil {
					want = got
				} else if i := bitsEqual(got, want); i >= 0 {
					t.Fatalf("%s %d threads: row %d differs", dt, th, i)
				}
			})
		}
	}
}

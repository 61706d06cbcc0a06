//go:build !purego

package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// The tiles are what MatMul runs on the assembly variants (for the dtypes
// they cover), not a fallback.
func TestMatMulTilesUsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, k := range allKernels {
		for _, dt := range []weights.DType{weights.BF16, weights.F16, weights.F32, weights.Q8_0, weights.Q4_K} {
			var m Mat
			if dt.Quantized() {
				m = randQuantMat(rng, dt, 6, 64)
			} else {
				m = randMat(rng, dt, 6, 64)
			}
			xs := [][]float32{randVec(rng, 64), randVec(rng, 64)}
			dst := [][]float32{make([]float32, 6), make([]float32, 6)}
			got := m.archMMTiles(k, 0, 6, dst, xs, nil)
			if want := mmtKind(k.id, dt) != 0; got != want {
				t.Errorf("%s %s: tiles ran %v, want %v", k.name, dt, got, want)
			}
			if k.id != kPortable && !got && (dt != weights.F16 && !dt.Quantized() || hasF16C) {
				t.Errorf("%s %s: no tile kernel", k.name, dt)
			}
		}
	}
}

// Bad bounds reach the wrappers' checks, not the kernels.
func TestMatMulTilesBounds(t *testing.T) {
	for _, k := range allKernels {
		if k.id == kPortable {
			continue
		}
		m := randQuantMat(rand.New(rand.NewPCG(1, 2)), weights.Q4_K, 3, 512)
		var xp [4]*float32
		x := make([]float32, 512)
		for i := range xp {
			xp[i] = &x[0]
		}
		acc := make([]float32, mmtAccFloats)
		R, T, _ := mmtShape(k.id, weights.Q4_K, mmtMaxT)
		for _, tc := range []struct{ r, R, cb, n int }{{4 - R, R, 0, 64}, {0, R, 32, 64}, {0, R, 256, 512}, {0, R, 0, 48}, {0, R + 1, 0, 64}} {
			t.Run(fmt.Sprintf("%s/%v", k.name, tc), func(t *testing.T) {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic")
					}
				}()
				m.mmtCall(k.id, tc.r, tc.R, 1, tc.cb, tc.n, T, &xp, acc, 0, nil, nil)
			})
		}
	}
}

// mmtEvenOdd writes each 32-float group as its even elements, then its
// odd ones (the bf16 tiles' input layout), and nothing past n.
func TestMMTEvenOdd(t *testing.T) {
	if !cpu.X86.HasAVX2 {
		t.Skip("no AVX2")
	}
	const n = 96
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	dst := make([]float32, n+1)
	dst[n] = -1
	mmtEvenOdd(&dst[0], &src[0], n)
	for i := range n {
		g, k := i/32, i%32
		want := float32(32*g + 2*k)
		if k >= 16 {
			want = float32(32*g + 2*(k-16) + 1)
		}
		if dst[i] != want {
			t.Fatalf("dst[%d] = %g, want %g", i, dst[i], want)
		}
	}
	if dst[n] != -1 {
		t.Fatalf("wrote past n: %g", dst[n])
	}
}

// The AVX-512 bf16 tiles' prefetch of the next block: the input tiles'
// shares (three rows per row tile, from the first tile on) cover the
// block's rows without overlap, a full group's first pass covers all of
// them, and the pointers are the rows' first columns of the block.
func TestMMTNextShareCoversBlock(t *testing.T) {
	const cols = 96
	m := Mat{Rows: 200, Cols: cols, DType: weights.BF16, u16: make([]uint16, 200*cols)}
	for _, nb := range []mmtBlock{{row: 24, col: 32, rows: 24}, {row: 0, col: 0, rows: 7}, {row: 150, col: 64, rows: 24}} {
		for _, nrt := range []int{1, 2, 5, 8} {
			for _, na := range []int{1, 2, 4, 5} {
				var covered [mmtGroupRows]int
				next := 0 // the next row a share must start at
				for ti := range na {
					f, pf := m.mmtNextShare(mmtLoad, ti, nrt, nb)
					if pf == nil {
						if f != mmtLoad {
							t.Fatalf("block %+v nrt %d tile %d: flags %#x without a pointer", nb, nrt, ti, f)
						}
						continue
					}
					if f != mmtLoad|mmtPFN {
						t.Fatalf("block %+v nrt %d tile %d: flags %#x", nb, nrt, ti, f)
					}
					off := int(uintptr(unsafe.Pointer(pf))-uintptr(unsafe.Pointer(&m.u16[0]))) / 2
					row, col := off/cols, off%cols
					if row != nb.row+next || col != nb.col {
						t.Fatalf("block %+v nrt %d tile %d: prefetch from (%d, %d), want (%d, %d)", nb, nrt, ti, row, col, nb.row+next, nb.col)
					}
					for r := next; r < min(next+3*nrt, nb.rows); r++ {
						covered[r]++
					}
					next += 3 * nrt
				}
				for r := range nb.rows {
					want := 0
					if r < 3*nrt*na {
						want = 1
					}
					if covered[r] != want {
						t.Fatalf("block %+v nrt %d tiles %d: row %d prefetched %d times, want %d", nb, nrt, na, r, covered[r], want)
					}
				}
				if 3*nrt >= nb.rows && next != 3*nrt {
					t.Fatalf("block %+v nrt %d: the first pass does not take the whole block", nb, nrt)
				}
			}
		}
	}
}

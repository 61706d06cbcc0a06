package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// The column-blocked tiles (several column blocks, row groups and passes
// over the inputs; every input count 2…20 and 33, so every mix of 4-, 2-
// and padded tiles) give every output of MatMul the bits of the portable
// matrix-vector product, for every dtype and kernel variant, at 1 and 2
// threads.
func TestMatMulTilesBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	dts := append(append([]weights.DType{}, testDTypes...), quantDTypes...)
	shapes := [][2]int{{3, 32}, {5, 64}, {26, 256}, {50, 300}, {51, 512}, {40, 1024}, {27, 1100}, {49, 2336}, {8, 4127}}
	for _, dt := range dts {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			var m Mat
			if dt.Quantized() {
				m = randQuantMat(rng, dt, rows, cols)
			} else {
				m = randMat(rng, dt, rows, cols)
			}
			xs := make([][]float32, 65)
			want := make([][]float32, len(xs))
			for i := range xs {
				xs[i] = randVec(rng, cols)
				want[i] = make([]float32, rows)
				withKernel(t, "portable", func() { m.MatVec(want[i], xs[i]) })
			}
			for _, name := range KernelNames() {
				if name == "portable" {
					continue
				}
				for _, threads := range []int{1, 2} {
					withThreads(threads, func() {
						withKernel(t, name, func() {
							for _, T := range []int{2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 20, 24, 31, 32, 33, 65} {
								// Each output has room past its rows, which no
								// kernel may write.
								dst := make([][]float32, T)
								for i := range dst {
									buf := make([]float32, rows+16)
									for j := range buf {
										buf[j] = 42
									}
									dst[i] = buf[:rows]
								}
								m.MatMul(dst, xs[:T])
								for i := range T {
									if j := bitsEqual(dst[i], want[i]); j >= 0 {
										t.Fatalf("%s %s %dx%d T=%d threads %d: input %d row %d = %g (%08x), MatVec %g (%08x)", name, dt, rows, cols, T, threads, i, j, dst[i][j], math.Float32bits(dst[i][j]), want[i][j], math.Float32bits(want[i][j]))
									}
									for j, v := range dst[i][rows:cap(dst[i])] {
										if v != 42 {
											t.Fatalf("%s %s %dx%d T=%d threads %d: input %d: wrote %g past its %d rows (at %d)", name, dt, rows, cols, T, threads, i, v, rows, rows+j)
										}
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

// The batched products of every dtype allocate nothing once warm (the
// tiles' state comes from a pool; a pool emptied by a collection costs an
// allocation now and then, which the average over 50 runs absorbs).
func TestMatMulTilesNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	xs := make([][]float32, 8)
	dst := make([][]float32, len(xs))
	for i := range xs {
		xs[i] = randVec(rng, 1024)
		dst[i] = make([]float32, 300)
	}
	for _, dt := range append(append([]weights.DType{}, testDTypes...), quantDTypes...) {
		var m Mat
		if dt.Quantized() {
			m = randQuantMat(rng, dt, 300, 1024)
		} else {
			m = randMat(rng, dt, 300, 1024)
		}
		for _, name := range KernelNames() {
			if name == "portable" {
				continue // minutes at 50 runs; TestNoAllocs has its MatMul
			}
			withKernel(t, name, func() {
				for _, B := range []int{2, 5, 8} {
					if n := testalloc.PerRun(t, 50, func() { m.MatMul(dst[:B], xs[:B]) }); n != 0 {
						t.Errorf("%s %s MatMul B=%d: %v allocs", name, dt, B, n)
					}
				}
			})
		}
	}
}

// mmtSplit covers the inputs in order with tiles of kernels that exist,
// wasting no slot where a kernel of the right size exists: on AVX-512 a
// remainder of 1 is 3 + 2, of 3 a tile of 3; on AVX2 a remainder of 1 is
// 2 + 2.
func TestMMTSplit(t *testing.T) {
	want512 := map[int][]int{1: {1}, 2: {2}, 3: {3}, 4: {4}, 5: {3, 2}, 6: {4, 2}, 7: {4, 3}, 8: {4, 4},
		9: {4, 3, 2}, 13: {4, 4, 3, 2}, 15: {4, 4, 4, 3}, 16: {4, 4, 4, 4}}
	wantAVX2 := map[int][]int{1: {1}, 2: {2}, 3: {3}, 4: {2, 2}, 5: {3, 2}, 7: {3, 2, 2}, 8: {3, 3, 2}, 16: {3, 3, 3, 3, 2, 2}}
	for _, v := range []struct {
		name       string
		tmax       int
		has3, has2 bool
	}{{"avx512", 4, true, true}, {"avx2", 3, false, true}, {"no tile of 2", 3, false, false}} {
		for n := 1; n <= mmtMaxT; n++ {
			var tiles [mmtMaxT]mmtTile
			k := mmtSplit(v.tmax, v.has3, v.has2, n, &tiles)
			t0, waste := 0, 0
			var sizes []int
			for _, tl := range tiles[:k] {
				if tl.t0 != t0 || tl.n < 1 || tl.n > tl.T {
					t.Fatalf("%s n=%d: tiles %v", v.name, n, tiles[:k])
				}
				if !(tl.T == v.tmax || tl.T == 3 && v.has3 || tl.T == 2 && v.has2) {
					t.Fatalf("%s n=%d: no kernel of %d inputs: %v", v.name, n, tl.T, tiles[:k])
				}
				t0 += tl.n
				waste += tl.T - tl.n
				sizes = append(sizes, tl.n)
			}
			if t0 != n {
				t.Fatalf("%s n=%d: tiles cover %d", v.name, n, t0)
			}
			if v.has2 && n > 1 && waste != 0 {
				t.Errorf("%s n=%d: %d slots wasted: %v", v.name, n, waste, tiles[:k])
			}
			want := want512
			if v.name == "avx2" {
				want = wantAVX2
			}
			if w, ok := want[n]; ok && v.name != "no tile of 2" && fmt.Sprint(w) != fmt.Sprint(sizes) {
				t.Errorf("%s n=%d: tiles of %v, want %v", v.name, n, sizes, w)
			}
		}
	}
}

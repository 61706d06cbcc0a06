//go:build !purego

package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
			got := m.archMMTiles(k, 0, 6, dst, xs)
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
		for _, tc := range []struct{ r, cb, n int }{{1, 0, 64}, {0, 32, 64}, {0, 256, 512}, {0, 0, 48}} {
			t.Run(fmt.Sprintf("%s/%v", k.name, tc), func(t *testing.T) {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic")
					}
				}()
				m.mmtCall(k.id, tc.r, 3, 1, tc.cb, tc.n, 4, &xp, acc, 0)
			})
		}
	}
}

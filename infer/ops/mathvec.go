package ops

import (
	"fmt"
	"math"
)

// Vector forms of the float64 elementwise math of the activations and of
// attention's softmax. Each gives exactly the bits of the scalar code it
// replaces, for every float32 input and on every kernel variant (the
// assembly reproduces the stdlib's operations: mathvec_amd64.s), so that
// results do not depend on the variant or on how work is split. Like Axpy
// they run on the calling goroutine, allocate nothing, and use the
// engine's kernel variant ("portable": the scalar loops).

// ExpTo sets dst[i] = float32(math.Exp(float64(x[i]))). dst may be x
// itself but must not otherwise overlap it. It panics unless
// len(dst) == len(x).
func (e *Engine) ExpTo(dst, x []float32) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("ops: ExpTo: len(dst) %d, len(x) %d", len(dst), len(x)))
	}
	n := 0
	if k := e.k.Load(); k.id != kPortable {
		n = archExpTo(k.id, dst, x)
	}
	expGo(dst[n:], x[n:])
}

// GELU is ops.GELU (the exact, erf GELU) in place, with its bits.
func (e *Engine) GELU(x []float32) {
	n := 0
	if k := e.k.Load(); k.id != kPortable {
		n = archGELU(k.id, x)
	}
	GELU(x[n:])
}

// SiLUMul sets dst[i] = SiLU(g[i])·m[i] (the float32 product), with the
// bits of that scalar expression: the gated activation. dst may be g
// itself but must not otherwise overlap g or m. It panics unless the three
// lengths are equal.
func (e *Engine) SiLUMul(dst, g, m []float32) {
	if len(g) != len(dst) || len(m) != len(dst) {
		panic(fmt.Sprintf("ops: SiLUMul: len(dst) %d, len(g) %d, len(m) %d", len(dst), len(g), len(m)))
	}
	n := 0
	if k := e.k.Load(); k.id != kPortable {
		n = archSiLUMul(k.id, dst, g, m)
	}
	siluMulGo(dst[n:], g[n:], m[n:])
}

// expGo is ExpTo's scalar loop, len(x) ≥ len(d).
func expGo(d, x []float32) {
	x = x[:len(d)]
	for i, v := range x {
		d[i] = float32(math.Exp(float64(v)))
	}
}

// siluMulGo is SiLUMul's scalar loop, len(g), len(m) ≥ len(d).
func siluMulGo(d, g, m []float32) {
	g, m = g[:len(d)], m[:len(d)]
	for i, v := range g {
		d[i] = SiLU(v) * m[i]
	}
}

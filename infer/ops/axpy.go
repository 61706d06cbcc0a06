package ops

// Axpy computes dst[i] += a·x[i] for i < len(dst), with the product rounded
// to float32 before the add (two roundings, no FMA), so the assembly and the
// portable code give the same bits on every CPU. Attention's value
// accumulation runs on it. It runs on the default engine's kernel variant.
func Axpy(dst []float32, a float32, x []float32) { defaultEngine.Axpy(dst, a, x) }

// Axpy computes dst[i] += a·x[i] for i < len(dst), with the product rounded
// to float32 before the add (two roundings, no FMA): the same bits on every
// kernel variant. It runs on the calling goroutine.
func (e *Engine) Axpy(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	n := 0
	if k := e.k.Load(); k.id != kPortable {
		n = archAxpy(k.id, dst, a, x)
	}
	axpyGo(dst[n:], a, x[n:])
}

// axpyGo is Axpy's Go loop: d[j] += round(a·x[j]), len(x) ≥ len(d).
func axpyGo(d []float32, a float32, x []float32) {
	x = x[:len(d)]
	for j := range d {
		d[j] += float32(a * x[j]) // the conversion forbids fusing into an FMA
	}
}

// axpyRef is the obviously-correct loop Axpy is tested against.
func axpyRef(dst []float32, a float32, x []float32) {
	for i := range dst {
		p := float32(a * x[i])
		dst[i] = dst[i] + p
	}
}

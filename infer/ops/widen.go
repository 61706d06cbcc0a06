package ops

// WidenBF16 sets dst[i] to the float32 value of the bf16 src[i] (exact:
// the halfword becomes the high half of the word) for i < len(src); dst
// must be at least as long. Denormals and NaNs widen as they are. It runs
// on the calling goroutine.
func (e *Engine) WidenBF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	n := 0
	if k := e.k.Load(); k.id != kPortable && len(src) > 0 {
		n = archWidenBF16(k.id, dst, src)
	}
	for i, v := range src[n:] {
		dst[n+i] = bf16ToF32(v)
	}
}

// RoundBF16 sets dst[i] to src[i] rounded to bf16 as the bf16 compute mode
// rounds its activations (to nearest even; denormals become signed zero;
// NaN stays NaN, quieted) for i < len(src); dst must be at least as long.
// It runs on the calling goroutine.
func (e *Engine) RoundBF16(dst []uint16, src []float32) {
	bf16RoundVec(dst, src, bf16Asm(e.k.Load()))
}

//go:build arm64 && !purego

#include "textflag.h"

// func widenBF16NEON(dst *float32, src *uint16, n int)
// n is a positive multiple of 16: each halfword goes to the high half of a
// zero word (ZIP with zero), as the bf16 matrix kernels widen weights.
TEXT ·widenBF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V31.B16, V31.B16, V31.B16
loop:
	VLD1.P 32(R1), [V0.H8, V1.H8]
	VZIP1 V0.H8, V31.H8, V2.H8
	VZIP2 V0.H8, V31.H8, V3.H8
	VZIP1 V1.H8, V31.H8, V4.H8
	VZIP2 V1.H8, V31.H8, V5.H8
	VST1.P [V2.S4, V3.S4, V4.S4, V5.S4], 64(R0)
	SUBS $16, R2, R2
	BNE loop
	RET

//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// func axpyNEON(dst, x *float32, a float32, n int)
// n is a positive multiple of 16. dst[i] = dst[i] + round(a*x[i]): a
// separate FMUL and FADD, two roundings, as the portable code.
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD x+8(FP), R1
	FMOVS a+16(FP), F31
	VDUP V31.S[0], V31.S4
	MOVD n+24(FP), R2
loop:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1 (R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMUL4(31, 0, 0)
	FMUL4(31, 1, 1)
	FMUL4(31, 2, 2)
	FMUL4(31, 3, 3)
	FADD4(0, 4, 4)
	FADD4(1, 5, 5)
	FADD4(2, 6, 6)
	FADD4(3, 7, 7)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2, R2
	BNE loop
	RET

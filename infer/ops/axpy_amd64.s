//go:build amd64 && !purego

#include "textflag.h"

// func axpyAVX512(dst, x *float32, a float32, n int)
// n is a positive multiple of 16. dst[i] = dst[i] + round(a*x[i]).
TEXT ·axpyAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Z0
	MOVQ n+24(FP), CX
loop512:
	VMULPS (SI), Z0, Z1
	VADDPS (DI), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loop512
	VZEROUPPER
	RET

// func axpyAVX2(dst, x *float32, a float32, n int)
// n is a positive multiple of 8.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ n+24(FP), CX
loop256:
	VMULPS (SI), Y0, Y1
	VADDPS (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop256
	VZEROUPPER
	RET

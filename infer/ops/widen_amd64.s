//go:build amd64 && !purego

#include "textflag.h"

// func widenBF16AVX512(dst *float32, src *uint16, n int)
// n is a positive multiple of 16: each halfword zero-extended to a word,
// then shifted into its high half.
TEXT ·widenBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	CMPQ CX, $64
	JLT one512
four512:
	VPMOVZXWD 0(SI)(AX*2), Z0
	VPMOVZXWD 32(SI)(AX*2), Z1
	VPMOVZXWD 64(SI)(AX*2), Z2
	VPMOVZXWD 96(SI)(AX*2), Z3
	VPSLLD $16, Z0, Z0
	VPSLLD $16, Z1, Z1
	VPSLLD $16, Z2, Z2
	VPSLLD $16, Z3, Z3
	VMOVUPS Z0, 0(DI)(AX*4)
	VMOVUPS Z1, 64(DI)(AX*4)
	VMOVUPS Z2, 128(DI)(AX*4)
	VMOVUPS Z3, 192(DI)(AX*4)
	ADDQ $64, AX
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $64
	JGE four512
one512:
	CMPQ AX, CX
	JGE done512
	VPMOVZXWD (SI)(AX*2), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ $16, AX
	JMP one512
done512:
	VZEROUPPER
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
// n is a positive multiple of 8.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
loop2:
	VPMOVZXWD (SI)(AX*2), Y0
	VPSLLD $16, Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, CX
	JLT loop2
	VZEROUPPER
	RET

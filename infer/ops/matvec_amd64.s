//go:build amd64 && !purego

#include "textflag.h"

// Matrix-vector, matrix-matrix and dot kernels for AVX-512F and AVX2+FMA.
// Every kernel follows the 32-lane contract of matvec_portable.go: element
// j of a row goes to lane j%32 (two zmm registers, or four ymm: lanes 0-7,
// 8-15, 16-23, 24-31), is accumulated with one FMA, and the lanes are
// summed in the fixed tree of reduce32: the two 16-lane halves, then
// HSUM512/HSUM256. Only the first nl columns (nl a positive multiple of 32)
// are seen here; Go adds the tail.
//
// All macros are defined before any TEXT so that go vet's frame check reads
// each TEXT block on its own.

// ---- weight widening: 16 (AVX-512) or 8 (AVX2) elements at element index
// AX + OFF/size of row base B ----

#define W512_BF16(B, OFF, Z) VPMOVZXWD OFF(B)(AX*2), Z; VPSLLD $16, Z, Z
#define W512_F16(B, OFF, Z) VCVTPH2PS OFF(B)(AX*2), Z
#define W512_F32(B, OFF, Z) VMOVUPS OFF(B)(AX*4), Z
#define W256_BF16(B, OFF, Y) VPMOVZXWD OFF(B)(AX*2), Y; VPSLLD $16, Y, Y
#define W256_F16(B, OFF, Y) VCVTPH2PS OFF(B)(AX*2), Y
#define W256_F32(B, OFF, Y) VMOVUPS OFF(B)(AX*4), Y

// ---- software prefetch ----

// The mv kernels stream a row at a time (one linear stream through the
// rows, which are contiguous) and prefetch PFDIST bytes ahead through R12;
// hardware prefetchers alone stop at 4 KiB pages. Prefetches never fault,
// so running past the matrix is harmless.
#define PFDIST 4096
#define PF_U16 PREFETCHT0 (R12)(AX*2)
#define PF_F32 PREFETCHT0 (R12)(AX*4); PREFETCHT0 64(R12)(AX*4)

// The mm kernels' prefetch of the next row tile through R13 (to L2), per
// 32 columns: 3 rows (AVX-512) or 1 row (AVX2) of 2- or 4-byte weights.
#define PFT3_U16 PREFETCHT1 (R13); PREFETCHT1 64(R13); PREFETCHT1 128(R13); ADDQ $192, R13
#define PFT3_F32 PREFETCHT1 (R13); PREFETCHT1 64(R13); PREFETCHT1 128(R13); PREFETCHT1 192(R13); PREFETCHT1 256(R13); PREFETCHT1 320(R13); ADDQ $384, R13
#define PFT1_U16 PREFETCHT1 (R13)(AX*2)
#define PFT1_F32 PREFETCHT1 (R13)(AX*4); PREFETCHT1 64(R13)(AX*4)

#include "hsum_amd64.h"

// ---- matrix-vector: one row at a time, one linear stream ----

// func mv…(w *T, stride, rows int, x *float32, nl int, dst *float32)
// OFF1 is the byte offset of element 16 of a row (32 for 2-byte weights,
// 64 for float32).
#define MV512(W, SH, OFF1, PF) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	SHLQ SH, R8; \
	MOVQ rows+16(FP), CX; \
	MOVQ x+24(FP), DX; \
	MOVQ nl+32(FP), BX; \
	MOVQ dst+40(FP), DI; \
row: \
	LEAQ PFDIST(SI), R12; \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	XORQ AX, AX; \
loop: \
	PF; \
	W(SI, 0, Z4); \
	W(SI, OFF1, Z5); \
	VFMADD231PS (DX)(AX*4), Z4, Z0; \
	VFMADD231PS 64(DX)(AX*4), Z5, Z1; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	HSUM32_512(Z0, Z1, X0, 0(DI)); \
	ADDQ R8, SI; \
	ADDQ $4, DI; \
	DECQ CX; \
	JNZ row; \
	VZEROUPPER; \
	RET

// OFFk is the byte offset of element 8k of a row.
#define MV256(W, SH, OFF1, OFF2, OFF3, PF) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	SHLQ SH, R8; \
	MOVQ rows+16(FP), CX; \
	MOVQ x+24(FP), DX; \
	MOVQ nl+32(FP), BX; \
	MOVQ dst+40(FP), DI; \
row: \
	LEAQ PFDIST(SI), R12; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	XORQ AX, AX; \
loop: \
	PF; \
	W(SI, 0, Y4); \
	W(SI, OFF1, Y5); \
	W(SI, OFF2, Y6); \
	W(SI, OFF3, Y7); \
	VFMADD231PS (DX)(AX*4), Y4, Y0; \
	VFMADD231PS 32(DX)(AX*4), Y5, Y1; \
	VFMADD231PS 64(DX)(AX*4), Y6, Y2; \
	VFMADD231PS 96(DX)(AX*4), Y7, Y3; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(DI)); \
	ADDQ R8, SI; \
	ADDQ $4, DI; \
	DECQ CX; \
	JNZ row; \
	VZEROUPPER; \
	RET

// ---- matrix-matrix register tiles ----

// AVX-512: 3 weight rows × 4 inputs; the accumulator halves of output
// (r, t) are Z(8r+2t) (lanes 0-15) and Z(8r+2t+1) (16-31); out[4r+t].
// Weights in Z24-Z26, inputs through Z27.
// func mm…(w *T, stride int, xs *[4]*float32, nl int, out *[16]float32, pf int)
#define MM512_HALF(W, OFF, XOFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3) \
	W(SI, OFF, Z24); \
	W(R9, OFF, Z25); \
	W(R10, OFF, Z26); \
	VMOVUPS XOFF(BX)(AX*4), Z27; \
	VFMADD231PS Z27, Z24, A0; \
	VFMADD231PS Z27, Z25, B0; \
	VFMADD231PS Z27, Z26, C0; \
	VMOVUPS XOFF(CX)(AX*4), Z27; \
	VFMADD231PS Z27, Z24, A1; \
	VFMADD231PS Z27, Z25, B1; \
	VFMADD231PS Z27, Z26, C1; \
	VMOVUPS XOFF(DX)(AX*4), Z27; \
	VFMADD231PS Z27, Z24, A2; \
	VFMADD231PS Z27, Z25, B2; \
	VFMADD231PS Z27, Z26, C2; \
	VMOVUPS XOFF(DI)(AX*4), Z27; \
	VFMADD231PS Z27, Z24, A3; \
	VFMADD231PS Z27, Z25, B3; \
	VFMADD231PS Z27, Z26, C3

// With pf ≠ 0 the loop also prefetches (to L2) the next 3 rows, which the
// next row tile reads: the driver asks for it on a row tile's first input
// tile, so that the weights stream from memory ahead of use.
#define MM512(W, SH, OFF1, PFL) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	SHLQ SH, R8; \
	LEAQ (SI)(R8*1), R9; \
	LEAQ (R9)(R8*1), R10; \
	MOVQ xs+16(FP), AX; \
	MOVQ 0(AX), BX; \
	MOVQ 8(AX), CX; \
	MOVQ 16(AX), DX; \
	MOVQ 24(AX), DI; \
	MOVQ nl+24(FP), R12; \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	XORQ AX, AX; \
	LEAQ (R10)(R8*1), R13; \
	CMPQ pf+40(FP), $0; \
	JNE loopPF; \
loop: \
	MM512_HALF(W, 0, 0, Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22); \
	MM512_HALF(W, OFF1, 64, Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17, Z19, Z21, Z23); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loop; \
	JMP reduce; \
loopPF: \
	PFL; \
	MM512_HALF(W, 0, 0, Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22); \
	MM512_HALF(W, OFF1, 64, Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17, Z19, Z21, Z23); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loopPF; \
reduce: \
	MOVQ out+32(FP), SI; \
	HSUM32_512(Z0, Z1, X0, 0(SI)); \
	HSUM32_512(Z2, Z3, X2, 4(SI)); \
	HSUM32_512(Z4, Z5, X4, 8(SI)); \
	HSUM32_512(Z6, Z7, X6, 12(SI)); \
	HSUM32_512(Z8, Z9, X8, 16(SI)); \
	HSUM32_512(Z10, Z11, X10, 20(SI)); \
	HSUM32_512(Z12, Z13, X12, 24(SI)); \
	HSUM32_512(Z14, Z15, X14, 28(SI)); \
	HSUM32_512(Z16, Z17, X16, 32(SI)); \
	HSUM32_512(Z18, Z19, X18, 36(SI)); \
	HSUM32_512(Z20, Z21, X20, 40(SI)); \
	HSUM32_512(Z22, Z23, X22, 44(SI)); \
	VZEROUPPER; \
	RET

// AVX2: 1 weight row × 3 inputs; the lane groups of input t are Y(4t+q)
// (lanes 8q..8q+7); out[t]. Weights through Y12, inputs as FMA operands.
#define MM256_Q(W, OFF, XOFF, Q0, Q1, Q2) \
	W(SI, OFF, Y12); \
	VFMADD231PS XOFF(BX)(AX*4), Y12, Q0; \
	VFMADD231PS XOFF(CX)(AX*4), Y12, Q1; \
	VFMADD231PS XOFF(DX)(AX*4), Y12, Q2

#define MM256(W, SH, OFF1, OFF2, OFF3, PFL) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	SHLQ SH, R8; \
	LEAQ (SI)(R8*1), R13; \
	MOVQ xs+16(FP), AX; \
	MOVQ 0(AX), BX; \
	MOVQ 8(AX), CX; \
	MOVQ 16(AX), DX; \
	MOVQ nl+24(FP), R12; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	XORQ AX, AX; \
	CMPQ pf+40(FP), $0; \
	JNE loopPF; \
loop: \
	MM256_Q(W, 0, 0, Y0, Y4, Y8); \
	MM256_Q(W, OFF1, 32, Y1, Y5, Y9); \
	MM256_Q(W, OFF2, 64, Y2, Y6, Y10); \
	MM256_Q(W, OFF3, 96, Y3, Y7, Y11); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loop; \
	JMP reduce; \
loopPF: \
	PFL; \
	MM256_Q(W, 0, 0, Y0, Y4, Y8); \
	MM256_Q(W, OFF1, 32, Y1, Y5, Y9); \
	MM256_Q(W, OFF2, 64, Y2, Y6, Y10); \
	MM256_Q(W, OFF3, 96, Y3, Y7, Y11); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loopPF; \
reduce: \
	MOVQ out+32(FP), SI; \
	HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(SI)); \
	HSUM32_256(Y4, Y5, Y6, Y7, X4, 4(SI)); \
	HSUM32_256(Y8, Y9, Y10, Y11, X8, 8(SI)); \
	VZEROUPPER; \
	RET

// ---- the kernels ----

TEXT ·mvBF16AVX512(SB), NOSPLIT, $0-48
	MV512(W512_BF16, $1, 32, PF_U16)

TEXT ·mvF16AVX512(SB), NOSPLIT, $0-48
	MV512(W512_F16, $1, 32, PF_U16)

TEXT ·mvF32AVX512(SB), NOSPLIT, $0-48
	MV512(W512_F32, $2, 64, PF_F32)

TEXT ·mvBF16AVX2(SB), NOSPLIT, $0-48
	MV256(W256_BF16, $1, 16, 32, 48, PF_U16)

TEXT ·mvF16AVX2(SB), NOSPLIT, $0-48
	MV256(W256_F16, $1, 16, 32, 48, PF_U16)

TEXT ·mvF32AVX2(SB), NOSPLIT, $0-48
	MV256(W256_F32, $2, 32, 64, 96, PF_F32)

TEXT ·mmBF16AVX512(SB), NOSPLIT, $0-48
	MM512(W512_BF16, $1, 32, PFT3_U16)

TEXT ·mmF16AVX512(SB), NOSPLIT, $0-48
	MM512(W512_F16, $1, 32, PFT3_U16)

TEXT ·mmF32AVX512(SB), NOSPLIT, $0-48
	MM512(W512_F32, $2, 64, PFT3_F32)

TEXT ·mmBF16AVX2(SB), NOSPLIT, $0-48
	MM256(W256_BF16, $1, 16, 32, 48, PFT1_U16)

TEXT ·mmF16AVX2(SB), NOSPLIT, $0-48
	MM256(W256_F16, $1, 16, 32, 48, PFT1_U16)

TEXT ·mmF32AVX2(SB), NOSPLIT, $0-48
	MM256(W256_F32, $2, 32, 64, 96, PFT1_F32)

// func dotAVX512(a, b *float32, nl int) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DX
	MOVQ nl+16(FP), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ AX, AX
loop:
	VMOVUPS (SI)(AX*4), Z2
	VMOVUPS 64(SI)(AX*4), Z3
	VFMADD231PS (DX)(AX*4), Z2, Z0
	VFMADD231PS 64(DX)(AX*4), Z3, Z1
	ADDQ $32, AX
	CMPQ AX, BX
	JLT loop
	HSUM32_512(Z0, Z1, X0, ret+24(FP))
	VZEROUPPER
	RET

// func dotAVX2(a, b *float32, nl int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DX
	MOVQ nl+16(FP), BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
loop:
	VMOVUPS (SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7
	VFMADD231PS (DX)(AX*4), Y4, Y0
	VFMADD231PS 32(DX)(AX*4), Y5, Y1
	VFMADD231PS 64(DX)(AX*4), Y6, Y2
	VFMADD231PS 96(DX)(AX*4), Y7, Y3
	ADDQ $32, AX
	CMPQ AX, BX
	JLT loop
	HSUM32_256(Y0, Y1, Y2, Y3, X0, ret+24(FP))
	VZEROUPPER
	RET

// func fmaSS(a, b, c float32) float32 — the hardware single FMA (tests).
TEXT ·fmaSS(SB), NOSPLIT, $0-20
	MOVSS a+0(FP), X0
	MOVSS b+4(FP), X1
	MOVSS c+8(FP), X2
	VFMADD231SS X1, X0, X2
	MOVSS X2, ret+16(FP)
	RET

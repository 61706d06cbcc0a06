//go:build amd64 && !purego

#include "textflag.h"

// Matrix-vector and dot kernels for AVX-512F and AVX2+FMA (the
// matrix-matrix tiles are in mmtile_amd64.s).
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

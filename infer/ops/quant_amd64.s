//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Kernels over block-quantized weights (see quant.go and
// infer/weights/quant.go). The weight of every element is computed exactly
// as the portable code does — Q8_0: d·q (VCVTPH2PS, VPMOVSXBD, VCVTDQ2PS,
// VMULPS: exact); Q4_K: (d·sc)·q − dmin·m (the products exact, so one
// VFMSUB213PS rounds once, as the portable code's subtraction does; the
// AVX-512 matrix-vector kernel computes those 16 values per sub-block once,
// as a table, and looks each nibble up with VPERMPS) — and goes to lane
// j%32 of the 32-lane accumulator with one FMA, j ascending, then the
// fixed tree of HSUM32_*: the contract of matvec_portable.go. A Q8_0 block or a Q4_K sub-block is exactly one
// group of 32 lanes. Only the first nl columns (a positive multiple of 32)
// are seen here; Go adds the tail.
//
// Registers: SI row, R8 row stride (bytes), CX rows, DX x, BX nl, DI dst,
// AX element index, R9 block pointer; R10-R13 scratch. The Q4_K kernels
// keep the 8 sub-block scales d·sc at 0(SP) and mins dmin·m at 32(SP).

#define PFDIST 4096

// ---- Q8_0: block at P → weights in Z4 (lanes 0-15), Z5 (16-31) ----
#define Q8W512(P) \
	VPBROADCASTW (P), Y2; \
	VCVTPH2PS Y2, Z2; \
	VPMOVSXBD 2(P), Z4; \
	VPMOVSXBD 18(P), Z5; \
	VCVTDQ2PS Z4, Z4; \
	VCVTDQ2PS Z5, Z5; \
	VMULPS Z2, Z4, Z4; \
	VMULPS Z2, Z5, Z5

// ---- Q8_0: block at P → weights in Y4-Y7 (lanes 0-7, …, 24-31) ----
#define Q8W256(P) \
	VPBROADCASTW (P), X8; \
	VCVTPH2PS X8, Y8; \
	VPMOVSXBD 2(P), Y4; \
	VPMOVSXBD 10(P), Y5; \
	VPMOVSXBD 18(P), Y6; \
	VPMOVSXBD 26(P), Y7; \
	VCVTDQ2PS Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7; \
	VMULPS Y8, Y4, Y4; \
	VMULPS Y8, Y5, Y5; \
	VMULPS Y8, Y6, Y6; \
	VMULPS Y8, Y7, Y7

// ---- Q4_K: the super-block at P's 8 scales d·sc → 0(SP), mins dmin·m →
// 32(SP). The 6-bit unpacking of get_scale_min_k4 on 32-bit words u0, u1,
// u2 (scale bytes 0-3, 4-7, 8-11): sc[0..3] = u0 & 0x3f…, sc[4..7] =
// (u2 & 0x0f…) | ((u0>>6) & 0x03…)<<4; m[0..3] = u1 & 0x3f…, m[4..7] =
// ((u2>>4) & 0x0f…) | ((u1>>6) & 0x03…)<<4. Clobbers R10-R13, Y8-Y10.
#define Q4K_SCALES(P) Q4K_SCALES_TO(P, 0, 32)

// Q4K_SCALES_TO is Q4K_SCALES storing at S(SP) and M(SP).
#define Q4K_SCALES_TO(P, S, M) \
	VPBROADCASTW 0(P), X8; \
	VCVTPH2PS X8, Y8; \
	VPBROADCASTW 2(P), X9; \
	VCVTPH2PS X9, Y9; \
	MOVL 4(P), R10; \
	MOVL 12(P), R11; \
	MOVL R10, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	MOVL R11, R13; \
	ANDL $0x0f0f0f0f, R13; \
	ORL R13, R12; \
	ANDL $0x3f3f3f3f, R10; \
	SHLQ $32, R12; \
	ORQ R12, R10; \
	VMOVQ R10, X10; \
	VPMOVZXBD X10, Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y8, Y10, Y10; \
	VMOVUPS Y10, S(SP); \
	MOVL 8(P), R10; \
	MOVL R10, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	SHRL $4, R11; \
	ANDL $0x0f0f0f0f, R11; \
	ORL R11, R12; \
	ANDL $0x3f3f3f3f, R10; \
	SHLQ $32, R12; \
	ORQ R12, R10; \
	VMOVQ R10, X10; \
	VPMOVZXBD X10, Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y9, Y10, Y10; \
	VMOVUPS Y10, M(SP)

// ---- Q4_K: sub-block R10 (0-7) of the super-block at R9 → weights in
// Z4, Z5; Z6 holds the nibble mask. Clobbers R11, Z2, Z3. ----
#define Q4KW512 \
	MOVQ R10, R11; \
	SHRQ $1, R11; \
	SHLQ $5, R11; \
	VPMOVZXBD 16(R9)(R11*1), Z4; \
	VPMOVZXBD 32(R9)(R11*1), Z5; \
	TESTQ $1, R10; \
	JNZ high; \
	VPANDD Z6, Z4, Z4; \
	VPANDD Z6, Z5, Z5; \
	JMP conv; \
high: \
	VPSRLD $4, Z4, Z4; \
	VPSRLD $4, Z5, Z5; \
conv: \
	VCVTDQ2PS Z4, Z4; \
	VCVTDQ2PS Z5, Z5; \
	VBROADCASTSS 0(SP)(R10*4), Z2; \
	VBROADCASTSS 32(SP)(R10*4), Z3; \
	VFMSUB213PS Z3, Z2, Z4; \
	VFMSUB213PS Z3, Z2, Z5

// ---- the same into Y4-Y7; Y11 holds the nibble mask. Clobbers R11,
// Y12, Y13. ----
#define Q4KW256 \
	MOVQ R10, R11; \
	SHRQ $1, R11; \
	SHLQ $5, R11; \
	VPMOVZXBD 16(R9)(R11*1), Y4; \
	VPMOVZXBD 24(R9)(R11*1), Y5; \
	VPMOVZXBD 32(R9)(R11*1), Y6; \
	VPMOVZXBD 40(R9)(R11*1), Y7; \
	TESTQ $1, R10; \
	JNZ high; \
	VPAND Y11, Y4, Y4; \
	VPAND Y11, Y5, Y5; \
	VPAND Y11, Y6, Y6; \
	VPAND Y11, Y7, Y7; \
	JMP conv; \
high: \
	VPSRLD $4, Y4, Y4; \
	VPSRLD $4, Y5, Y5; \
	VPSRLD $4, Y6, Y6; \
	VPSRLD $4, Y7, Y7; \
conv: \
	VCVTDQ2PS Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y6, Y6; \
	VCVTDQ2PS Y7, Y7; \
	VBROADCASTSS 0(SP)(R10*4), Y12; \
	VBROADCASTSS 32(SP)(R10*4), Y13; \
	VFMSUB213PS Y13, Y12, Y4; \
	VFMSUB213PS Y13, Y12, Y5; \
	VFMSUB213PS Y13, Y12, Y6; \
	VFMSUB213PS Y13, Y12, Y7

#define FMA512 \
	VFMADD231PS (DX)(AX*4), Z4, Z0; \
	VFMADD231PS 64(DX)(AX*4), Z5, Z1

#define FMA256 \
	VFMADD231PS (DX)(AX*4), Y4, Y0; \
	VFMADD231PS 32(DX)(AX*4), Y5, Y1; \
	VFMADD231PS 64(DX)(AX*4), Y6, Y2; \
	VFMADD231PS 96(DX)(AX*4), Y7, Y3

#define STORE512 \
	VMOVUPS Z4, (DI)(AX*4); \
	VMOVUPS Z5, 64(DI)(AX*4)

#define STORE256 \
	VMOVUPS Y4, (DI)(AX*4); \
	VMOVUPS Y5, 32(DI)(AX*4); \
	VMOVUPS Y6, 64(DI)(AX*4); \
	VMOVUPS Y7, 96(DI)(AX*4)

#define MVARGS \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	MOVQ rows+16(FP), CX; \
	MOVQ x+24(FP), DX; \
	MOVQ nl+32(FP), BX; \
	MOVQ dst+40(FP), DI

#define ZERO512 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1

#define ZERO256 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

#define NEXTROW \
	ADDQ R8, SI; \
	ADDQ $4, DI; \
	DECQ CX; \
	JNZ row; \
	VZEROUPPER; \
	RET

// func mvQ8_0…(w *byte, stride, rows int, x *float32, nl int, dst *float32)
#define MVQ8(W, ZERO, FMA, HSUM) \
	MVARGS; \
row: \
	MOVQ SI, R9; \
	ZERO; \
	XORQ AX, AX; \
loop: \
	PREFETCHT0 PFDIST(R9); \
	W(R9); \
	FMA; \
	ADDQ $34, R9; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	HSUM; \
	NEXTROW

// func mvQ4_K…(w *byte, stride, rows int, x *float32, nl int, dst *float32)
#define MVQ4K(MASK, W, ZERO, FMA, HSUM) \
	MVARGS; \
	MASK; \
	MVQ4K_ROWS(W, ZERO, FMA, HSUM)

// MVQ4K_ROWS: the CX rows from SI one at a time, sub-block by sub-block.
#define MVQ4K_ROWS(W, ZERO, FMA, HSUM) \
row: \
	MOVQ SI, R9; \
	ZERO; \
	XORQ AX, AX; \
sblock: \
	PREFETCHT0 PFDIST(R9); \
	PREFETCHT0 PFDIST+64(R9); \
	PREFETCHT0 PFDIST+128(R9); \
	Q4K_SCALES(R9); \
	XORQ R10, R10; \
sub: \
	W; \
	FMA; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JGE done; \
	INCQ R10; \
	CMPQ R10, $8; \
	JLT sub; \
	ADDQ $144, R9; \
	JMP sblock; \
done: \
	HSUM; \
	NEXTROW

#define MASK512 MOVL $15, R10; VPBROADCASTD R10, Z6
#define MASK256 MOVL $15, R10; VMOVD R10, X11; VPBROADCASTD X11, Y11

// ---- Q4_K, AVX-512, two rows at once (R9 and R14, scales d·sc and mins
// dmin·m at 0/32(SP) and 64/96(SP)): sub-blocks 2p and 2p+1 of a whole
// super-block (the low and high nibbles of the 32 bytes at QOFF), x loaded
// once into Z15-Z18. The 16 weights a sub-block can take are a table
// (VFMSUB231PS over Z12 = 0…15), each nibble is looked up with VPERMPS
// (which reads the index's low 4 bits: the low nibble needs no mask). Row
// R9 goes through Z4-Z11 into Z0, Z1, row R14 through Z19-Z26 into Z13,
// Z14: two independent FMA chains. ----
#define Q4KPAIR2(QOFF, QOFF16, SA, MA, SA1, MA1, SB, MB, SB1, MB1, XOFF, XOFF1, XOFF2, XOFF3) \
	VMOVUPS XOFF(DX)(AX*4), Z15; \
	VMOVUPS XOFF1(DX)(AX*4), Z16; \
	VMOVUPS XOFF2(DX)(AX*4), Z17; \
	VMOVUPS XOFF3(DX)(AX*4), Z18; \
	VPMOVZXBD QOFF(R9), Z4; \
	VPMOVZXBD QOFF16(R9), Z5; \
	VPMOVZXBD QOFF(R14), Z19; \
	VPMOVZXBD QOFF16(R14), Z20; \
	VPSRLD $4, Z4, Z7; \
	VPSRLD $4, Z5, Z8; \
	VPSRLD $4, Z19, Z21; \
	VPSRLD $4, Z20, Z22; \
	VBROADCASTSS SA(SP), Z2; \
	VBROADCASTSS MA(SP), Z10; \
	VFMSUB231PS Z12, Z2, Z10; \
	VBROADCASTSS SA1(SP), Z3; \
	VBROADCASTSS MA1(SP), Z11; \
	VFMSUB231PS Z12, Z3, Z11; \
	VBROADCASTSS SB(SP), Z23; \
	VBROADCASTSS MB(SP), Z24; \
	VFMSUB231PS Z12, Z23, Z24; \
	VBROADCASTSS SB1(SP), Z25; \
	VBROADCASTSS MB1(SP), Z26; \
	VFMSUB231PS Z12, Z25, Z26; \
	VPERMPS Z10, Z4, Z4; \
	VPERMPS Z10, Z5, Z5; \
	VPERMPS Z11, Z7, Z7; \
	VPERMPS Z11, Z8, Z8; \
	VPERMPS Z24, Z19, Z19; \
	VPERMPS Z24, Z20, Z20; \
	VPERMPS Z26, Z21, Z21; \
	VPERMPS Z26, Z22, Z22; \
	VFMADD231PS Z15, Z4, Z0; \
	VFMADD231PS Z16, Z5, Z1; \
	VFMADD231PS Z15, Z19, Z13; \
	VFMADD231PS Z16, Z20, Z14; \
	VFMADD231PS Z17, Z7, Z0; \
	VFMADD231PS Z18, Z8, Z1; \
	VFMADD231PS Z17, Z21, Z13; \
	VFMADD231PS Z18, Z22, Z14

// ---- the same for one sub-block R10 (0-7) of a last partial super-block,
// both rows: the nibble picked by a shift of 0 or 4 (X9), no branch.
// Clobbers R11, R12. ----
#define Q4KSUB2 \
	MOVQ R10, R11; \
	SHRQ $1, R11; \
	SHLQ $5, R11; \
	MOVQ R10, R12; \
	ANDQ $1, R12; \
	SHLQ $2, R12; \
	VMOVQ R12, X9; \
	VPMOVZXBD 16(R9)(R11*1), Z4; \
	VPMOVZXBD 32(R9)(R11*1), Z5; \
	VPMOVZXBD 16(R14)(R11*1), Z19; \
	VPMOVZXBD 32(R14)(R11*1), Z20; \
	VPSRLD X9, Z4, Z4; \
	VPSRLD X9, Z5, Z5; \
	VPSRLD X9, Z19, Z19; \
	VPSRLD X9, Z20, Z20; \
	VBROADCASTSS 0(SP)(R10*4), Z2; \
	VBROADCASTSS 32(SP)(R10*4), Z10; \
	VFMSUB231PS Z12, Z2, Z10; \
	VBROADCASTSS 64(SP)(R10*4), Z23; \
	VBROADCASTSS 96(SP)(R10*4), Z24; \
	VFMSUB231PS Z12, Z23, Z24; \
	VPERMPS Z10, Z4, Z4; \
	VPERMPS Z10, Z5, Z5; \
	VPERMPS Z24, Z19, Z19; \
	VPERMPS Z24, Z20, Z20; \
	VMOVUPS (DX)(AX*4), Z15; \
	VMOVUPS 64(DX)(AX*4), Z16; \
	VFMADD231PS Z15, Z4, Z0; \
	VFMADD231PS Z16, Z5, Z1; \
	VFMADD231PS Z15, Z19, Z13; \
	VFMADD231PS Z16, Z20, Z14

// func mvQ4_KAVX512(w *byte, stride, rows int, x *float32, nl int, dst *float32):
// rows two at a time (their FMA chains overlap): whole super-blocks
// unrolled (Q4KPAIR2), a last partial one sub-block by sub-block
// (Q4KSUB2); a last odd row through MVQ4K_ROWS. R14 is the second row's
// block pointer (an ABI0 function may clobber it).
#define MVQ4K512 \
	MVARGS; \
	MASK512; \
	VPMOVZXBD q4kIota<>(SB), Z12; \
	VCVTDQ2PS Z12, Z12; \
pairrow: \
	CMPQ CX, $2; \
	JLT row; \
	MOVQ SI, R9; \
	LEAQ (SI)(R8*1), R14; \
	ZERO512; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	XORQ AX, AX; \
psblock: \
	PREFETCHT0 PFDIST(R9); \
	PREFETCHT0 PFDIST+64(R9); \
	PREFETCHT0 PFDIST+128(R9); \
	PREFETCHT0 PFDIST(R14); \
	PREFETCHT0 PFDIST+64(R14); \
	PREFETCHT0 PFDIST+128(R14); \
	Q4K_SCALES_TO(R9, 0, 32); \
	Q4K_SCALES_TO(R14, 64, 96); \
	MOVQ BX, R10; \
	SUBQ AX, R10; \
	CMPQ R10, $256; \
	JLT ptail; \
	Q4KPAIR2(16, 32, 0, 32, 4, 36, 64, 96, 68, 100, 0, 64, 128, 192); \
	Q4KPAIR2(48, 64, 8, 40, 12, 44, 72, 104, 76, 108, 256, 320, 384, 448); \
	Q4KPAIR2(80, 96, 16, 48, 20, 52, 80, 112, 84, 116, 512, 576, 640, 704); \
	Q4KPAIR2(112, 128, 24, 56, 28, 60, 88, 120, 92, 124, 768, 832, 896, 960); \
	ADDQ $256, AX; \
	ADDQ $144, R9; \
	ADDQ $144, R14; \
	CMPQ AX, BX; \
	JLT psblock; \
	JMP pdone; \
ptail: \
	XORQ R10, R10; \
ptsub: \
	Q4KSUB2; \
	ADDQ $32, AX; \
	INCQ R10; \
	CMPQ AX, BX; \
	JLT ptsub; \
pdone: \
	HSUM32_512(Z0, Z1, X0, 0(DI)); \
	HSUM32_512(Z13, Z14, X13, 4(DI)); \
	LEAQ (SI)(R8*2), SI; \
	ADDQ $8, DI; \
	SUBQ $2, CX; \
	JNZ pairrow; \
	VZEROUPPER; \
	RET; \
	MVQ4K_ROWS(Q4KW512, ZERO512, FMA512, HSUM32_512(Z0, Z1, X0, 0(DI)))

// func dqQ8_0…(w *byte, nl int, dst *float32): dst[:nl] = the weights.
#define DQQ8(W, STORE) \
	MOVQ w+0(FP), R9; \
	MOVQ nl+8(FP), BX; \
	MOVQ dst+16(FP), DI; \
	XORQ AX, AX; \
loop: \
	W(R9); \
	STORE; \
	ADDQ $34, R9; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	VZEROUPPER; \
	RET

// func dqQ4_K…(w *byte, nl int, dst *float32)
#define DQQ4K(MASK, W, STORE) \
	MOVQ w+0(FP), R9; \
	MOVQ nl+8(FP), BX; \
	MOVQ dst+16(FP), DI; \
	MASK; \
	XORQ AX, AX; \
sblock: \
	Q4K_SCALES(R9); \
	XORQ R10, R10; \
sub: \
	W; \
	STORE; \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JGE done; \
	INCQ R10; \
	CMPQ R10, $8; \
	JLT sub; \
	ADDQ $144, R9; \
	JMP sblock; \
done: \
	VZEROUPPER; \
	RET

// 0, 1, …, 15: the nibble values, for the tables of Q4KPAIR2 and Q4KSUB2.
DATA q4kIota<>+0(SB)/8, $0x0706050403020100
DATA q4kIota<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL q4kIota<>(SB), RODATA|NOPTR, $16

// ---- the kernels ----

TEXT ·mvQ8_0AVX512(SB), NOSPLIT, $0-48
	MVQ8(Q8W512, ZERO512, FMA512, HSUM32_512(Z0, Z1, X0, 0(DI)))

TEXT ·mvQ8_0AVX2(SB), NOSPLIT, $0-48
	MVQ8(Q8W256, ZERO256, FMA256, HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(DI)))

TEXT ·mvQ4_KAVX512(SB), NOSPLIT, $128-48
	MVQ4K512

TEXT ·mvQ4_KAVX2(SB), NOSPLIT, $64-48
	MVQ4K(MASK256, Q4KW256, ZERO256, FMA256, HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(DI)))

TEXT ·dqQ8_0AVX512(SB), NOSPLIT, $0-24
	DQQ8(Q8W512, STORE512)

TEXT ·dqQ8_0AVX2(SB), NOSPLIT, $0-24
	DQQ8(Q8W256, STORE256)

TEXT ·dqQ4_KAVX512(SB), NOSPLIT, $64-24
	DQQ4K(MASK512, Q4KW512, STORE512)

TEXT ·dqQ4_KAVX2(SB), NOSPLIT, $64-24
	DQQ4K(MASK256, Q4KW256, STORE256)

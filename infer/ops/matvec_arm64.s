//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// Matrix-vector, matrix-matrix and dot kernels for arm64 ASIMD (NEON).
// Every kernel follows the 32-lane contract of matvec_portable.go: element
// j of a row goes to lane j%32, held as eight 4-lane registers (lanes 0-3,
// 4-7, …, 28-31), is accumulated with one FMLA (fused, rounded once), and
// the lanes are summed in the fixed tree of reduce32 (HSUM32). Only the
// first nl columns (nl a positive multiple of 32) are seen here; Go adds
// the tail. The shared encodings and HSUM32 are neon_arm64.h's.
//
// All macros are defined before any TEXT so that go vet's frame check reads
// each TEXT block on its own.

// FCVTL2 Vd.4S, Vn.8H (halves 4-7)
#define FCVTHI(n, d) WORD $(0x4E217800 | ((n)<<5) | (d))

// ---- weight widening: 32 weights from R6 (post-incremented) into
// V16-V23 (lanes 0-3, …, 28-31); V24-V27 scratch, V31 zero ----

// bf16: the halfword goes to the high half of a zero word (ZIP with zero).
#define W_BF16 \
	VLD1.P 64(R6), [V24.H8, V25.H8, V26.H8, V27.H8]; \
	VZIP1 V24.H8, V31.H8, V16.H8; \
	VZIP2 V24.H8, V31.H8, V17.H8; \
	VZIP1 V25.H8, V31.H8, V18.H8; \
	VZIP2 V25.H8, V31.H8, V19.H8; \
	VZIP1 V26.H8, V31.H8, V20.H8; \
	VZIP2 V26.H8, V31.H8, V21.H8; \
	VZIP1 V27.H8, V31.H8, V22.H8; \
	VZIP2 V27.H8, V31.H8, V23.H8

// f16: the exact half→single conversion.
#define W_F16 \
	VLD1.P 64(R6), [V24.H8, V25.H8, V26.H8, V27.H8]; \
	FCVTLO(24, 16); \
	FCVTHI(24, 17); \
	FCVTLO(25, 18); \
	FCVTHI(25, 19); \
	FCVTLO(26, 20); \
	FCVTHI(26, 21); \
	FCVTLO(27, 22); \
	FCVTHI(27, 23)

#define W_F32 \
	VLD1.P 64(R6), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	VLD1.P 64(R6), [V20.S4, V21.S4, V22.S4, V23.S4]

// ---- software prefetch, PFDIST bytes ahead of the weight stream (as the
// amd64 kernels do; prefetches never fault) ----
#define PF_U16 PRFM 4096(R6), PLDL1KEEP
#define PF_F32 PRFM 4096(R6), PLDL1KEEP; PRFM 4160(R6), PLDL1KEEP

// FMA8: acc V0-V7 += weights V16-V23 × x V8-V15.
#define FMA8 \
	VFMLA V16.S4, V8.S4, V0.S4; \
	VFMLA V17.S4, V9.S4, V1.S4; \
	VFMLA V18.S4, V10.S4, V2.S4; \
	VFMLA V19.S4, V11.S4, V3.S4; \
	VFMLA V20.S4, V12.S4, V4.S4; \
	VFMLA V21.S4, V13.S4, V5.S4; \
	VFMLA V22.S4, V14.S4, V6.S4; \
	VFMLA V23.S4, V15.S4, V7.S4

// ---- matrix-vector: one row at a time, one linear stream ----

// func mv…(w *T, stride, rows int, x *float32, nl int, dst *float32)
// Registers: R0 row, R1 row stride (bytes), R2 rows, R3 x, R4 nl, R5 dst,
// R6 weight pointer, R7 x pointer, R8 elements left in the row.
#define MV(W, SH, PF) \
	MOVD w+0(FP), R0; \
	MOVD stride+8(FP), R1; \
	LSL SH, R1, R1; \
	MOVD rows+16(FP), R2; \
	MOVD x+24(FP), R3; \
	MOVD nl+32(FP), R4; \
	MOVD dst+40(FP), R5; \
	VEOR V31.B16, V31.B16, V31.B16; \
row: \
	MOVD R0, R6; \
	MOVD R3, R7; \
	MOVD R4, R8; \
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7); \
loop: \
	PF; \
	W; \
	VLD1.P 64(R7), [V8.S4, V9.S4, V10.S4, V11.S4]; \
	VLD1.P 64(R7), [V12.S4, V13.S4, V14.S4, V15.S4]; \
	FMA8; \
	SUBS $32, R8, R8; \
	BNE loop; \
	HSUM32(0); \
	FMOVS.P F0, 4(R5); \
	ADD R1, R0, R0; \
	SUBS $1, R2, R2; \
	BNE row; \
	RET

// ---- matrix-matrix register tile: 1 weight row × 3 inputs ----

// The lane groups of input t are V(8t+q) (lanes 4q..4q+3); out[t]. A half
// (16 columns) of the weights is widened into V24-V27, each input's 16
// values pass through V28, V29 two registers at a time.
// func mm…(w *T, stride int, xs *[4]*float32, nl int, out *[16]float32, pf int)
// Registers: R6 weights, R2-R4 the inputs, R5 elements left, R13 the next
// row (prefetched to L2 when pf ≠ 0).

// HW_*: 16 weights from R6 into V24-V27 (V28, V29 scratch, V31 zero).
#define HW_BF16 \
	VLD1.P 32(R6), [V28.H8, V29.H8]; \
	VZIP1 V28.H8, V31.H8, V24.H8; \
	VZIP2 V28.H8, V31.H8, V25.H8; \
	VZIP1 V29.H8, V31.H8, V26.H8; \
	VZIP2 V29.H8, V31.H8, V27.H8

#define HW_F16 \
	VLD1.P 32(R6), [V28.H8, V29.H8]; \
	FCVTLO(28, 24); \
	FCVTHI(28, 25); \
	FCVTLO(29, 26); \
	FCVTHI(29, 27)

#define HW_F32 VLD1.P 64(R6), [V24.S4, V25.S4, V26.S4, V27.S4]

// MMX: 16 values of input XP into accumulators A0-A3.
#define MMX(XP, A0, A1, A2, A3) \
	VLD1.P 32(XP), [V28.S4, V29.S4]; \
	VFMLA V24.S4, V28.S4, A0.S4; \
	VFMLA V25.S4, V29.S4, A1.S4; \
	VLD1.P 32(XP), [V28.S4, V29.S4]; \
	VFMLA V26.S4, V28.S4, A2.S4; \
	VFMLA V27.S4, V29.S4, A3.S4

#define MMSTEP(HW) \
	HW; \
	MMX(R2, V0, V1, V2, V3); \
	MMX(R3, V8, V9, V10, V11); \
	MMX(R4, V16, V17, V18, V19); \
	HW; \
	MMX(R2, V4, V5, V6, V7); \
	MMX(R3, V12, V13, V14, V15); \
	MMX(R4, V20, V21, V22, V23)

#define PFT_U16 PRFM (R13), PLDL2KEEP; ADD $64, R13, R13
#define PFT_F32 PRFM (R13), PLDL2KEEP; PRFM 64(R13), PLDL2KEEP; ADD $128, R13, R13

#define MM(HW, SH, PFL) \
	MOVD w+0(FP), R6; \
	MOVD stride+8(FP), R1; \
	LSL SH, R1, R1; \
	ADD R6, R1, R13; \
	MOVD xs+16(FP), R0; \
	MOVD 0(R0), R2; \
	MOVD 8(R0), R3; \
	MOVD 16(R0), R4; \
	MOVD nl+24(FP), R5; \
	MOVD out+32(FP), R7; \
	MOVD pf+40(FP), R8; \
	VEOR V31.B16, V31.B16, V31.B16; \
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7); \
	ZERO8(V8, V9, V10, V11, V12, V13, V14, V15); \
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23); \
	CBNZ R8, loopPF; \
loop: \
	MMSTEP(HW); \
	SUBS $32, R5, R5; \
	BNE loop; \
	B reduce; \
loopPF: \
	PFL; \
	MMSTEP(HW); \
	SUBS $32, R5, R5; \
	BNE loopPF; \
reduce: \
	HSUM32(0); \
	HSUM32(8); \
	HSUM32(16); \
	FMOVS F0, 0(R7); \
	FMOVS F8, 4(R7); \
	FMOVS F16, 8(R7); \
	RET

// ---- the kernels ----

TEXT ·mvBF16NEON(SB), NOSPLIT, $0-48
	MV(W_BF16, $1, PF_U16)

TEXT ·mvF16NEON(SB), NOSPLIT, $0-48
	MV(W_F16, $1, PF_U16)

TEXT ·mvF32NEON(SB), NOSPLIT, $0-48
	MV(W_F32, $2, PF_F32)

TEXT ·mmBF16NEON(SB), NOSPLIT, $0-48
	MM(HW_BF16, $1, PFT_U16)

TEXT ·mmF16NEON(SB), NOSPLIT, $0-48
	MM(HW_F16, $1, PFT_U16)

TEXT ·mmF32NEON(SB), NOSPLIT, $0-48
	MM(HW_F32, $2, PFT_F32)

// func dotNEON(a, b *float32, nl int) float32
TEXT ·dotNEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R6
	MOVD b+8(FP), R7
	MOVD nl+16(FP), R8
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7)
loop:
	W_F32
	VLD1.P 64(R7), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R7), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMA8
	SUBS $32, R8, R8
	BNE loop
	HSUM32(0)
	FMOVS F0, ret+24(FP)
	RET

// func fmaSS(a, b, c float32) float32 — the hardware single FMA (tests).
TEXT ·fmaSS(SB), NOSPLIT, $0-20
	FMOVS a+0(FP), F0
	FMOVS b+4(FP), F1
	FMOVS c+8(FP), F2
	FMADDS F1, F2, F0, F3
	FMOVS F3, ret+16(FP)
	RET

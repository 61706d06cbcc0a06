//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// Kernels over block-quantized weights for arm64 ASIMD (see quant.go and
// infer/weights/quant.go). The weight of every element is computed exactly
// as the portable code does — Q8_0: d·q (FCVTL, SXTL, SCVTF, FMUL: exact);
// Q4_K: (d·sc)·q − dmin·m (the product exact, the subtraction rounded once,
// as the portable code's) — and goes to lane j%32 of the 32-lane
// accumulator with one FMLA, j ascending, then the fixed tree of HSUM32:
// the contract of matvec_portable.go. A Q8_0 block or a Q4_K sub-block is
// exactly one group of 32 lanes. Only the first nl columns (a positive
// multiple of 32) are seen here; Go adds the tail.
//
// Registers: R0 row, R1 row stride (bytes), R2 rows, R3 x, R4 nl, R5 dst,
// R6 block pointer, R7 x pointer, R8 elements left in the row, R9-R15
// scratch. V0-V7 the accumulator (lanes 0-3, …, 28-31), V8-V15 x.
//
// OP(m, n, d) computes Vd = Vn op Vm on register numbers (WORD encodings
// of instructions the Go assembler has no mnemonics for; the shared ones
// and HSUM32 are neon_arm64.h's).

// FMUL Vd.4S, Vn.4S, Vm.S[i]
#define FMULE(m, i, n, d) WORD $(0x4F809000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
#define SCVTF4(n, d) WORD $(0x4E21D800 | ((n)<<5) | (d))
#define UCVTF4(n, d) WORD $(0x6E21D800 | ((n)<<5) | (d))
// SXTL Vd.8H, Vn.8B / SXTL2 Vd.8H, Vn.16B / SXTL Vd.4S, Vn.4H / SXTL2 Vd.4S, Vn.8H
#define SXTLB(n, d) WORD $(0x0F08A400 | ((n)<<5) | (d))
#define SXTL2B(n, d) WORD $(0x4F08A400 | ((n)<<5) | (d))
#define SXTLH(n, d) WORD $(0x0F10A400 | ((n)<<5) | (d))
#define SXTL2H(n, d) WORD $(0x4F10A400 | ((n)<<5) | (d))

#define LOADX \
	VLD1.P 64(R7), [V8.S4, V9.S4, V10.S4, V11.S4]; \
	VLD1.P 64(R7), [V12.S4, V13.S4, V14.S4, V15.S4]

// ---- Q8_0: the block at R6 (post-incremented by 34) → weights in
// V22-V29 (lanes 0-3, …, 28-31). d broadcast through V30, the int8 values
// through V16, V17 and their int16 widening through V18-V21. ----
#define Q8W \
	VLD1R.P 2(R6), [V30.H8]; \
	VLD1.P 32(R6), [V16.B16, V17.B16]; \
	FCVTLO(30, 30); \
	SXTLB(16, 18); \
	SXTL2B(16, 19); \
	SXTLB(17, 20); \
	SXTL2B(17, 21); \
	SXTLH(18, 22); \
	SXTL2H(18, 23); \
	SXTLH(19, 24); \
	SXTL2H(19, 25); \
	SXTLH(20, 26); \
	SXTL2H(20, 27); \
	SXTLH(21, 28); \
	SXTL2H(21, 29); \
	SCVTF4(22, 22); \
	SCVTF4(23, 23); \
	SCVTF4(24, 24); \
	SCVTF4(25, 25); \
	SCVTF4(26, 26); \
	SCVTF4(27, 27); \
	SCVTF4(28, 28); \
	SCVTF4(29, 29); \
	FMUL4(30, 22, 22); \
	FMUL4(30, 23, 23); \
	FMUL4(30, 24, 24); \
	FMUL4(30, 25, 25); \
	FMUL4(30, 26, 26); \
	FMUL4(30, 27, 27); \
	FMUL4(30, 28, 28); \
	FMUL4(30, 29, 29)

#define Q8FMA \
	VFMLA V22.S4, V8.S4, V0.S4; \
	VFMLA V23.S4, V9.S4, V1.S4; \
	VFMLA V24.S4, V10.S4, V2.S4; \
	VFMLA V25.S4, V11.S4, V3.S4; \
	VFMLA V26.S4, V12.S4, V4.S4; \
	VFMLA V27.S4, V13.S4, V5.S4; \
	VFMLA V28.S4, V14.S4, V6.S4; \
	VFMLA V29.S4, V15.S4, V7.S4

#define MVARGS \
	MOVD w+0(FP), R0; \
	MOVD stride+8(FP), R1; \
	MOVD rows+16(FP), R2; \
	MOVD x+24(FP), R3; \
	MOVD nl+32(FP), R4; \
	MOVD dst+40(FP), R5

#define NEXTROW \
	HSUM32(0); \
	FMOVS.P F0, 4(R5); \
	ADD R1, R0, R0; \
	SUBS $1, R2, R2; \
	BNE row; \
	RET

// ---- Q4_K: the super-block at R6's scales d·sc → V26 (sub-blocks 0-3),
// V27 (4-7) and mins dmin·m → V28, V29. The 6-bit unpacking of
// get_scale_min_k4 on the 32-bit words u0, u1, u2 (scale bytes 0-3, 4-7,
// 8-11): sc[0..3] = u0 & 0x3f…, sc[4..7] = (u2 & 0x0f…) | ((u0>>6) &
// 0x03…)<<4; m[0..3] = u1 & 0x3f…, m[4..7] = ((u2>>4) & 0x0f…) | ((u1>>6)
// & 0x03…)<<4. d and dmin through V30, V31; R9-R14, V20, V21 scratch. The
// products d·sc and dmin·m are exact. Leaves V31 = the nibble mask. ----
#define Q4KSCALES \
	VLD1R (R6), [V30.H8]; \
	ADD $2, R6, R9; \
	VLD1R (R9), [V31.H8]; \
	FCVTLO(30, 30); \
	FCVTLO(31, 31); \
	MOVWU 4(R6), R10; \
	MOVWU 8(R6), R11; \
	MOVWU 12(R6), R12; \
	LSRW $6, R10, R13; \
	ANDW $0x03030303, R13, R13; \
	LSLW $4, R13, R13; \
	ANDW $0x0f0f0f0f, R12, R14; \
	ORRW R14, R13, R13; \
	ANDW $0x3f3f3f3f, R10, R14; \
	ORR R13<<32, R14, R14; \
	FMOVD R14, F20; \
	LSRW $6, R11, R13; \
	ANDW $0x03030303, R13, R13; \
	LSLW $4, R13, R13; \
	LSRW $4, R12, R14; \
	ANDW $0x0f0f0f0f, R14, R14; \
	ORRW R14, R13, R13; \
	ANDW $0x3f3f3f3f, R11, R14; \
	ORR R13<<32, R14, R14; \
	FMOVD R14, F21; \
	VUXTL V20.B8, V20.H8; \
	VUXTL V21.B8, V21.H8; \
	VUXTL V20.H4, V26.S4; \
	VUXTL2 V20.H8, V27.S4; \
	VUXTL V21.H4, V28.S4; \
	VUXTL2 V21.H8, V29.S4; \
	UCVTF4(26, 26); \
	UCVTF4(27, 27); \
	UCVTF4(28, 28); \
	UCVTF4(29, 29); \
	FMUL4(30, 26, 26); \
	FMUL4(30, 27, 27); \
	FMUL4(31, 28, 28); \
	FMUL4(31, 29, 29); \
	VMOVI $15, V31.B16

// Q4KNIB_LO / _HI: the nibbles of sub-block 2p / 2p+1 from the 32 bytes
// in V16, V17 into V18, V19.
#define Q4KNIB_LO \
	VAND V31.B16, V16.B16, V18.B16; \
	VAND V31.B16, V17.B16, V19.B16

#define Q4KNIB_HI \
	VUSHR $4, V16.B16, V18.B16; \
	VUSHR $4, V17.B16, V19.B16

// Q4KHALF: 16 nibbles widened to int16 in H0, H1 → their weights
// (DS·q − ms, ms in V30) in V18-V21. DS is the number of the register
// holding the sub-block's d·sc in lane I.
#define Q4KHALF(H0, H1, DS, I) \
	VUXTL H0.H4, V18.S4; \
	VUXTL2 H0.H8, V19.S4; \
	VUXTL H1.H4, V20.S4; \
	VUXTL2 H1.H8, V21.S4; \
	UCVTF4(18, 18); \
	UCVTF4(19, 19); \
	UCVTF4(20, 20); \
	UCVTF4(21, 21); \
	FMULE(DS, I, 18, 18); \
	FMULE(DS, I, 19, 19); \
	FMULE(DS, I, 20, 20); \
	FMULE(DS, I, 21, 21); \
	FSUB4(30, 18, 18); \
	FSUB4(30, 19, 19); \
	FSUB4(30, 20, 20); \
	FSUB4(30, 21, 21)

// Q4KFMA: acc A0-A3 += V18-V21 × x X0-X3.
#define Q4KFMA(X0, X1, X2, X3, A0, A1, A2, A3) \
	VFMLA V18.S4, X0.S4, A0.S4; \
	VFMLA V19.S4, X1.S4, A1.S4; \
	VFMLA V20.S4, X2.S4, A2.S4; \
	VFMLA V21.S4, X3.S4, A3.S4

#define Q4KDS(MS, I) \
	VDUP MS.S[I], V30.S4; \
	VUXTL V18.B8, V22.H8; \
	VUXTL2 V18.B16, V23.H8; \
	VUXTL V19.B8, V24.H8; \
	VUXTL2 V19.B16, V25.H8

// Q4KSUB_MV: the sub-block whose nibbles are in V18, V19 (scale in lane I
// of V(DS), min in lane I of MS) into the accumulator; then done when the
// row has no more columns.
#define Q4KSUB_MV(DS, MS, I) \
	Q4KDS(MS, I); \
	LOADX; \
	Q4KHALF(V22, V23, DS, I); \
	Q4KFMA(V8, V9, V10, V11, V0, V1, V2, V3); \
	Q4KHALF(V24, V25, DS, I); \
	Q4KFMA(V12, V13, V14, V15, V4, V5, V6, V7); \
	SUBS $32, R8, R8; \
	BEQ done

// Q4KSUB_DQ: the same, stored to R7 (post-incremented).
#define Q4KSUB_DQ(DS, MS, I) \
	Q4KDS(MS, I); \
	Q4KHALF(V22, V23, DS, I); \
	VST1.P [V18.S4, V19.S4, V20.S4, V21.S4], 64(R7); \
	Q4KHALF(V24, V25, DS, I); \
	VST1.P [V18.S4, V19.S4, V20.S4, V21.S4], 64(R7); \
	SUBS $32, R8, R8; \
	BEQ done

// Q4KSBLOCK: the sub-blocks of the super-block at R6 (R9: its quants, 32
// bytes per pair of sub-blocks); after the eighth, the next super-block.
#define Q4KSBLOCK(SUB, PF) \
sblock: \
	PF; \
	Q4KSCALES; \
	ADD $16, R6, R9; \
	VLD1.P 32(R9), [V16.B16, V17.B16]; \
	Q4KNIB_LO; \
	SUB(26, V28, 0); \
	Q4KNIB_HI; \
	SUB(26, V28, 1); \
	VLD1.P 32(R9), [V16.B16, V17.B16]; \
	Q4KNIB_LO; \
	SUB(26, V28, 2); \
	Q4KNIB_HI; \
	SUB(26, V28, 3); \
	VLD1.P 32(R9), [V16.B16, V17.B16]; \
	Q4KNIB_LO; \
	SUB(27, V29, 0); \
	Q4KNIB_HI; \
	SUB(27, V29, 1); \
	VLD1.P 32(R9), [V16.B16, V17.B16]; \
	Q4KNIB_LO; \
	SUB(27, V29, 2); \
	Q4KNIB_HI; \
	SUB(27, V29, 3); \
	ADD $144, R6, R6; \
	B sblock

// The prefetch of the mv kernels, 4 KiB ahead of the weight stream (the
// three cache lines of a Q4_K super-block); the dq kernels have none.
#define PF_Q4K PRFM 4096(R6), PLDL1KEEP; PRFM 4160(R6), PLDL1KEEP; PRFM 4224(R6), PLDL1KEEP
#define NOPF

// ---- the kernels ----

// func mvQ8_0NEON(w *byte, stride, rows int, x *float32, nl int, dst *float32)
TEXT ·mvQ8_0NEON(SB), NOSPLIT, $0-48
	MVARGS
row:
	MOVD R0, R6
	MOVD R3, R7
	MOVD R4, R8
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7)
loop:
	PRFM 4096(R6), PLDL1KEEP
	Q8W
	LOADX
	Q8FMA
	SUBS $32, R8, R8
	BNE loop
	NEXTROW

// func mvQ4_KNEON(w *byte, stride, rows int, x *float32, nl int, dst *float32)
TEXT ·mvQ4_KNEON(SB), NOSPLIT, $0-48
	MVARGS
row:
	MOVD R0, R6
	MOVD R3, R7
	MOVD R4, R8
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7)
	Q4KSBLOCK(Q4KSUB_MV, PF_Q4K)
done:
	NEXTROW

// func dqQ8_0NEON(w *byte, nl int, dst *float32): dst[:nl] = the weights.
TEXT ·dqQ8_0NEON(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R6
	MOVD nl+8(FP), R8
	MOVD dst+16(FP), R7
loop:
	Q8W
	VST1.P [V22.S4, V23.S4, V24.S4, V25.S4], 64(R7)
	VST1.P [V26.S4, V27.S4, V28.S4, V29.S4], 64(R7)
	SUBS $32, R8, R8
	BNE loop
	RET

// func dqQ4_KNEON(w *byte, nl int, dst *float32)
TEXT ·dqQ4_KNEON(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R6
	MOVD nl+8(FP), R8
	MOVD dst+16(FP), R7
	Q4KSBLOCK(Q4KSUB_DQ, NOPF)
done:
	RET

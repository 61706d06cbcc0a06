//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// Register tiles of the convolutions for arm64 ASIMD (see conv_kernels.go
// for their contract): R ≤ 6 window rows × one half (16 outputs) of a
// 32-output weight panel. Per j the tile loads the half panel row (V24-V27)
// and broadcasts the j-th value of each window row (V28), one FMLA per
// 4 outputs: output (r, c) is one sequential chain of fused multiply-adds
// over j ascending in lane c%4 of V(4r + c/4), then the bias is added once.
//
// Registers: R0 the current tap of row 0, R1 the row step and R2 the tap
// step (bytes), R3 taps left, R4 in, R5 the weights, R6-R11 the rows'
// pointers, R12 values left in the tap, R13 out, R14 the output row step
// (bytes), R15 bias.

#define ZERO4(A0, A1, A2, A3) \
	VEOR A0.B16, A0.B16, A0.B16; \
	VEOR A1.B16, A1.B16, A1.B16; \
	VEOR A2.B16, A2.B16, A2.B16; \
	VEOR A3.B16, A3.B16, A3.B16

// FMAROW: the next value of the row at PTR into its accumulators A0-A3.
#define FMAROW(PTR, A0, A1, A2, A3) \
	VLD1R.P 4(PTR), [V28.S4]; \
	VFMLA V24.S4, V28.S4, A0.S4; \
	VFMLA V25.S4, V28.S4, A1.S4; \
	VFMLA V26.S4, V28.S4, A2.S4; \
	VFMLA V27.S4, V28.S4, A3.S4

// STOREROW: accumulators V(b)…V(b+3) (named A0-A3) plus the bias (V24-V27)
// to R16, then R16 moves to the next output row.
#define STOREROW(b, A0, A1, A2, A3) \
	FADD4(24, b, b); \
	FADD4(25, (b)+1, (b)+1); \
	FADD4(26, (b)+2, (b)+2); \
	FADD4(27, (b)+3, (b)+3); \
	VST1 [A0.S4, A1.S4, A2.S4, A3.S4], (R16); \
	ADD R14, R16, R16

#define ZERO_1 ZERO4(V0, V1, V2, V3)
#define ZERO_2 ZERO_1; ZERO4(V4, V5, V6, V7)
#define ZERO_3 ZERO_2; ZERO4(V8, V9, V10, V11)
#define ZERO_4 ZERO_3; ZERO4(V12, V13, V14, V15)
#define ZERO_5 ZERO_4; ZERO4(V16, V17, V18, V19)
#define ZERO_6 ZERO_5; ZERO4(V20, V21, V22, V23)

#define PTRS_1 MOVD R0, R6
#define PTRS_2 PTRS_1; ADD R1, R6, R7
#define PTRS_3 PTRS_2; ADD R1, R7, R8
#define PTRS_4 PTRS_3; ADD R1, R8, R9
#define PTRS_5 PTRS_4; ADD R1, R9, R10
#define PTRS_6 PTRS_5; ADD R1, R10, R11

#define FMA_1 FMAROW(R6, V0, V1, V2, V3)
#define FMA_2 FMA_1; FMAROW(R7, V4, V5, V6, V7)
#define FMA_3 FMA_2; FMAROW(R8, V8, V9, V10, V11)
#define FMA_4 FMA_3; FMAROW(R9, V12, V13, V14, V15)
#define FMA_5 FMA_4; FMAROW(R10, V16, V17, V18, V19)
#define FMA_6 FMA_5; FMAROW(R11, V20, V21, V22, V23)

#define STORE_1 STOREROW(0, V0, V1, V2, V3)
#define STORE_2 STORE_1; STOREROW(4, V4, V5, V6, V7)
#define STORE_3 STORE_2; STOREROW(8, V8, V9, V10, V11)
#define STORE_4 STORE_3; STOREROW(12, V12, V13, V14, V15)
#define STORE_5 STORE_4; STOREROW(16, V16, V17, V18, V19)
#define STORE_6 STORE_5; STOREROW(20, V20, V21, V22, V23)

// func convTileNEONR…(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)
// The weights advance one panel row (32 values, 128 bytes) per j; the
// prefetch runs 1 KiB ahead of them, as on amd64.
#define CONVTILE(ZERO, PTRS, FMA, STORE) \
	MOVD x+0(FP), R0; \
	MOVD xRow+8(FP), R1; \
	LSL $2, R1, R1; \
	MOVD xTap+16(FP), R2; \
	LSL $2, R2, R2; \
	MOVD taps+24(FP), R3; \
	MOVD in+32(FP), R4; \
	MOVD w+40(FP), R5; \
	MOVD out+48(FP), R13; \
	MOVD outRow+56(FP), R14; \
	LSL $2, R14, R14; \
	MOVD bias+64(FP), R15; \
	ZERO; \
tap: \
	PTRS; \
	MOVD R4, R12; \
inner: \
	PRFM 1024(R5), PLDL1KEEP; \
	VLD1 (R5), [V24.S4, V25.S4, V26.S4, V27.S4]; \
	ADD $128, R5, R5; \
	FMA; \
	SUBS $1, R12, R12; \
	BNE inner; \
	ADD R2, R0, R0; \
	SUBS $1, R3, R3; \
	BNE tap; \
	VLD1 (R15), [V24.S4, V25.S4, V26.S4, V27.S4]; \
	MOVD R13, R16; \
	STORE; \
	RET

TEXT ·convTileNEONR1(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_1, PTRS_1, FMA_1, STORE_1)

TEXT ·convTileNEONR2(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_2, PTRS_2, FMA_2, STORE_2)

TEXT ·convTileNEONR3(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_3, PTRS_3, FMA_3, STORE_3)

TEXT ·convTileNEONR4(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_4, PTRS_4, FMA_4, STORE_4)

TEXT ·convTileNEONR5(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_5, PTRS_5, FMA_5, STORE_5)

TEXT ·convTileNEONR6(SB), NOSPLIT, $0-72
	CONVTILE(ZERO_6, PTRS_6, FMA_6, STORE_6)

// ---- ELU (alpha 1) with the kernels' expm1, the operations of
// eluPortable in the same order, 4 values at a time ----

// FMAX / FMIN Vd.4S, Vn.4S, Vm.4S (NaN in, NaN out)
#define FMAX4(m, n, d) WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d))
#define FMIN4(m, n, d) WORD $(0x4EA0F400 | ((m)<<16) | ((n)<<5) | (d))
// FRINTN Vd.4S, Vn.4S: round to nearest, ties to even
#define FRINTN4(n, d) WORD $(0x4E218800 | ((n)<<5) | (d))
// FCVTZS Vd.4S, Vn.4S
#define FCVTZS4(n, d) WORD $(0x4EA1B800 | ((n)<<5) | (d))
// FCMGT Vd.4S, Vn.4S, #0.0 (false for NaN)
#define FCMGTZ4(n, d) WORD $(0x4EA0C800 | ((n)<<5) | (d))

#define ELUCONST(BITS, V) MOVW $BITS, R3; VDUP R3, V.S4

// func eluNEON(dst, src *float32, n int): n a positive multiple of 4.
// Constants: V16 −20, V17 log2e, V18 −ln2hi, V19 ln2lo, V20-V25 c7…c2,
// V26 1, V27 0, V28 the integer 127.
TEXT ·eluNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	ELUCONST(0xc1a00000, V16)
	ELUCONST(0x3fb8aa3b, V17)
	ELUCONST(0xbf318000, V18)
	ELUCONST(0x395e8083, V19)
	ELUCONST(0x39500d01, V20)
	ELUCONST(0x3ab60b61, V21)
	ELUCONST(0x3c088889, V22)
	ELUCONST(0x3d2aaaab, V23)
	ELUCONST(0x3e2aaaab, V24)
	ELUCONST(0x3f000000, V25)
	ELUCONST(0x3f800000, V26)
	VEOR V27.B16, V27.B16, V27.B16
	ELUCONST(127, V28)
eloop:
	VLD1.P 16(R1), [V0.S4]
	FMAX4(16, 0, 1)                   // xc = max(x, −20), a NaN x goes through
	FMIN4(27, 1, 1)                   // xc = min(xc, 0)
	FMUL4(17, 1, 2)                   // z = xc·log2e
	FRINTN4(2, 2)                     // n = roundeven(z)
	VFMLA V18.S4, V2.S4, V1.S4        // r = xc + n·(−ln2hi)
	VFMLA V19.S4, V2.S4, V1.S4        // r = r + n·ln2lo
	VORR V21.B16, V21.B16, V3.B16
	VFMLA V20.S4, V1.S4, V3.S4        // q = c7·r + c6
	VORR V22.B16, V22.B16, V4.B16
	VFMLA V3.S4, V1.S4, V4.S4         // q = q·r + c5
	VORR V23.B16, V23.B16, V3.B16
	VFMLA V4.S4, V1.S4, V3.S4         // q = q·r + c4
	VORR V24.B16, V24.B16, V4.B16
	VFMLA V3.S4, V1.S4, V4.S4         // q = q·r + c3
	VORR V25.B16, V25.B16, V3.B16
	VFMLA V4.S4, V1.S4, V3.S4         // q = q·r + 1/2
	FMUL4(1, 1, 5)                    // r²
	VORR V1.B16, V1.B16, V6.B16
	VFMLA V3.S4, V5.S4, V6.S4         // p = q·r² + r
	FCVTZS4(2, 7)
	VADD V28.S4, V7.S4, V7.S4
	VSHL $23, V7.S4, V7.S4            // t = 2ⁿ
	FSUB4(26, 7, 8)                   // t − 1
	VFMLA V7.S4, V6.S4, V8.S4         // e = t·p + (t − 1)
	FCMGTZ4(0, 9)                     // x > 0
	VBIT V9.B16, V0.B16, V8.B16       // x where x > 0, else e
	VST1.P [V8.S4], 16(R0)
	SUBS $4, R2, R2
	BNE eloop
	RET

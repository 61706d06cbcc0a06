//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// Attention's row kernels (attnrows.go) for arm64 ASIMD. Row i starts at
// mat + rows[i]·stride floats; rows are int32 indices, checked by the Go
// callers.
//
// dotRowsNEON follows the 32-lane contract of matvec_portable.go exactly
// as dotNEON (matvec_arm64.s) does for one row: eight 4-lane accumulators
// from +0, element j into lane j%32 with one FMLA, j ascending, then the
// lane tree of HSUM32. It does two rows at a time (V0-V7 and V8-V15) so
// that each load of q (V16-V23) serves both.
//
// axpyRowsNEON keeps 64 floats of dst in V0-V15 (then 16 at a time in
// V0-V3) while every row, in order, adds round(w[i]·row[j]) to them: FMUL
// then FADD with the operands of axpyNEON, the roundings of one Axpy per
// row.
//
// All macros are defined before any TEXT so that go vet's frame check reads
// each TEXT block on its own.

// ROWPTR(R): the next row index (from R4, post-incremented) times the
// stride in bytes (R3), plus mat (R2), into RP.
#define ROWPTR(RP) \
	MOVW.P 4(R4), RP; \
	MUL R3, RP, RP; \
	ADD R2, RP, RP

// DOTROW(RW, A…): 32 floats of the row at RW (post-incremented) into V24-V31,
// accumulated with q (V16-V23) into V(A)…V(A+7).
#define DOTROW(RW, A0, A1, A2, A3, A4, A5, A6, A7) \
	VLD1.P 64(RW), [V24.S4, V25.S4, V26.S4, V27.S4]; \
	VLD1.P 64(RW), [V28.S4, V29.S4, V30.S4, V31.S4]; \
	VFMLA V16.S4, V24.S4, A0.S4; \
	VFMLA V17.S4, V25.S4, A1.S4; \
	VFMLA V18.S4, V26.S4, A2.S4; \
	VFMLA V19.S4, V27.S4, A3.S4; \
	VFMLA V20.S4, V28.S4, A4.S4; \
	VFMLA V21.S4, V29.S4, A5.S4; \
	VFMLA V22.S4, V30.S4, A6.S4; \
	VFMLA V23.S4, V31.S4, A7.S4

// AXPY4(x, d): V(d) += round(V31 · V(x)), for four consecutive registers.
#define AXPY4(x, d) \
	FMUL4(31, x, x); \
	FMUL4(31, (x)+1, (x)+1); \
	FMUL4(31, (x)+2, (x)+2); \
	FMUL4(31, (x)+3, (x)+3); \
	FADD4(x, d, d); \
	FADD4((x)+1, (d)+1, (d)+1); \
	FADD4((x)+2, (d)+2, (d)+2); \
	FADD4((x)+3, (d)+3, (d)+3)

// func dotRowsNEON(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)
// nrows > 0; nl is a positive multiple of 32. R0 dst, R1 q, R2 mat, R3
// stride (bytes), R4 rows, R5 rows left, R6 nl; R7, R8 row pointers, R9 q
// pointer, R10 elements left.
TEXT ·dotRowsNEON(SB), NOSPLIT, $0-56
	MOVD dst+0(FP), R0
	MOVD q+8(FP), R1
	MOVD mat+16(FP), R2
	MOVD stride+24(FP), R3
	LSL $2, R3, R3
	MOVD rows+32(FP), R4
	MOVD nrows+40(FP), R5
	MOVD nl+48(FP), R6
pair:
	CMP $2, R5
	BLT one
	ROWPTR(R7)
	ROWPTR(R8)
	MOVD R1, R9
	MOVD R6, R10
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7)
	ZERO8(V8, V9, V10, V11, V12, V13, V14, V15)
pairloop:
	VLD1.P 64(R9), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	DOTROW(R7, V0, V1, V2, V3, V4, V5, V6, V7)
	DOTROW(R8, V8, V9, V10, V11, V12, V13, V14, V15)
	SUBS $32, R10, R10
	BNE pairloop
	HSUM32(0)
	HSUM32(8)
	FMOVS F0, (R0)
	FMOVS F8, 4(R0)
	ADD $8, R0, R0
	SUB $2, R5, R5
	B pair
one:
	CBZ R5, done
	ROWPTR(R7)
	MOVD R1, R9
	MOVD R6, R10
	ZERO8(V0, V1, V2, V3, V4, V5, V6, V7)
oneloop:
	VLD1.P 64(R9), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	DOTROW(R7, V0, V1, V2, V3, V4, V5, V6, V7)
	SUBS $32, R10, R10
	BNE oneloop
	HSUM32(0)
	FMOVS F0, (R0)
done:
	RET

// func axpyRowsNEON(dst, w, mat *float32, stride int, rows *int32, nrows, n int)
// nrows > 0; n is a positive multiple of 16. R0 dst chunk, R1 w, R2 mat,
// R3 stride (bytes), R5 nrows, R6 elements left; per chunk: R4 rows and
// R11 w pointers, R10 rows left, R7 the row's chunk, R9 the chunk's byte
// offset.
TEXT ·axpyRowsNEON(SB), NOSPLIT, $0-56
	MOVD dst+0(FP), R0
	MOVD w+8(FP), R1
	MOVD mat+16(FP), R2
	MOVD stride+24(FP), R3
	LSL $2, R3, R3
	MOVD nrows+40(FP), R5
	MOVD n+48(FP), R6
	MOVD $0, R9
big:
	CMP $64, R6
	BLT small
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	ADD $64, R0, R12
	VLD1 (R12), [V4.S4, V5.S4, V6.S4, V7.S4]
	ADD $64, R12, R12
	VLD1 (R12), [V8.S4, V9.S4, V10.S4, V11.S4]
	ADD $64, R12, R12
	VLD1 (R12), [V12.S4, V13.S4, V14.S4, V15.S4]
	MOVD rows+32(FP), R4
	MOVD R1, R11
	MOVD R5, R10
bigrow:
	ROWPTR(R7)
	ADD R9, R7, R7
	FMOVS.P 4(R11), F31
	VDUP V31.S[0], V31.S4
	VLD1.P 64(R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R7), [V20.S4, V21.S4, V22.S4, V23.S4]
	VLD1.P 64(R7), [V24.S4, V25.S4, V26.S4, V27.S4]
	AXPY4(16, 0)
	AXPY4(20, 4)
	AXPY4(24, 8)
	VLD1 (R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	AXPY4(16, 12)
	SUBS $1, R10, R10
	BNE bigrow
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R0)
	ADD $256, R9, R9
	SUB $64, R6, R6
	B big
small:
	CBZ R6, done
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	MOVD rows+32(FP), R4
	MOVD R1, R11
	MOVD R5, R10
smallrow:
	ROWPTR(R7)
	ADD R9, R7, R7
	FMOVS.P 4(R11), F31
	VDUP V31.S[0], V31.S4
	VLD1 (R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	AXPY4(16, 0)
	SUBS $1, R10, R10
	BNE smallrow
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	ADD $64, R9, R9
	SUB $16, R6, R6
	B small
done:
	RET

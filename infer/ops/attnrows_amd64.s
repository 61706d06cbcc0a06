//go:build !purego

#include "textflag.h"

// Attention's row kernels (attnrows.go): one query against many rows of a
// cache matrix. Row i starts at mat + rows[i]·stride floats; rows are
// int32 indices, checked by the Go callers.
//
// dotRows* follow the 32-lane contract of matvec_portable.go exactly as
// dotAVX512/dotAVX2 (matvec_amd64.s) do for one row: lanes start at +0,
// element j is accumulated into lane j%32 with one FMA (q·row), j
// ascending, and the lanes are summed by HSUM32_512/HSUM32_256. They only
// do several rows at a time (4 on AVX-512, 2 on AVX2) so that each load of
// q serves all of them; at nl = 64 and 128 the AVX-512 kernel holds q in
// Z16-Z19 or Z16-Z23 for the whole call.
//
// axpyRows* keep a chunk of dst in registers (128, then 64 floats on
// AVX-512, 64 on AVX2; then 16 or 8 at a time) while every row, in order, adds
// round(w[i]·row[j]) to it: VMULPS then VADDPS with the operands of
// axpyAVX512/axpyAVX2, so each element sees the sequence of roundings of
// one Axpy per row.
//
// All macros are defined before any TEXT so that go vet's frame check reads
// each TEXT block on its own.

#include "hsum_amd64.h"

// ROWPTR sets R to the address of the row whose index is at OFF(R10):
// R8 + index·R9 (R9 is the stride in bytes).
#define ROWPTR(OFF, R) \
	MOVLQSX OFF(R10), R; \
	IMULQ R9, R; \
	ADDQ R8, R

// DOTROW_128 accumulates one row R of 128 floats against q (Z16-Z23):
// lanes 0-15 into A (chunks 0, 2, 4, 6), 16-31 into B. A quad's four rows
// run one after the other, each reading its 512 bytes in address order:
// from memory (attention over a cache larger than L3) that streamed ~1.3x
// faster on a Zen 4 than four rows' chunks interleaved. Each lane's chain
// is the same, so are the bits.
#define DOTROW_128(R, A, B) \
	VFMADD231PS 0(R), Z16, A; \
	VFMADD231PS 64(R), Z17, B; \
	VFMADD231PS 128(R), Z18, A; \
	VFMADD231PS 192(R), Z19, B; \
	VFMADD231PS 256(R), Z20, A; \
	VFMADD231PS 320(R), Z21, B; \
	VFMADD231PS 384(R), Z22, A; \
	VFMADD231PS 448(R), Z23, B

// DOTROW_64 is DOTROW_128 for rows of 64 floats (q in Z16-Z19).
#define DOTROW_64(R, A, B) \
	VFMADD231PS 0(R), Z16, A; \
	VFMADD231PS 64(R), Z17, B; \
	VFMADD231PS 128(R), Z18, A; \
	VFMADD231PS 192(R), Z19, B

#define ZERO8_512 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7

#define HSUM4_512 \
	HSUM32_512(Z0, Z1, X0, 0(DI)); \
	HSUM32_512(Z2, Z3, X2, 4(DI)); \
	HSUM32_512(Z4, Z5, X4, 8(DI)); \
	HSUM32_512(Z6, Z7, X6, 12(DI))

// DOTROWS_Q runs every row with q held in registers (DOTROW: the FMAs of
// one row), four rows at a time, then the rest one by one (QUAD and ONE
// are the loops' labels).
#define DOTROWS_Q(DOTROW, QUAD, ONE) \
QUAD: \
	CMPQ CX, $4; \
	JLT ONE; \
	ROWPTR(0, R11); \
	ROWPTR(4, R12); \
	ROWPTR(8, R13); \
	ROWPTR(12, DX); \
	ZERO8_512; \
	DOTROW(R11, Z0, Z1); \
	DOTROW(R12, Z2, Z3); \
	DOTROW(R13, Z4, Z5); \
	DOTROW(DX, Z6, Z7); \
	HSUM4_512; \
	ADDQ $16, DI; \
	ADDQ $16, R10; \
	SUBQ $4, CX; \
	JMP QUAD; \
ONE: \
	TESTQ CX, CX; \
	JZ done; \
	ROWPTR(0, R11); \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	DOTROW(R11, Z0, Z1); \
	HSUM32_512(Z0, Z1, X0, 0(DI)); \
	ADDQ $4, DI; \
	ADDQ $4, R10; \
	DECQ CX; \
	JMP ONE

// AXPY512(OFF, ZD, ZP): ZD += round(Z8 · OFF(R11)), the product in ZP.
#define AXPY512(OFF, ZD, ZP) \
	VMULPS OFF(R11), Z8, ZP; \
	VADDPS ZD, ZP, ZD

// AXPYCHUNK512 adds every row into a chunk of dst at byte offset AX held
// in registers (LOAD, then AXPY for each row with Z8 = its weight, then
// STORE); LOOP is the row loop's label.
#define AXPYCHUNK512(LOAD, AXPY, STORE, LOOP) \
	LOAD; \
	XORQ R12, R12; \
LOOP: \
	MOVLQSX (R10)(R12*4), R11; \
	IMULQ R9, R11; \
	ADDQ R8, R11; \
	ADDQ AX, R11; \
	VBROADCASTSS (SI)(R12*4), Z8; \
	AXPY; \
	INCQ R12; \
	CMPQ R12, CX; \
	JLT LOOP; \
	STORE

#define LOAD1_512 VMOVUPS 0(DI)(AX*1), Z0
#define LOAD4_512 \
	LOAD1_512; \
	VMOVUPS 64(DI)(AX*1), Z1; \
	VMOVUPS 128(DI)(AX*1), Z2; \
	VMOVUPS 192(DI)(AX*1), Z3
#define LOAD8_512 \
	LOAD4_512; \
	VMOVUPS 256(DI)(AX*1), Z4; \
	VMOVUPS 320(DI)(AX*1), Z5; \
	VMOVUPS 384(DI)(AX*1), Z6; \
	VMOVUPS 448(DI)(AX*1), Z7
#define STORE1_512 VMOVUPS Z0, 0(DI)(AX*1)
#define STORE4_512 \
	STORE1_512; \
	VMOVUPS Z1, 64(DI)(AX*1); \
	VMOVUPS Z2, 128(DI)(AX*1); \
	VMOVUPS Z3, 192(DI)(AX*1)
#define STORE8_512 \
	STORE4_512; \
	VMOVUPS Z4, 256(DI)(AX*1); \
	VMOVUPS Z5, 320(DI)(AX*1); \
	VMOVUPS Z6, 384(DI)(AX*1); \
	VMOVUPS Z7, 448(DI)(AX*1)
#define AXPY1_512 AXPY512(0, Z0, Z9)
#define AXPY4_512 \
	AXPY1_512; \
	AXPY512(64, Z1, Z10); \
	AXPY512(128, Z2, Z11); \
	AXPY512(192, Z3, Z12)
#define AXPY8_512 \
	AXPY4_512; \
	AXPY512(256, Z4, Z13); \
	AXPY512(320, Z5, Z14); \
	AXPY512(384, Z6, Z15); \
	AXPY512(448, Z7, Z16)

#define AXPY256(OFF, YD, YP) \
	VMULPS OFF(R11), Y8, YP; \
	VADDPS YD, YP, YD

// func dotRowsAVX512(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)
// nrows > 0; nl is a positive multiple of 32.
TEXT ·dotRowsAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ mat+16(FP), R8
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), R10
	MOVQ nrows+40(FP), CX
	MOVQ nl+48(FP), BX
	CMPQ BX, $64
	JEQ nl64
	CMPQ BX, $128
	JNE quad

	// nl = 128: q stays in Z16-Z23.
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	VMOVUPS 256(SI), Z20
	VMOVUPS 320(SI), Z21
	VMOVUPS 384(SI), Z22
	VMOVUPS 448(SI), Z23
	DOTROWS_Q(DOTROW_128, quad128, one128)

	// nl = 64 (a head of 64, as Mimi's): q stays in Z16-Z19.
nl64:
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	DOTROWS_Q(DOTROW_64, quad64, one64)

	// Any nl: q is loaded once per 32 elements for four rows.
quad:
	CMPQ CX, $4
	JLT one
	ROWPTR(0, R11)
	ROWPTR(4, R12)
	ROWPTR(8, R13)
	ROWPTR(12, DX)
	ZERO8_512
	XORQ AX, AX
quadloop:
	VMOVUPS (SI)(AX*4), Z8
	VMOVUPS 64(SI)(AX*4), Z9
	VFMADD231PS (R11)(AX*4), Z8, Z0
	VFMADD231PS 64(R11)(AX*4), Z9, Z1
	VFMADD231PS (R12)(AX*4), Z8, Z2
	VFMADD231PS 64(R12)(AX*4), Z9, Z3
	VFMADD231PS (R13)(AX*4), Z8, Z4
	VFMADD231PS 64(R13)(AX*4), Z9, Z5
	VFMADD231PS (DX)(AX*4), Z8, Z6
	VFMADD231PS 64(DX)(AX*4), Z9, Z7
	ADDQ $32, AX
	CMPQ AX, BX
	JLT quadloop
	HSUM4_512
	ADDQ $16, DI
	ADDQ $16, R10
	SUBQ $4, CX
	JMP quad
one:
	TESTQ CX, CX
	JZ done
	ROWPTR(0, R11)
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ AX, AX
oneloop:
	VMOVUPS (SI)(AX*4), Z8
	VMOVUPS 64(SI)(AX*4), Z9
	VFMADD231PS (R11)(AX*4), Z8, Z0
	VFMADD231PS 64(R11)(AX*4), Z9, Z1
	ADDQ $32, AX
	CMPQ AX, BX
	JLT oneloop
	HSUM32_512(Z0, Z1, X0, 0(DI))
	ADDQ $4, DI
	ADDQ $4, R10
	DECQ CX
	JMP one
done:
	VZEROUPPER
	RET

// func dotRowsAVX2(dst, q, mat *float32, stride int, rows *int32, nrows, nl int)
// nrows > 0; nl is a positive multiple of 32. Two rows at a time: Y0-Y3
// and Y4-Y7 are their 32 lanes, Y8-Y11 the chunk of q.
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ mat+16(FP), R8
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), R10
	MOVQ nrows+40(FP), CX
	MOVQ nl+48(FP), BX
pair:
	CMPQ CX, $2
	JLT one
	ROWPTR(0, R11)
	ROWPTR(4, R12)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
pairloop:
	VMOVUPS (SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	VMOVUPS 64(SI)(AX*4), Y10
	VMOVUPS 96(SI)(AX*4), Y11
	VFMADD231PS (R11)(AX*4), Y8, Y0
	VFMADD231PS 32(R11)(AX*4), Y9, Y1
	VFMADD231PS 64(R11)(AX*4), Y10, Y2
	VFMADD231PS 96(R11)(AX*4), Y11, Y3
	VFMADD231PS (R12)(AX*4), Y8, Y4
	VFMADD231PS 32(R12)(AX*4), Y9, Y5
	VFMADD231PS 64(R12)(AX*4), Y10, Y6
	VFMADD231PS 96(R12)(AX*4), Y11, Y7
	ADDQ $32, AX
	CMPQ AX, BX
	JLT pairloop
	HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(DI))
	HSUM32_256(Y4, Y5, Y6, Y7, X4, 4(DI))
	ADDQ $8, DI
	ADDQ $8, R10
	SUBQ $2, CX
	JMP pair
one:
	TESTQ CX, CX
	JZ done
	ROWPTR(0, R11)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
oneloop:
	VMOVUPS (SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	VMOVUPS 64(SI)(AX*4), Y10
	VMOVUPS 96(SI)(AX*4), Y11
	VFMADD231PS (R11)(AX*4), Y8, Y0
	VFMADD231PS 32(R11)(AX*4), Y9, Y1
	VFMADD231PS 64(R11)(AX*4), Y10, Y2
	VFMADD231PS 96(R11)(AX*4), Y11, Y3
	ADDQ $32, AX
	CMPQ AX, BX
	JLT oneloop
	HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(DI))
done:
	VZEROUPPER
	RET

// func axpyRowsAVX512(dst, w, mat *float32, stride int, rows *int32, nrows, n int)
// nrows > 0; n is a positive multiple of 16. AX is the byte offset of the
// dst chunk (and of the same columns in every row), R12 the row number.
TEXT ·axpyRowsAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ mat+16(FP), R8
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), R10
	MOVQ nrows+40(FP), CX
	MOVQ n+48(FP), BX
	SHLQ $2, BX
	XORQ AX, AX
big:
	MOVQ BX, DX
	SUBQ AX, DX
	CMPQ DX, $256
	JLT small
	CMPQ DX, $512
	JLT mid
	AXPYCHUNK512(LOAD8_512, AXPY8_512, STORE8_512, bigrow)
	ADDQ $512, AX
	JMP big
mid:
	// 64 to 127 floats left: 64 of them, every row in one pass (a head
	// of 64, as Mimi's), not one pass per 16.
	AXPYCHUNK512(LOAD4_512, AXPY4_512, STORE4_512, midrow)
	ADDQ $256, AX
small:
	CMPQ AX, BX
	JGE done
	AXPYCHUNK512(LOAD1_512, AXPY1_512, STORE1_512, smallrow)
	ADDQ $64, AX
	JMP small
done:
	VZEROUPPER
	RET

// func axpyRowsAVX2(dst, w, mat *float32, stride int, rows *int32, nrows, n int)
// nrows > 0; n is a positive multiple of 8.
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ mat+16(FP), R8
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), R10
	MOVQ nrows+40(FP), CX
	MOVQ n+48(FP), BX
	SHLQ $2, BX
	XORQ AX, AX
big:
	MOVQ BX, DX
	SUBQ AX, DX
	CMPQ DX, $256
	JLT small
	VMOVUPS 0(DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS 64(DI)(AX*1), Y2
	VMOVUPS 96(DI)(AX*1), Y3
	VMOVUPS 128(DI)(AX*1), Y4
	VMOVUPS 160(DI)(AX*1), Y5
	VMOVUPS 192(DI)(AX*1), Y6
	VMOVUPS 224(DI)(AX*1), Y7
	XORQ R12, R12
bigrow:
	MOVLQSX (R10)(R12*4), R11
	IMULQ R9, R11
	ADDQ R8, R11
	ADDQ AX, R11
	VBROADCASTSS (SI)(R12*4), Y8
	AXPY256(0, Y0, Y9)
	AXPY256(32, Y1, Y10)
	AXPY256(64, Y2, Y11)
	AXPY256(96, Y3, Y12)
	AXPY256(128, Y4, Y13)
	AXPY256(160, Y5, Y14)
	AXPY256(192, Y6, Y15)
	AXPY256(224, Y7, Y9)
	INCQ R12
	CMPQ R12, CX
	JLT bigrow
	VMOVUPS Y0, 0(DI)(AX*1)
	VMOVUPS Y1, 32(DI)(AX*1)
	VMOVUPS Y2, 64(DI)(AX*1)
	VMOVUPS Y3, 96(DI)(AX*1)
	VMOVUPS Y4, 128(DI)(AX*1)
	VMOVUPS Y5, 160(DI)(AX*1)
	VMOVUPS Y6, 192(DI)(AX*1)
	VMOVUPS Y7, 224(DI)(AX*1)
	ADDQ $256, AX
	JMP big
small:
	CMPQ AX, BX
	JGE done
	VMOVUPS (DI)(AX*1), Y0
	XORQ R12, R12
smallrow:
	MOVLQSX (R10)(R12*4), R11
	IMULQ R9, R11
	ADDQ R8, R11
	ADDQ AX, R11
	VBROADCASTSS (SI)(R12*4), Y8
	AXPY256(0, Y0, Y9)
	INCQ R12
	CMPQ R12, CX
	JLT smallrow
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	JMP small
done:
	VZEROUPPER
	RET

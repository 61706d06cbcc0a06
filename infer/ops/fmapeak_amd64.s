//go:build amd64 && !purego

#include "textflag.h"

// The FMA peak's chains (fmapeak_amd64.go): N independent accumulators
// from 0, each += A·B (both 1) once a round, n rounds (CX); the result is
// the first chain's lane 0 (X0), n. ONES broadcasts 1 (AX) into A; Z is
// scratch. zmm runs 24 chains, Z0-Z23 (Zen 5 needs more than 12 to keep
// both 512-bit pipes busy: 12 chains ran at 95 % of 24's); ymm 12, Y0-Y11
// (a VEX encoding, for machines without AVX-512, has 16 registers).

#define INIT12(S, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11) \
	VMOVAPS S, R0; VMOVAPS S, R1; VMOVAPS S, R2; VMOVAPS S, R3; \
	VMOVAPS S, R4; VMOVAPS S, R5; VMOVAPS S, R6; VMOVAPS S, R7; \
	VMOVAPS S, R8; VMOVAPS S, R9; VMOVAPS S, R10; VMOVAPS S, R11

#define FMA12(A, B, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11) \
	VFMADD231PS A, B, R0; VFMADD231PS A, B, R1; VFMADD231PS A, B, R2; \
	VFMADD231PS A, B, R3; VFMADD231PS A, B, R4; VFMADD231PS A, B, R5; \
	VFMADD231PS A, B, R6; VFMADD231PS A, B, R7; VFMADD231PS A, B, R8; \
	VFMADD231PS A, B, R9; VFMADD231PS A, B, R10; VFMADD231PS A, B, R11

#define PEAK(ONES, A, B, Z, INIT, FMAS) \
	MOVQ n+0(FP), CX; \
	MOVL $0x3f800000, AX; \
	ONES; \
	VMOVAPS A, B; \
	VSUBPS A, A, Z; \
	INIT(Z); \
	TESTQ CX, CX; \
	JLE done; \
loop: \
	FMAS(A, B); \
	DECQ CX; \
	JNZ loop; \
done: \
	VMOVSS X0, ret+8(FP); \
	VZEROUPPER; \
	RET

#define INIT24Z(S) \
	INIT12(S, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11); \
	INIT12(S, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)
#define FMA24Z(A, B) \
	FMA12(A, B, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11); \
	FMA12(A, B, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)
#define INIT12Y(S) INIT12(S, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11)
#define FMA12Y(A, B) FMA12(A, B, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11)

#define ONES512 VPBROADCASTD AX, Z24
#define ONES256 VMOVD AX, X12; VPBROADCASTD X12, Y12

// func fmaPeak512(n int) float32
TEXT ·fmaPeak512(SB), NOSPLIT, $0-12
	PEAK(ONES512, Z24, Z25, Z26, INIT24Z, FMA24Z)

// func fmaPeak256(n int) float32
TEXT ·fmaPeak256(SB), NOSPLIT, $0-12
	PEAK(ONES256, Y12, Y13, Y14, INIT12Y, FMA12Y)

//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Kernels of the opt-in bf16 compute mode (bf16compute.go): VDPBF16PS
// (AVX512_BF16) dot products of bf16 weights with bf16-rounded activations,
// and VCVTNEPS2BF16 for the rounding. Every kernel follows the contract in
// bf16compute.go: lane L (0-31) of a row takes, in each block of 64
// columns, the pair of elements 2L and 2L+1 (lanes 0-15 in one zmm, 16-31
// in another), and the lanes are summed in the fixed tree of reduce32.
// Only the first nl columns (nl a positive multiple of 64) are seen here;
// Go adds the tail.
//
// The Go 1.26 assembler has no mnemonics for VDPBF16PS or VCVTNEPS2BF16,
// so their register-to-register forms are emitted byte by byte (checked
// with binutils objdump -d, which decodes every DPBF16/CVTNE below as the
// intended instruction and registers, and by TestDPBF16MatchesHardware and
// TestCvtBF16MatchesHardware, which run them). Macro arguments are
// register numbers (0-31 for Z0-Z31 / Y0-Y31). EVEX layout (Intel SDM vol.
// 2, 2.7): 62 P0 P1 P2 opcode ModRM, with
//
//	P0 = R̄ X̄ B̄ R̄' 0 0 m1 m0  R, R' = bits 3, 4 of the ModRM.reg register;
//	                          X, B = bits 4, 3 of the ModRM.rm register;
//	                          mm = 10 (0F38 map)
//	P1 = W v̄3 v̄2 v̄1 v̄0 1 p1 p0  W = 0; vvvv = low 4 bits of the second source,
//	                          inverted; pp = 10 (F3 prefix)
//	P2 = z L' L b V̄' a2 a1 a0  z = 0, L'L = 10 (512 bits), b = 0 (no
//	                          broadcast), V' = bit 4 of the second source,
//	                          inverted; aaa = 000 (no mask)
//	ModRM = 11 reg rm         low 3 bits of each register
//
// VDPBF16PS zmm1, zmm2, zmm3 = EVEX.512.F3.0F38.W0 52 /r: zmm1 (reg,
// accumulator) += pairs of zmm2 (vvvv) × zmm3 (rm). Written here in Go
// operand order: DPBF16(src3, src2, dst), e.g. DPBF16(6, 4, 0) is
// 62 F2 5E 48 52 C6 = vdpbf16ps %zmm6,%zmm4,%zmm0.
#define DPBF16(s3, s2, d) \
	BYTE $0x62; \
	BYTE $(0x02 | ((~(d)&8)<<4) | ((~(s3)&16)<<2) | ((~(s3)&8)<<2) | (~(d)&16)); \
	BYTE $(0x06 | ((~(s2)&15)<<3)); \
	BYTE $(0x40 | ((~(s2)&16)>>1)); \
	BYTE $0x52; \
	BYTE $(0xC0 | (((d)&7)<<3) | ((s3)&7))

// VCVTNEPS2BF16 ymm1, zmm2 = EVEX.512.F3.0F38.W0 72 /r (vvvv unused =
// 1111, V' = 1): ymm1 (reg) = zmm2 (rm) rounded to bf16. CVTNE(src, dst),
// e.g. CVTNE(0, 1) is 62 F2 7E 48 72 C8 = vcvtneps2bf16 %zmm0,%ymm1.
#define CVTNE(s, d) \
	BYTE $0x62; \
	BYTE $(0x02 | ((~(d)&8)<<4) | ((~(s)&16)<<2) | ((~(s)&8)<<2) | (~(d)&16)); \
	BYTE $0x7E; \
	BYTE $0x48; \
	BYTE $0x72; \
	BYTE $(0xC0 | (((d)&7)<<3) | ((s)&7))

// The mv kernel streams one row at a time and prefetches PFDIST bytes
// ahead (two cache lines per 64 columns).
#define PFDIST 4096

// ---- matrix-matrix register tile: 3 weight rows × 4 inputs ----

// The accumulator halves of output (r, t) are Z(8r+2t) (lanes 0-15) and
// Z(8r+2t+1) (16-31); out[4t+r] (ZHSUM12's transposed sums). Weights in
// Z24-Z26, inputs through Z27.
// OFF is the byte offset of the half (0 or 64) in both weights and inputs.
#define MMDP_W3(OFF) \
	VMOVUPS OFF(SI)(AX*2), Z24; \
	VMOVUPS OFF(R9)(AX*2), Z25; \
	VMOVUPS OFF(R10)(AX*2), Z26
// MMDP_X: input P's half at OFF times the 3 rows, into A (row 0), B, C.
#define MMDP_X(P, OFF, A, B, C) \
	VMOVUPS OFF(P)(AX*2), Z27; \
	DPBF16(27, 24, A); \
	DPBF16(27, 25, B); \
	DPBF16(27, 26, C)
#define MMDP_HALF2(OFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3) \
	MMDP_W3(OFF); \
	MMDP_X(BX, OFF, A0, B0, C0); \
	MMDP_X(CX, OFF, A1, B1, C1)
#define MMDP_HALF3(OFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3) \
	MMDP_HALF2(OFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3); \
	MMDP_X(DX, OFF, A2, B2, C2)
#define MMDP_HALF(OFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3) \
	MMDP_HALF3(OFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3); \
	MMDP_X(DI, OFF, A3, B3, C3)

// MMDP_STEP(H): 64 columns of the tile with H = MMDP_HALF (4 inputs),
// MMDP_HALF3 or MMDP_HALF2 (the tiles of 3 and 2 inputs keep the 3 × 4
// tile's registers and sums' places; those of the missing inputs stay
// zero).
#define MMDP_STEP(H) \
	H(0, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22); \
	H(64, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23)

// func mmDPBF16(w *uint16, stride int, xs *[4]*uint16, nl int, out *[16]float32, pf *uint16, acc *float32, flags int)
// One column block of nl columns (a multiple of 64) of the 3 × 4 tile
// (mmDPBF16x3, mmDPBF16x2: of 3 or 2 inputs, xs's first).
// flags&1: the accumulators start from acc's 24 × 16 floats (the tile's
// state after the previous blocks), else from zero; flags&2: this is the
// last block, the sums go to out (ZHSUM12), else the accumulators go back
// to acc. With pf ≠ nil each step of 64 columns also prefetches to L2 the
// same 128 bytes of the 3 rows from pf on (the next row tile's block).
#define MMDP_KERNEL(H) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), R8; \
	SHLQ $1, R8; \
	LEAQ (SI)(R8*1), R9; \
	LEAQ (R9)(R8*1), R10; \
	MOVQ xs+16(FP), AX; \
	MOVQ 0(AX), BX; \
	MOVQ 8(AX), CX; \
	MOVQ 16(AX), DX; \
	MOVQ 24(AX), DI; \
	MOVQ nl+24(FP), R12; \
	MOVQ acc+48(FP), R11; \
	TESTQ $1, flags+56(FP); \
	JNZ load; \
	ZZERO24; \
	JMP start; \
load: \
	ZLOAD24(R11); \
start: \
	XORQ AX, AX; \
	MOVQ pf+40(FP), R13; \
	CMPQ R13, $0; \
	JNE loopPF; \
loop: \
	MMDP_STEP(H); \
	ADDQ $64, AX; \
	CMPQ AX, R12; \
	JLT loop; \
	JMP done; \
loopPF: \
	LEAQ (R13)(AX*2), R11; \
	PREFETCHT1 (R11); \
	PREFETCHT1 64(R11); \
	ADDQ R8, R11; \
	PREFETCHT1 (R11); \
	PREFETCHT1 64(R11); \
	ADDQ R8, R11; \
	PREFETCHT1 (R11); \
	PREFETCHT1 64(R11); \
	MMDP_STEP(H); \
	ADDQ $64, AX; \
	CMPQ AX, R12; \
	JLT loopPF; \
done: \
	TESTQ $2, flags+56(FP); \
	JNZ reduce; \
	MOVQ acc+48(FP), R11; \
	ZSTORE24(R11); \
	VZEROUPPER; \
	RET; \
reduce: \
	MOVQ out+32(FP), R11; \
	ZHSUM12; \
	VZEROUPPER; \
	RET

// func mvDPBF16(w *uint16, stride, rows int, x *uint16, nl int, dst *float32)
TEXT ·mvDPBF16(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	SHLQ $1, R8
	MOVQ rows+16(FP), CX
	MOVQ x+24(FP), DX
	MOVQ nl+32(FP), BX
	MOVQ dst+40(FP), DI

row:
	LEAQ PFDIST(SI), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ AX, AX

loop:
	PREFETCHT0 (R12)(AX*2)
	PREFETCHT0 64(R12)(AX*2)
	VMOVUPS (SI)(AX*2), Z4
	VMOVUPS 64(SI)(AX*2), Z5
	VMOVUPS (DX)(AX*2), Z6
	VMOVUPS 64(DX)(AX*2), Z7
	DPBF16(6, 4, 0)
	DPBF16(7, 5, 1)
	ADDQ $64, AX
	CMPQ AX, BX
	JLT loop
	HSUM32_512(Z0, Z1, X0, 0(DI))
	ADDQ R8, SI
	ADDQ $4, DI
	DECQ CX
	JNZ row
	VZEROUPPER
	RET

// The twelve outputs are folded together (ZHSUM12, the tree of
// HSUM32_512 for each): output (r, t) at out[4t + r].
TEXT ·mmDPBF16(SB), NOSPLIT, $0-64
	MMDP_KERNEL(MMDP_HALF)

TEXT ·mmDPBF16x3(SB), NOSPLIT, $0-64
	MMDP_KERNEL(MMDP_HALF3)

TEXT ·mmDPBF16x2(SB), NOSPLIT, $0-64
	MMDP_KERNEL(MMDP_HALF2)

// func cvtBF16AVX512(dst *uint16, src *float32, n int)
// n is a positive multiple of 16.
TEXT ·cvtBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), BX
	XORQ AX, AX

cvtloop:
	VMOVUPS (SI)(AX*4), Z0
	CVTNE(0, 1)
	VMOVDQU Y1, (DI)(AX*2)
	ADDQ $16, AX
	CMPQ AX, BX
	JLT cvtloop
	VZEROUPPER
	RET

// func dpbf16Lanes(acc *[16]float32, a, b *[32]uint16)
// One VDPBF16PS on 16 lanes (tests: the instruction's exact semantics).
// Registers 9, 17 and 25 exercise every EVEX register-extension bit.
TEXT ·dpbf16Lanes(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	VMOVUPS (DI), Z9
	VMOVUPS (SI), Z17
	VMOVUPS (DX), Z25
	DPBF16(25, 17, 9)
	VMOVUPS Z9, (DI)
	VZEROUPPER
	RET

// func cvtBF16Hi(dst *[16]uint16, src *[16]float32)
// VCVTNEPS2BF16 from and to high registers (tests: encoding).
TEXT ·cvtBF16Hi(SB), NOSPLIT, $0-16
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	VMOVUPS (SI), Z20
	CVTNE(20, 29)
	VMOVDQU16 Y29, (DI)
	VZEROUPPER
	RET

// func dpbf16Peak512(n int) float32
// The VDPBF16PS peak's chains (BenchmarkFMAPeak's "dpbf16"): 24
// independent zmm accumulators Z0-Z23 from 0 (as fmaPeak512's), each +=
// the dot of two vectors of bf16 ones (2 a lane) once a round, n rounds;
// the result is Z0's lane 0, 2n.
TEXT ·dpbf16Peak512(SB), NOSPLIT, $0-12
	MOVQ n+0(FP), CX
	MOVL $0x3f803f80, AX
	VPBROADCASTD AX, Z24
	VPXORD Z0, Z0, Z0
	VMOVAPS Z0, Z1; VMOVAPS Z0, Z2; VMOVAPS Z0, Z3; VMOVAPS Z0, Z4; VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6; VMOVAPS Z0, Z7; VMOVAPS Z0, Z8; VMOVAPS Z0, Z9; VMOVAPS Z0, Z10; VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12; VMOVAPS Z0, Z13; VMOVAPS Z0, Z14; VMOVAPS Z0, Z15; VMOVAPS Z0, Z16; VMOVAPS Z0, Z17
	VMOVAPS Z0, Z18; VMOVAPS Z0, Z19; VMOVAPS Z0, Z20; VMOVAPS Z0, Z21; VMOVAPS Z0, Z22; VMOVAPS Z0, Z23
	TESTQ CX, CX
	JLE dpdone
dploop:
	DPBF16(24, 24, 0); DPBF16(24, 24, 1); DPBF16(24, 24, 2); DPBF16(24, 24, 3)
	DPBF16(24, 24, 4); DPBF16(24, 24, 5); DPBF16(24, 24, 6); DPBF16(24, 24, 7)
	DPBF16(24, 24, 8); DPBF16(24, 24, 9); DPBF16(24, 24, 10); DPBF16(24, 24, 11)
	DPBF16(24, 24, 12); DPBF16(24, 24, 13); DPBF16(24, 24, 14); DPBF16(24, 24, 15)
	DPBF16(24, 24, 16); DPBF16(24, 24, 17); DPBF16(24, 24, 18); DPBF16(24, 24, 19)
	DPBF16(24, 24, 20); DPBF16(24, 24, 21); DPBF16(24, 24, 22); DPBF16(24, 24, 23)
	DECQ CX
	JNZ dploop
dpdone:
	VMOVSS X0, ret+8(FP)
	VZEROUPPER
	RET

//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Column-blocked register tiles of the matrix-matrix product (mmtile_amd64.go
// drives them): R weight rows × T inputs over n columns (a positive multiple
// of 32; for Q4_K the block starts on a super-block), continuing from and
// returning to an accumulator state in memory, so that a product can run
// its columns in blocks whose inputs stay in L1 while many row tiles pass
// over them. Every output keeps the 32-lane contract of matvec_portable.go:
// element j goes to lane j%32 with one FMA, j ascending across the blocks,
// and the last block sums the lanes in the fixed tree (HSUM32_*; the 3×4
// tiles fold all twelve outputs at once in the same tree, ZTREE12), so
// each output has the bits of the matrix-vector product. The bf16 tiles hold
// the lanes in an even/odd order and take their inputs in it (see "the
// even/odd layout" below), with the same bits.
//
// Quantized weights are computed in registers inside the tile, as the mv
// kernels of quant_amd64.s compute them — Q8_0: d·q (VCVTPH2PS, VPMOVSXBD,
// VCVTDQ2PS, VMULPS: exact conversions, one rounding); Q4_K: the 16 values
// (d·sc)·q − dmin·m of a sub-block as a table (one VFMSUB per table entry,
// the product exact), each nibble looked up with VPERMPS (AVX-512), or
// computed per nibble with one VFMSUB213PS (AVX2) — so a quantized tile has
// the bits of the quantized matrix-vector product without a float32 copy of
// the rows.
//
// func mmt…(w *byte, stride int, xs *[4]*float32, n int, acc *float32, flags, tiles int)
// w: the first row's first weight of the block; stride: a row's bytes; xs:
// the inputs' first elements of the block; acc: the state, register k of
// the tile at acc + k·(register bytes). flags: 1 = continue from acc (else
// start at +0), 2 = last block: write the sums of output i (row r, input t
// → i = r·T + t) to acc[i] instead of the state (the AVX-512 3×4 tiles:
// output (r, t) to acc[4t + r], acc[4t + 3] scratch), 4 = prefetch (to L2) the
// same columns of the next R rows, which the next row tile reads. tiles:
// the row tiles run one after another, R rows apart, their states 1536
// (AVX-512) or 384 (AVX2) bytes apart. The AVX-512 bf16 tiles take one
// more argument, pf *byte, and prefetch through it instead of flag 4 (the
// AVX2 one keeps flag 4, which measured better): flag 8 = three rows'
// line per 32 columns from pf on (pf, pf + stride, pf + 2·stride); each
// row tile moves pf on by three rows (see MTLOOPN).
//
// AVX-512 tiles: 3 rows × 4, 3 or 2 inputs; output i's lanes 0-15 and 16-31
// in Z(2i), Z(2i+1); row pointers SI, R9, R10 (advanced through the block),
// weights through Z24-Z26, inputs through Z27 (x pointers BX, CX, DX, DI),
// Q8_0 scales or Q4_K tables in Z28-Z30 (bf16: the odd columns' mask in
// Z28, the rows' raw 64 bytes in Z29-Z31), the Q4_K nibble values 0…15 in
// Z31. AVX2 tiles (f16, Q8_0, Q4_K,
// and bf16 and f32 products of 1 or 2 inputs; the others run "2 rows × 3
// inputs in two passes" below): 1 row × 3 inputs; input t's lane groups 8q…8q+7 in Y(4t+q) (bf16: the even/odd groups);
// weights through Y12 (bf16: loaded into Y13, the mask in Y14). AX is
// the column, R12 n, R8 the stride, R13 R·stride (the next row tile), R11
// the state pointer, R14 scratch (bf16: the prefetch pointer in the loop).

#define FL_LOAD 1
#define FL_FINAL 2
#define FL_PF 4
#define FL_PFN 8
#define FL_OUT 16

// ZLOAD18 / ZSTORE18 / ZZERO18: a 3 × 3 tile's state, Z0-Z17.
#define ZLOAD18(P) \
	ZLOAD12(P); \
	VMOVUPS 768(P), Z12; \
	VMOVUPS 832(P), Z13; \
	VMOVUPS 896(P), Z14; \
	VMOVUPS 960(P), Z15; \
	VMOVUPS 1024(P), Z16; \
	VMOVUPS 1088(P), Z17
#define ZSTORE18(P) \
	ZSTORE12(P); \
	VMOVUPS Z12, 768(P); \
	VMOVUPS Z13, 832(P); \
	VMOVUPS Z14, 896(P); \
	VMOVUPS Z15, 960(P); \
	VMOVUPS Z16, 1024(P); \
	VMOVUPS Z17, 1088(P)
#define ZZERO18 \
	ZZERO12; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17

#define ZHSUM6 \
	HSUM32_512(Z0, Z1, X0, 0(R11)); \
	HSUM32_512(Z2, Z3, X2, 4(R11)); \
	HSUM32_512(Z4, Z5, X4, 8(R11)); \
	HSUM32_512(Z6, Z7, X6, 12(R11)); \
	HSUM32_512(Z8, Z9, X8, 16(R11)); \
	HSUM32_512(Z10, Z11, X10, 20(R11))

// ZHSUM9: a 3×3 tile's outputs (ZHSUM6's six, then three more).
#define ZHSUM9 \
	ZHSUM6; \
	HSUM32_512(Z12, Z13, X12, 24(R11)); \
	HSUM32_512(Z14, Z15, X14, 28(R11)); \
	HSUM32_512(Z16, Z17, X16, 32(R11))

#define YLOAD12(P) \
	VMOVUPS 0(P), Y0; \
	VMOVUPS 32(P), Y1; \
	VMOVUPS 64(P), Y2; \
	VMOVUPS 96(P), Y3; \
	VMOVUPS 128(P), Y4; \
	VMOVUPS 160(P), Y5; \
	VMOVUPS 192(P), Y6; \
	VMOVUPS 224(P), Y7; \
	VMOVUPS 256(P), Y8; \
	VMOVUPS 288(P), Y9; \
	VMOVUPS 320(P), Y10; \
	VMOVUPS 352(P), Y11

#define YSTORE12(P) \
	VMOVUPS Y0, 0(P); \
	VMOVUPS Y1, 32(P); \
	VMOVUPS Y2, 64(P); \
	VMOVUPS Y3, 96(P); \
	VMOVUPS Y4, 128(P); \
	VMOVUPS Y5, 160(P); \
	VMOVUPS Y6, 192(P); \
	VMOVUPS Y7, 224(P); \
	VMOVUPS Y8, 256(P); \
	VMOVUPS Y9, 288(P); \
	VMOVUPS Y10, 320(P); \
	VMOVUPS Y11, 352(P)

#define YZERO12 \
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
	VXORPS Y11, Y11, Y11

#define YHSUM3 \
	HSUM32_256(Y0, Y1, Y2, Y3, X0, 0(R11)); \
	HSUM32_256(Y4, Y5, Y6, Y7, X4, 4(R11)); \
	HSUM32_256(Y8, Y9, Y10, Y11, X8, 8(R11))

// ---- the even/odd layout of the bf16 tiles ----
//
// A bf16 tile reads each 32-column group of a row as 16 dwords: shifted
// left by 16 they are the group's even columns as float32, masked with
// 0xFFFF0000 its odd columns, two ALU operations per 32 weights where
// widening each half costs four (the widening is a shuffle, which shares
// the FMA ports on Intel cores). Its inputs come in the matching order
// (mmtEvenOdd: per group the 16 even, then the 16 odd elements), so
// contract lane 2k of output i is lane k of its even register, lane 2k+1
// lane k of its odd one: each lane still gets its columns in ascending
// order, one FMA each. The fixed tree of HSUM32_* folds lanes 16, 8, 4, 2
// apart, which pairs even lanes with even lanes and odd with odd, then
// lane 0 with lane 1: on this layout it is the same tree of halves within
// each register (HSUM16TO, HSUM8TO of hsum_amd64.h), then the even sum
// plus the odd one, so every output keeps its bits.

// HSUMEO512: output of even lanes ZE, odd lanes ZO → DST.
#define HSUMEO512(ZE, ZO, XE, XO, DST) \
	HSUM16TO(ZE, XE); \
	HSUM16TO(ZO, XO); \
	VADDSS XO, XE, XE; \
	VMOVSS XE, DST

#define ZHSUM6EO \
	HSUMEO512(Z0, Z1, X0, X1, 0(R11)); \
	HSUMEO512(Z2, Z3, X2, X3, 4(R11)); \
	HSUMEO512(Z4, Z5, X4, X5, 8(R11)); \
	HSUMEO512(Z6, Z7, X6, X7, 12(R11)); \
	HSUMEO512(Z8, Z9, X8, X9, 16(R11)); \
	HSUMEO512(Z10, Z11, X10, X11, 20(R11))

#define ZHSUM9EO \
	ZHSUM6EO; \
	HSUMEO512(Z12, Z13, X12, X13, 24(R11)); \
	HSUMEO512(Z14, Z15, X14, X15, 28(R11)); \
	HSUMEO512(Z16, Z17, X16, X17, 32(R11))

// ZHSUM12EO: the bf16 3×4 tile's 12 outputs (even lanes in Z(2i), odd
// in Z(2i+1)): the transposed tree (ZTREE12) of the even registers and of
// the odd ones, then even + odd, as HSUMEO512 adds them.
#define ZHSUM12EO \
	ZTREE12A(Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22, Y2, Y6, Y10, Y14, Y18, Y22); \
	ZTREE12A(Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17, Z19, Z21, Z23, Y3, Y7, Y11, Y15, Y19, Y23); \
	ZTREE12B(Z0, Z8, Z16); \
	ZTREE12B(Z1, Z9, Z17); \
	VADDPS Z1, Z0, Z0; \
	VMOVUPS Z0, (R11)

// OUT3(LANE, OFF) stores output lanes 4·LANE … 4·LANE+2 of Z0 (input
// LANE's three rows) through the pointer at OFF(R12), then moves that
// pointer on by the three rows (K1 = the three lanes' mask).
#define OUT3(LANE, OFF) \
	VEXTRACTF32X4 $LANE, Z0, X24; \
	MOVQ OFF(R12), R14; \
	VMOVUPS X24, K1, (R14); \
	ADDQ $12, OFF(R12)

// OUTSTORE12(OUT): with FL_OUT, a 3 × 4 tile's twelve sums (Z0, output
// (r, t) in lane 4t + r) stored in place: input t's three rows through
// the address at 8t(OUT) (the out argument), so that no scatter copies
// them from the state (R14, R12: reloaded at the next row tile).
#define OUTSTORE12(OUT) \
	TESTQ $FL_OUT, R14; \
	JZ outdone; \
	MOVQ OUT, R12; \
	OUT12; \
outdone:

// OUT12: the twelve sums of Z0 (as OUTSTORE12) through the four addresses
// at R12, each moved on by the three rows (R14, K1: scratch).
#define OUT12 \
	MOVL $7, R14; \
	KMOVW R14, K1; \
	MOVQ 0(R12), R14; \
	VMOVUPS X0, K1, (R14); \
	ADDQ $12, 0(R12); \
	OUT3(1, 8); \
	OUT3(2, 16); \
	OUT3(3, 24)

// R2OUT: with FL_OUT, the 2 × 3 tile's six sums (just written to acc[i],
// i = 3r + t, at R11) copied to their places: input t's two rows through
// the address at 8t(out+56(FP)), moved on by the two rows (AX, DI, R12,
// R14: free here, reloaded at the next row tile).
#define R2OUT \
	TESTQ $FL_OUT, R14; \
	JZ outdone; \
	MOVQ out+56(FP), R12; \
	R2OUT1(0, 0); \
	R2OUT1(8, 4); \
	R2OUT1(16, 8); \
outdone:

// R2OUT2 is R2OUT for the 2 × 2 tile (its sums in the 2 × 3 tile's
// places, inputs 0 and 1).
#define R2OUT2 \
	TESTQ $FL_OUT, R14; \
	JZ outdone; \
	MOVQ out+56(FP), R12; \
	R2OUT1(0, 0); \
	R2OUT1(8, 4); \
outdone:

// R2OUT1(P, A): the two rows of the input whose address is at P(R12),
// from acc[A/4] and acc[A/4 + 3].
#define R2OUT1(P, A) \
	MOVQ P(R12), AX; \
	MOVL A(R11), DI; \
	MOVL DI, 0(AX); \
	MOVL (A+12)(R11), DI; \
	MOVL DI, 4(AX); \
	ADDQ $8, P(R12)

// ZHSUM12EO_OUT and ZHSUM12_OUT are ZHSUM12EO and ZHSUM12 with
// OUTSTORE12 (out after pf in the bf16 tile's arguments, after tiles in
// the others').
#define ZHSUM12EO_OUT ZHSUM12EO; OUTSTORE12(out+64(FP))
#define ZHSUM12_OUT ZHSUM12; OUTSTORE12(out+56(FP))

// HSUMEO256: the AVX2 tile's output of even lanes 0-14 in YE0, 16-30 in
// YE1, odd lanes 1-15 in YO0, 17-31 in YO1 → DST (the first fold, 16
// apart, is YE0 + YE1 and YO0 + YO1).
#define HSUMEO256(YE0, YE1, YO0, YO1, XE, XO, DST) \
	VADDPS YE1, YE0, YE0; \
	VADDPS YO1, YO0, YO0; \
	HSUMEO8(YE0, XE, YO0, XO, DST)

// HSUMEO8: the even lanes' 8 partial sums in YE, the odd ones' in YO (each
// folded 16 apart) → their folds 4, 2, 1 apart, then even + odd → DST.
#define HSUMEO8(YE, XE, YO, XO, DST) \
	HSUM8TO(YE, XE); \
	HSUM8TO(YO, XO); \
	VADDSS XO, XE, XE; \
	VMOVSS XE, DST

#define YHSUM3EO \
	HSUMEO256(Y0, Y1, Y2, Y3, X0, X2, 0(R11)); \
	HSUMEO256(Y4, Y5, Y6, Y7, X4, X6, 4(R11)); \
	HSUMEO256(Y8, Y9, Y10, Y11, X8, X10, 8(R11))

// 0xFFFF0000: the odd columns' mask.
DATA mmtHiMask<>+0(SB)/4, $0xffff0000
GLOBL mmtHiMask<>(SB), RODATA|NOPTR, $4

// ---- arguments and the state ----

// MTARGS loads the arguments; the tile loop starts at "tile" with the
// row pointers of the tile at w (ROWS3: SI, R9, R10; ROWS1: SI).
#define MTARGS(XN, PFOFF, ROWS) \
	MOVQ xs+16(FP), AX; \
	XN; \
	MOVQ stride+8(FP), R8; \
	PFOFF; \
tile: \
	MOVQ w+0(FP), SI; \
	ROWS; \
	MOVQ n+24(FP), R12; \
	MOVQ acc+32(FP), R11; \
	MOVQ flags+40(FP), R14; \
	XORQ AX, AX

#define PFOFF3 LEAQ (R8)(R8*2), R13
#define PFOFF1 MOVQ R8, R13
#define ROWS3 LEAQ (SI)(R8*1), R9; LEAQ (R9)(R8*1), R10
#define ROWS1 

#define XP4 MOVQ 0(AX), BX; MOVQ 8(AX), CX; MOVQ 16(AX), DX; MOVQ 24(AX), DI
#define XP3 MOVQ 0(AX), BX; MOVQ 8(AX), CX; MOVQ 16(AX), DX
#define XP2 MOVQ 0(AX), BX; MOVQ 8(AX), CX

// MTSTART loads or zeroes the state (R14 = flags).
#define MTSTART(LOAD, ZERO) \
	TESTQ $FL_LOAD, R14; \
	JZ zero; \
	LOAD(R11); \
	JMP ready; \
zero: \
	ZERO; \
ready:

// MTEND stores the state or, on the last block, the sums, and moves on
// to the next row tile (R13 = R·stride) and its state (ACCB bytes on);
// MTENDP also runs PFADV there (the bf16 tiles' prefetch pointer).
#define MTEND(STORE, HSUMS, ACCB) MTENDP(STORE, HSUMS, ACCB, NOPFADV)
#define NOPFADV
#define MTENDP(STORE, HSUMS, ACCB, PFADV) \
done: \
	MOVQ acc+32(FP), R11; \
	MOVQ flags+40(FP), R14; \
	TESTQ $FL_FINAL, R14; \
	JNZ final; \
	STORE(R11); \
	JMP next; \
final: \
	HSUMS; \
next: \
	PFADV; \
	MOVQ w+0(FP), SI; \
	ADDQ R13, SI; \
	MOVQ SI, w+0(FP); \
	ADDQ ACCB, R11; \
	MOVQ R11, acc+32(FP); \
	DECQ tiles+48(FP); \
	JNZ tile; \
	VZEROUPPER; \
	RET

// ---- AVX-512: the FMAs of one 16-lane half of 32 columns, weights of
// the 3 rows in Z24-Z26 ----

// MT1FMA: input P's 16 lanes at XOFF times the 3 rows' weights, into A
// (row 0), B and C.
#define MT1FMA(P, XOFF, A, B, C) \
	VMOVUPS XOFF(P)(AX*4), Z27; \
	VFMADD231PS Z27, Z24, A; \
	VFMADD231PS Z27, Z25, B; \
	VFMADD231PS Z27, Z26, C

#define MT2FMA(XOFF, A0, A1, B0, B1, C0, C1) \
	MT1FMA(BX, XOFF, A0, B0, C0); \
	MT1FMA(CX, XOFF, A1, B1, C1)
#define MT3FMA(XOFF, A0, A1, A2, B0, B1, B2, C0, C1, C2) \
	MT2FMA(XOFF, A0, A1, B0, B1, C0, C1); \
	MT1FMA(DX, XOFF, A2, B2, C2)
#define MT4FMA(XOFF, A0, A1, A2, A3, B0, B1, B2, B3, C0, C1, C2, C3) \
	MT3FMA(XOFF, A0, A1, A2, B0, B1, B2, C0, C1, C2); \
	MT1FMA(DI, XOFF, A3, B3, C3)

// Output (r, t) of a 3×4 tile is i = 4r+t, of a 3×3 tile i = 3r+t, of a
// 3×2 tile i = 2r+t.
#define MT4FMA_LO(XOFF) MT4FMA(XOFF, Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22)
#define MT4FMA_HI(XOFF) MT4FMA(XOFF, Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17, Z19, Z21, Z23)
#define MT3FMA_LO(XOFF) MT3FMA(XOFF, Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16)
#define MT3FMA_HI(XOFF) MT3FMA(XOFF, Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17)
#define MT2FMA_LO(XOFF) MT2FMA(XOFF, Z0, Z2, Z4, Z6, Z8, Z10)
#define MT2FMA_HI(XOFF) MT2FMA(XOFF, Z1, Z3, Z5, Z7, Z9, Z11)

// ---- AVX-512 weights of the 3 rows → Z24-Z26 ----

// bf16 (the even/odd layout): the group's even columns, then its odd
// ones (Z28 = the mask). Each row's 64 bytes are loaded once (into
// Z29-Z31, which the bf16 tiles do not use otherwise) and widened twice
// from the register: a checkpoint's rows are seldom 64-byte aligned (a
// safetensors file's data starts where its header ends), and a load that
// crosses a cache line costs two.
#define W3_BF16E \
	VMOVDQU32 (SI), Z29; \
	VMOVDQU32 (R9), Z30; \
	VMOVDQU32 (R10), Z31; \
	VPSLLD $16, Z29, Z24; \
	VPSLLD $16, Z30, Z25; \
	VPSLLD $16, Z31, Z26
#define W3_BF16O \
	VPANDD Z29, Z28, Z24; \
	VPANDD Z30, Z28, Z25; \
	VPANDD Z31, Z28, Z26
#define W3_F16(OFF) \
	VCVTPH2PS OFF(SI), Z24; \
	VCVTPH2PS OFF(R9), Z25; \
	VCVTPH2PS OFF(R10), Z26
#define W3_F32(OFF) \
	VMOVUPS OFF(SI), Z24; \
	VMOVUPS OFF(R9), Z25; \
	VMOVUPS OFF(R10), Z26

// Q8_0: the blocks' scales d → Z28-Z30 (VCVTPH2PS reads the block's first
// 32 bytes; element 0 is d), then the weights of a half (OFF 2 or 18).
#define Q8SC3 \
	VCVTPH2PS (SI), Z28; \
	VCVTPH2PS (R9), Z29; \
	VCVTPH2PS (R10), Z30; \
	VBROADCASTSS X28, Z28; \
	VBROADCASTSS X29, Z29; \
	VBROADCASTSS X30, Z30
#define W3_Q8(OFF) \
	VPMOVSXBD OFF(SI), Z24; \
	VPMOVSXBD OFF(R9), Z25; \
	VPMOVSXBD OFF(R10), Z26; \
	VCVTDQ2PS Z24, Z24; \
	VCVTDQ2PS Z25, Z25; \
	VCVTDQ2PS Z26, Z26; \
	VMULPS Z28, Z24, Z24; \
	VMULPS Z29, Z25, Z25; \
	VMULPS Z30, Z26, Z26

#define PF3_1 \
	PREFETCHT1 (SI)(R13*1); \
	PREFETCHT1 (R9)(R13*1); \
	PREFETCHT1 (R10)(R13*1)
#define PF3_2 \
	PF3_1; \
	PREFETCHT1 64(SI)(R13*1); \
	PREFETCHT1 64(R9)(R13*1); \
	PREFETCHT1 64(R10)(R13*1)
#define ADV3(STEP) ADDQ STEP, SI; ADDQ STEP, R9; ADDQ STEP, R10

// MTITER computes one 32-column group (BODY), moves the row pointers on
// by STEP and compares the column with n (the caller's JLT loops).
#define MTITER(BODY, STEP) \
	BODY; \
	ADV3(STEP); \
	ADDQ $32, AX; \
	CMPQ AX, R12

// The loop over the block's 32-column groups, with and without the
// prefetch: BODY computes one group, STEP is its bytes per row.
#define MTLOOP(PF, BODY, STEP) \
	TESTQ $FL_PF, R14; \
	JNZ loopPF; \
loop: \
	MTITER(BODY, STEP); \
	JLT loop; \
	JMP done; \
loopPF: \
	PF; \
	MTITER(BODY, STEP); \
	JLT loopPF

// The bf16 tiles' loop: with FL_PFN it prefetches (to L2), through R14 =
// pf, three rows' 64 bytes (pf, pf + stride, pf + 2·stride) per 32-column
// group: the block the driver runs next, in the first input tiles' passes
// (mmtNextShare), so that the weights come from memory while the tiles
// compute rather than in the next block's first pass.
#define MTLOOPN(BODY, STEP) \
	TESTQ $FL_PFN, R14; \
	JNZ pfn; \
loop: \
	MTITER(BODY, STEP); \
	JLT loop; \
	JMP done; \
pfn: \
	MOVQ pf+56(FP), R14; \
loopPF3: \
	PREFETCHT1 (R14); \
	PREFETCHT1 (R14)(R8*1); \
	PREFETCHT1 (R14)(R8*2); \
	ADDQ STEP, R14; \
	MTITER(BODY, STEP); \
	JLT loopPF3

// PFADV3 moves pf on by the three rows a row tile prefetched (R13 =
// 3·stride).
#define PFADV3 ADDQ R13, pf+56(FP)

#define MT512N(XN, LOAD, ZERO, STORE, HSUMS, BODY) \
	MTARGS(XN, PFOFF3, ROWS3); \
	MTSTART(LOAD, ZERO); \
	MTLOOPN(BODY, $64); \
	MTENDP(STORE, HSUMS, $1536, PFADV3)

#define BODY4(W, OFF1) W(0); MT4FMA_LO(0); W(OFF1); MT4FMA_HI(64)
#define BODY3X(W, OFF1) W(0); MT3FMA_LO(0); W(OFF1); MT3FMA_HI(64)
#define BODY2(W, OFF1) W(0); MT2FMA_LO(0); W(OFF1); MT2FMA_HI(64)
#define BODY4_BF16 W3_BF16E; MT4FMA_LO(0); W3_BF16O; MT4FMA_HI(64)
#define BODY3X_BF16 W3_BF16E; MT3FMA_LO(0); W3_BF16O; MT3FMA_HI(64)
#define BODY2_BF16 W3_BF16E; MT2FMA_LO(0); W3_BF16O; MT2FMA_HI(64)
#define BODY4_Q8 Q8SC3; W3_Q8(2); MT4FMA_LO(0); W3_Q8(18); MT4FMA_HI(64)
#define BODY3X_Q8 Q8SC3; W3_Q8(2); MT3FMA_LO(0); W3_Q8(18); MT3FMA_HI(64)
#define BODY2_Q8 Q8SC3; W3_Q8(2); MT2FMA_LO(0); W3_Q8(18); MT2FMA_HI(64)

#define MT512(XN, LOAD, ZERO, STORE, HSUMS, PF, BODY, STEP) \
	MTARGS(XN, PFOFF3, ROWS3); \
	MTSTART(LOAD, ZERO); \
	MTLOOP(PF, BODY, STEP); \
	MTEND(STORE, HSUMS, $1536)

// ---- AVX-512 Q4_K ----

// Q4KSC512: the super-block at P's 8 scales d·sc → S(SP), mins dmin·m →
// M(SP) (64 bytes each, lanes 8-15 unused): the unpacking of
// quant_amd64.s' Q4K_SCALES_TO with other scratch registers (R11, R12,
// R13, R14, Z24-Z26; d and dmin from VCVTPH2PS of the header's first 32 and
// 2..33rd bytes).
#define Q4KSC512(P, S, M) \
	VCVTPH2PS 0(P), Z24; \
	VCVTPH2PS 2(P), Z25; \
	VBROADCASTSS X24, Z24; \
	VBROADCASTSS X25, Z25; \
	MOVL 4(P), R11; \
	MOVL 12(P), R12; \
	MOVL R11, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	MOVL R12, R14; \
	ANDL $0x0f0f0f0f, R14; \
	ORL R14, R13; \
	ANDL $0x3f3f3f3f, R11; \
	SHLQ $32, R13; \
	ORQ R13, R11; \
	VMOVQ R11, X26; \
	VPMOVZXBD X26, Z26; \
	VCVTDQ2PS Z26, Z26; \
	VMULPS Z24, Z26, Z26; \
	VMOVUPS Z26, S(SP); \
	MOVL 8(P), R11; \
	MOVL R11, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	SHRL $4, R12; \
	ANDL $0x0f0f0f0f, R12; \
	ORL R12, R13; \
	ANDL $0x3f3f3f3f, R11; \
	SHLQ $32, R13; \
	ORQ R13, R11; \
	VMOVQ R11, X26; \
	VPMOVZXBD X26, Z26; \
	VCVTDQ2PS Z26, Z26; \
	VMULPS Z25, Z26, Z26; \
	VMOVUPS Z26, M(SP)

// The tables of sub-block R11 of the 3 rows: Z28-Z30[q] = (d·sc)·q − dmin·m.
#define Q4KTAB3 \
	VBROADCASTSS 0(SP)(R11*4), Z28; \
	VBROADCASTSS 64(SP)(R11*4), Z24; \
	VFMSUB213PS Z24, Z31, Z28; \
	VBROADCASTSS 128(SP)(R11*4), Z29; \
	VBROADCASTSS 192(SP)(R11*4), Z25; \
	VFMSUB213PS Z25, Z31, Z29; \
	VBROADCASTSS 256(SP)(R11*4), Z30; \
	VBROADCASTSS 320(SP)(R11*4), Z26; \
	VFMSUB213PS Z26, Z31, Z30

// The weights of a half of sub-block R11 (its 16 bytes at OFF(row)(R14),
// R14 = the pair's 32-byte chunk − 16): the low nibbles (VPERMPS reads the
// index's low 4 bits) or the high ones.
#define Q4KW3_LO(OFF) \
	VPMOVZXBD OFF(SI)(R14*1), Z24; \
	VPMOVZXBD OFF(R9)(R14*1), Z25; \
	VPMOVZXBD OFF(R10)(R14*1), Z26; \
	VPERMPS Z28, Z24, Z24; \
	VPERMPS Z29, Z25, Z25; \
	VPERMPS Z30, Z26, Z26
#define Q4KW3_HI(OFF) \
	VPMOVZXBD OFF(SI)(R14*1), Z24; \
	VPMOVZXBD OFF(R9)(R14*1), Z25; \
	VPMOVZXBD OFF(R10)(R14*1), Z26; \
	VPSRLD $4, Z24, Z24; \
	VPSRLD $4, Z25, Z25; \
	VPSRLD $4, Z26, Z26; \
	VPERMPS Z28, Z24, Z24; \
	VPERMPS Z29, Z25, Z25; \
	VPERMPS Z30, Z26, Z26

// The block, super-block by super-block, sub-blocks in pairs (the low
// then the high nibbles of one 32-byte chunk); it may end after any
// sub-block. R11 is the sub-block (0-7).
#define MTQ4K512(XN, LOAD, ZERO, STORE, HSUMS, FMA_LO, FMA_HI) \
	MTARGS(XN, PFOFF3, ROWS3); \
	MTSTART(LOAD, ZERO); \
	VPMOVZXBD mmtIota<>(SB), Z31; \
	VCVTDQ2PS Z31, Z31; \
sblock: \
	MOVQ flags+40(FP), R14; \
	TESTQ $FL_PF, R14; \
	JZ nopf; \
	PF3_1; \
	PREFETCHT1 64(SI)(R13*1); \
	PREFETCHT1 64(R9)(R13*1); \
	PREFETCHT1 64(R10)(R13*1); \
	PREFETCHT1 128(SI)(R13*1); \
	PREFETCHT1 128(R9)(R13*1); \
	PREFETCHT1 128(R10)(R13*1); \
nopf: \
	Q4KSC512(SI, 0, 64); \
	Q4KSC512(R9, 128, 192); \
	Q4KSC512(R10, 256, 320); \
	MOVQ n+24(FP), R12; \
	LEAQ (R8)(R8*2), R13; \
	XORQ R11, R11; \
pair: \
	MOVQ R11, R14; \
	SHLQ $4, R14; \
	Q4KTAB3; \
	Q4KW3_LO(16); \
	FMA_LO(0); \
	Q4KW3_LO(32); \
	FMA_HI(64); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JGE done; \
	INCQ R11; \
	Q4KTAB3; \
	Q4KW3_HI(16); \
	FMA_LO(0); \
	Q4KW3_HI(32); \
	FMA_HI(64); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JGE done; \
	INCQ R11; \
	CMPQ R11, $8; \
	JLT pair; \
	ADV3($144); \
	JMP sblock; \
	MTEND(STORE, HSUMS, $1536)

// ---- AVX2: 1 row × 3 (or 2) inputs; the weights of lane group q in Y12 ----

// F: MT3Q or MT2Q, the FMAs of the 3 (or 2) inputs' lane group at XOFF
// into Q0, Q1 (and Q2); MTGq(F): those of lane group q. The tile of 2
// inputs keeps the registers and sums' places of the tile of 3, those of
// input 2 staying zero.
#define MT3Q(XOFF, Q0, Q1, Q2) \
	VFMADD231PS XOFF(BX)(AX*4), Y12, Q0; \
	VFMADD231PS XOFF(CX)(AX*4), Y12, Q1; \
	VFMADD231PS XOFF(DX)(AX*4), Y12, Q2
#define MT2Q(XOFF, Q0, Q1, Q2) \
	VFMADD231PS XOFF(BX)(AX*4), Y12, Q0; \
	VFMADD231PS XOFF(CX)(AX*4), Y12, Q1
#define MTG0(F) F(0, Y0, Y4, Y8)
#define MTG1(F) F(32, Y1, Y5, Y9)
#define MTG2(F) F(64, Y2, Y6, Y10)
#define MTG3(F) F(96, Y3, Y7, Y11)

// bf16 (the even/odd layout): lane groups 0-3 hold the even columns
// 0-14, the even 16-30, the odd 1-15, the odd 17-31 (Y14 = the mask).
#define W1_BF16EO(OFF, QE, QO) \
	VMOVDQU OFF(SI), Y13; \
	VPSLLD $16, Y13, Y12; \
	QE; \
	VPAND Y14, Y13, Y12; \
	QO
#define W1_F16(OFF) VCVTPH2PS OFF(SI), Y12
#define W1_F32(OFF) VMOVUPS OFF(SI), Y12

#define BODY3(W, O1, O2, O3, F) W(0); MTG0(F); W(O1); MTG1(F); W(O2); MTG2(F); W(O3); MTG3(F)

// Q8_0: the scale d in Y13.
#define W1_Q8(OFF) VPMOVSXBD OFF(SI), Y12; VCVTDQ2PS Y12, Y12; VMULPS Y13, Y12, Y12
#define BODY1_Q8(F) \
	VPBROADCASTW (SI), X13; \
	VCVTPH2PS X13, Y13; \
	W1_Q8(2); MTG0(F); W1_Q8(10); MTG1(F); W1_Q8(18); MTG2(F); W1_Q8(26); MTG3(F)
#define BODY3_Q8 BODY1_Q8(MT3Q)
#define BODY2Y_Q8 BODY1_Q8(MT2Q)

#define PF1_1 PREFETCHT1 (SI)(R13*1)
#define PF1_2 PREFETCHT1 (SI)(R13*1); PREFETCHT1 64(SI)(R13*1)

#define MTLOOP1(PF, BODY, STEP) \
	TESTQ $FL_PF, R14; \
	JNZ loopPF; \
loop: \
	BODY; \
	ADDQ STEP, SI; \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loop; \
	JMP done; \
loopPF: \
	PF; \
	BODY; \
	ADDQ STEP, SI; \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JLT loopPF

#define MT256(XP, PF, BODY, STEP) \
	MTARGS(XP, PFOFF1, ROWS1); \
	MTSTART(YLOAD12, YZERO12); \
	MTLOOP1(PF, BODY, STEP); \
	MTEND(YSTORE12, YHSUM3, $384)

// MT256BF16: the bf16 tile (the even/odd layout, Y14 = the mask).
#define MT256BF16(XP, BODY) \
	VPBROADCASTD mmtHiMask<>(SB), Y14; \
	MTARGS(XP, PFOFF1, ROWS1); \
	MTSTART(YLOAD12, YZERO12); \
	MTLOOP1(PF1_1, BODY, $64); \
	MTEND(YSTORE12, YHSUM3EO, $384)

// Q4_K: the super-block's scales d·sc → 0(SP), mins dmin·m → 32(SP), as
// Q4KSC512 with ymm scratch Y12-Y14; the weights of lane group q of
// sub-block R11 from Y13 = d·sc, Y14 = dmin·m, Y15 = the nibble mask.
#define Q4KSC256(P) \
	VPBROADCASTW 0(P), X12; \
	VCVTPH2PS X12, Y12; \
	VPBROADCASTW 2(P), X13; \
	VCVTPH2PS X13, Y13; \
	MOVL 4(P), R11; \
	MOVL 12(P), R12; \
	MOVL R11, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	MOVL R12, R14; \
	ANDL $0x0f0f0f0f, R14; \
	ORL R14, R13; \
	ANDL $0x3f3f3f3f, R11; \
	SHLQ $32, R13; \
	ORQ R13, R11; \
	VMOVQ R11, X14; \
	VPMOVZXBD X14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VMULPS Y12, Y14, Y14; \
	VMOVUPS Y14, 0(SP); \
	MOVL 8(P), R11; \
	MOVL R11, R13; \
	SHRL $6, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	SHRL $4, R12; \
	ANDL $0x0f0f0f0f, R12; \
	ORL R12, R13; \
	ANDL $0x3f3f3f3f, R11; \
	SHLQ $32, R13; \
	ORQ R13, R11; \
	VMOVQ R11, X14; \
	VPMOVZXBD X14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VMOVUPS Y14, 32(SP)

#define Q4KW1_LO(OFF) \
	VPMOVZXBD OFF(SI)(R14*1), Y12; \
	VPAND Y15, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMSUB213PS Y14, Y13, Y12
#define Q4KW1_HI(OFF) \
	VPMOVZXBD OFF(SI)(R14*1), Y12; \
	VPSRLD $4, Y12, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VFMSUB213PS Y14, Y13, Y12
#define Q4KSUB1(W, F) \
	VBROADCASTSS 0(SP)(R11*4), Y13; \
	VBROADCASTSS 32(SP)(R11*4), Y14; \
	W(16); MTG0(F); W(24); MTG1(F); W(32); MTG2(F); W(40); MTG3(F)

#define MTQ4K256(XP, F) \
	MTARGS(XP, PFOFF1, ROWS1); \
	MTSTART(YLOAD12, YZERO12); \
	MOVL $15, R14; \
	VMOVD R14, X15; \
	VPBROADCASTD X15, Y15; \
sblock: \
	MOVQ flags+40(FP), R14; \
	TESTQ $FL_PF, R14; \
	JZ nopf; \
	PREFETCHT1 (SI)(R13*1); \
	PREFETCHT1 64(SI)(R13*1); \
	PREFETCHT1 128(SI)(R13*1); \
nopf: \
	Q4KSC256(SI); \
	MOVQ n+24(FP), R12; \
	MOVQ R8, R13; \
	XORQ R11, R11; \
pair: \
	MOVQ R11, R14; \
	SHLQ $4, R14; \
	Q4KSUB1(Q4KW1_LO, F); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JGE done; \
	INCQ R11; \
	Q4KSUB1(Q4KW1_HI, F); \
	ADDQ $32, AX; \
	CMPQ AX, R12; \
	JGE done; \
	INCQ R11; \
	CMPQ R11, $8; \
	JLT pair; \
	ADDQ $144, SI; \
	JMP sblock; \
	MTEND(YSTORE12, YHSUM3, $384)

// 0, 1, …, 15: the nibble values of the Q4_K tables.
DATA mmtIota<>+0(SB)/8, $0x0706050403020100
DATA mmtIota<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL mmtIota<>(SB), RODATA|NOPTR, $16

#define BODY4_F16 BODY4(W3_F16, 32)
#define BODY3X_F16 BODY3X(W3_F16, 32)
#define BODY2_F16 BODY2(W3_F16, 32)
#define BODY4_F32 BODY4(W3_F32, 64)
#define BODY3X_F32 BODY3X(W3_F32, 64)
#define BODY2_F32 BODY2(W3_F32, 64)
#define BODY1_BF16(F) W1_BF16EO(0, MTG0(F), MTG2(F)); W1_BF16EO(32, MTG1(F), MTG3(F))
#define BODY3_BF16 BODY1_BF16(MT3Q)
#define BODY2Y_BF16 BODY1_BF16(MT2Q)
#define BODY3_F16 BODY3(W1_F16, 16, 32, 48, MT3Q)
#define BODY2Y_F16 BODY3(W1_F16, 16, 32, 48, MT2Q)
#define BODY3_F32 BODY3(W1_F32, 32, 64, 96, MT3Q)
#define BODY2Y_F32 BODY3(W1_F32, 32, 64, 96, MT2Q)

// ---- the kernels ----

// The bf16 tiles take their inputs in the even/odd layout (mmtEvenOdd).
TEXT ·mmtBF16AVX512x4(SB), NOSPLIT, $0-72
	VPBROADCASTD mmtHiMask<>(SB), Z28
	MT512N(XP4, ZLOAD24, ZZERO24, ZSTORE24, ZHSUM12EO_OUT, BODY4_BF16)

TEXT ·mmtBF16AVX512x3(SB), NOSPLIT, $0-64
	VPBROADCASTD mmtHiMask<>(SB), Z28
	MT512N(XP3, ZLOAD18, ZZERO18, ZSTORE18, ZHSUM9EO, BODY3X_BF16)

TEXT ·mmtBF16AVX512x2(SB), NOSPLIT, $0-64
	VPBROADCASTD mmtHiMask<>(SB), Z28
	MT512N(XP2, ZLOAD12, ZZERO12, ZSTORE12, ZHSUM6EO, BODY2_BF16)

TEXT ·mmtF16AVX512x4(SB), NOSPLIT, $0-64
	MT512(XP4, ZLOAD24, ZZERO24, ZSTORE24, ZHSUM12_OUT, PF3_1, BODY4_F16, $64)

TEXT ·mmtF16AVX512x3(SB), NOSPLIT, $0-56
	MT512(XP3, ZLOAD18, ZZERO18, ZSTORE18, ZHSUM9, PF3_1, BODY3X_F16, $64)

TEXT ·mmtF16AVX512x2(SB), NOSPLIT, $0-56
	MT512(XP2, ZLOAD12, ZZERO12, ZSTORE12, ZHSUM6, PF3_1, BODY2_F16, $64)

TEXT ·mmtF32AVX512x4(SB), NOSPLIT, $0-64
	MT512(XP4, ZLOAD24, ZZERO24, ZSTORE24, ZHSUM12_OUT, PF3_2, BODY4_F32, $128)

TEXT ·mmtF32AVX512x3(SB), NOSPLIT, $0-56
	MT512(XP3, ZLOAD18, ZZERO18, ZSTORE18, ZHSUM9, PF3_2, BODY3X_F32, $128)

TEXT ·mmtF32AVX512x2(SB), NOSPLIT, $0-56
	MT512(XP2, ZLOAD12, ZZERO12, ZSTORE12, ZHSUM6, PF3_2, BODY2_F32, $128)

TEXT ·mmtQ8_0AVX512x4(SB), NOSPLIT, $0-64
	MT512(XP4, ZLOAD24, ZZERO24, ZSTORE24, ZHSUM12_OUT, PF3_1, BODY4_Q8, $34)

TEXT ·mmtQ8_0AVX512x3(SB), NOSPLIT, $0-56
	MT512(XP3, ZLOAD18, ZZERO18, ZSTORE18, ZHSUM9, PF3_1, BODY3X_Q8, $34)

TEXT ·mmtQ8_0AVX512x2(SB), NOSPLIT, $0-56
	MT512(XP2, ZLOAD12, ZZERO12, ZSTORE12, ZHSUM6, PF3_1, BODY2_Q8, $34)

TEXT ·mmtQ4_KAVX512x4(SB), $384-56
	MTQ4K512(XP4, ZLOAD24, ZZERO24, ZSTORE24, ZHSUM12, MT4FMA_LO, MT4FMA_HI)

TEXT ·mmtQ4_KAVX512x3(SB), $384-56
	MTQ4K512(XP3, ZLOAD18, ZZERO18, ZSTORE18, ZHSUM9, MT3FMA_LO, MT3FMA_HI)

TEXT ·mmtQ4_KAVX512x2(SB), $384-56
	MTQ4K512(XP2, ZLOAD12, ZZERO12, ZSTORE12, ZHSUM6, MT2FMA_LO, MT2FMA_HI)

TEXT ·mmtBF16AVX2x3(SB), NOSPLIT, $0-56
	MT256BF16(XP3, BODY3_BF16)

TEXT ·mmtF16AVX2x3(SB), NOSPLIT, $0-56
	MT256(XP3, PF1_1, BODY3_F16, $64)

TEXT ·mmtF32AVX2x3(SB), NOSPLIT, $0-56
	MT256(XP3, PF1_2, BODY3_F32, $128)

TEXT ·mmtQ8_0AVX2x3(SB), NOSPLIT, $0-56
	MT256(XP3, PF1_1, BODY3_Q8, $34)

TEXT ·mmtQ4_KAVX2x3(SB), NOSPLIT, $64-56
	MTQ4K256(XP3, MT3Q)

// The 1 × 2 tiles: outputs at acc[t], as the 1 × 3 tiles'.
TEXT ·mmtBF16AVX2x2(SB), NOSPLIT, $0-56
	MT256BF16(XP2, BODY2Y_BF16)

TEXT ·mmtF16AVX2x2(SB), NOSPLIT, $0-56
	MT256(XP2, PF1_1, BODY2Y_F16, $64)

TEXT ·mmtF32AVX2x2(SB), NOSPLIT, $0-56
	MT256(XP2, PF1_2, BODY2Y_F32, $128)

TEXT ·mmtQ8_0AVX2x2(SB), NOSPLIT, $0-56
	MT256(XP2, PF1_1, BODY2Y_Q8, $34)

TEXT ·mmtQ4_KAVX2x2(SB), NOSPLIT, $64-56
	MTQ4K256(XP2, MT2Q)

// ---- AVX2: 2 rows × 3 (or 2) inputs in two passes ----
//
// The 32-lane contract needs 4 ymm an output, so a 1 × 3 tile fills 12 of
// the 16 registers and loads an input operand for every FMA. Lanes 0-15
// and 16-31 never meet before the final sums, so these tiles run a block
// twice: pass A accumulates the lane groups of columns 0-15 of every
// 32-column group (bf16: the even and odd lanes of that half; f32: lanes
// 0-7 and 8-15), pass B those of columns 16-31, each with 2 rows × 3
// inputs × 2 groups = 12 accumulators, the rows' weights in Y12, Y13 and
// the input in Y15 (read once for both rows): 10 loads for 12 FMAs. Each
// lane still gets its columns in order, one FMA each. The state: pass A's
// 12 registers at acc, pass B's at acc + 384; the last block adds pass A's
// groups to pass B's in HSUM32_256's and HSUMEO256's tree and writes
// output (r, t) to acc[3r + t]. Accumulator of row r, input t, group h:
// Y(6h + 3r + t). R9 is the second row, R10 pass B's state, R13 two rows'
// stride (the next row tile, and the prefetch distance).

// R2X3: the FMAs of group XOFF of the 3 inputs with rows Y12, Y13.
#define R2X3(XOFF, A0, A1, A2, B0, B1, B2) \
	VMOVUPS XOFF(BX)(AX*4), Y15; \
	VFMADD231PS Y15, Y12, A0; \
	VFMADD231PS Y15, Y13, B0; \
	VMOVUPS XOFF(CX)(AX*4), Y15; \
	VFMADD231PS Y15, Y12, A1; \
	VFMADD231PS Y15, Y13, B1; \
	VMOVUPS XOFF(DX)(AX*4), Y15; \
	VFMADD231PS Y15, Y12, A2; \
	VFMADD231PS Y15, Y13, B2
#define R2X3H0(XOFF) R2X3(XOFF, Y0, Y1, Y2, Y3, Y4, Y5)
#define R2X3H1(XOFF) R2X3(XOFF, Y6, Y7, Y8, Y9, Y10, Y11)

// R2X2: the same with 2 inputs (the 2 × 2 tile keeps the 2 × 3 tile's
// registers, those of input 2 staying zero, and its sums' places).
#define R2X2(XOFF, A0, A1, B0, B1) \
	VMOVUPS XOFF(BX)(AX*4), Y15; \
	VFMADD231PS Y15, Y12, A0; \
	VFMADD231PS Y15, Y13, B0; \
	VMOVUPS XOFF(CX)(AX*4), Y15; \
	VFMADD231PS Y15, Y12, A1; \
	VFMADD231PS Y15, Y13, B1
#define R2X2H0(XOFF) R2X2(XOFF, Y0, Y1, Y3, Y4)
#define R2X2H1(XOFF) R2X2(XOFF, Y6, Y7, Y9, Y10)

// bf16 (the even/odd layout), one half of a group: its 16 columns at
// WOFF, the even lanes' inputs at XE, the odd lanes' at XO (Y14 = the
// mask; H0, H1: R2X3H0/H1 or R2X2H0/H1); Y15 holds a row's raw bf16
// before it widens.
#define R2BF16(WOFF, XE, XO, H0, H1) \
	VMOVDQU WOFF(SI), Y15; \
	VPSLLD $16, Y15, Y12; \
	VMOVDQU WOFF(R9), Y15; \
	VPSLLD $16, Y15, Y13; \
	H0(XE); \
	VPAND WOFF(SI), Y14, Y12; \
	VPAND WOFF(R9), Y14, Y13; \
	H1(XO)
#define R2BF16A R2BF16(0, 0, 64, R2X3H0, R2X3H1)
#define R2BF16B R2BF16(32, 32, 96, R2X3H0, R2X3H1)
#define R2BF16A2 R2BF16(0, 0, 64, R2X2H0, R2X2H1)
#define R2BF16B2 R2BF16(32, 32, 96, R2X2H0, R2X2H1)

// f32, one half of a group: lane groups at byte offsets O0, O1 (weights
// and inputs alike).
#define R2F32(O0, O1, H0, H1) \
	VMOVUPS O0(SI), Y12; \
	VMOVUPS O0(R9), Y13; \
	H0(O0); \
	VMOVUPS O1(SI), Y12; \
	VMOVUPS O1(R9), Y13; \
	H1(O1)
#define R2F32A R2F32(0, 32, R2X3H0, R2X3H1)
#define R2F32B R2F32(64, 96, R2X3H0, R2X3H1)
#define R2F32A2 R2F32(0, 32, R2X2H0, R2X2H1)
#define R2F32B2 R2F32(64, 96, R2X2H0, R2X2H1)

// R2ADDA: the fold 16 apart of every output: pass A's registers (at R11)
// added to pass B's.
#define R2ADDA \
	VADDPS 0(R11), Y0, Y0; \
	VADDPS 32(R11), Y1, Y1; \
	VADDPS 64(R11), Y2, Y2; \
	VADDPS 96(R11), Y3, Y3; \
	VADDPS 128(R11), Y4, Y4; \
	VADDPS 160(R11), Y5, Y5; \
	VADDPS 192(R11), Y6, Y6; \
	VADDPS 224(R11), Y7, Y7; \
	VADDPS 256(R11), Y8, Y8; \
	VADDPS 288(R11), Y9, Y9; \
	VADDPS 320(R11), Y10, Y10; \
	VADDPS 352(R11), Y11, Y11

// R2SUMBF16: output i (= 3r + t) of the bf16 tile: even = pass A's group
// 0 + pass B's (Yi), odd = their groups 1 (Y(6+i)), then HSUMEO256's rest
// (HSUMEO8) → acc[i]. Pass A's registers are all read (R2ADDA) before any
// sum is written (the sums land in its first register's slot).
#define R2SUMBF16 \
	R2ADDA; \
	HSUMEO8(Y0, X0, Y6, X6, 0(R11)); \
	HSUMEO8(Y1, X1, Y7, X7, 4(R11)); \
	HSUMEO8(Y2, X2, Y8, X8, 8(R11)); \
	HSUMEO8(Y3, X3, Y9, X9, 12(R11)); \
	HSUMEO8(Y4, X4, Y10, X10, 16(R11)); \
	HSUMEO8(Y5, X5, Y11, X11, 20(R11))

// R2SUMF32: output i of the f32 tile: HSUM32_256's (g0 + g2) + (g1 + g3)
// (pass A holds g0, g1, pass B g2, g3: R2ADDA, then HSUM256) → acc[i].
#define R2SUMF32 \
	R2ADDA; \
	HSUM256(Y0, Y6, X0, 0(R11)); \
	HSUM256(Y1, Y7, X1, 4(R11)); \
	HSUM256(Y2, Y8, X2, 8(R11)); \
	HSUM256(Y3, Y9, X3, 12(R11)); \
	HSUM256(Y4, Y10, X4, 16(R11)); \
	HSUM256(Y5, Y11, X5, 20(R11))

// R2GROUP: one 32-column group (BODY), both rows' pointers on by STEP,
// the column compared with n (the caller's JLT loops).
#define R2GROUP(BODY, STEP) \
	BODY; \
	ADDQ STEP, SI; \
	ADDQ STEP, R9; \
	ADDQ $32, AX; \
	CMPQ AX, R12

// R2PASS starts a pass at the block's first group: its state from P
// (flag 1) or zero.
#define R2PASS(P, ZL, RL) \
	MOVQ w+0(FP), SI; \
	LEAQ (SI)(R8*1), R9; \
	XORQ AX, AX; \
	TESTQ $FL_LOAD, R14; \
	JZ ZL; \
	YLOAD12(P); \
	JMP RL; \
ZL: \
	YZERO12; \
RL:

// MT2X3: the two-pass kernel body (XP: its inputs' pointers, XP3 or XP2;
// BODYA, BODYB: a group of pass A and B; STEP: a group's bytes per row;
// SUMS: the last block's sums).
#define MT2X3(XP, BODYA, BODYB, STEP, SUMS) \
	MOVQ xs+16(FP), AX; \
	XP; \
	MOVQ stride+8(FP), R8; \
	LEAQ (R8)(R8*1), R13; \
tile: \
	MOVQ acc+32(FP), R11; \
	LEAQ 384(R11), R10; \
	MOVQ n+24(FP), R12; \
	MOVQ flags+40(FP), R14; \
	R2PASS(R11, zeroA, readyA); \
	TESTQ $FL_PF, R14; \
	JNZ loopApf; \
loopA: \
	R2GROUP(BODYA, STEP); \
	JLT loopA; \
	JMP endA; \
loopApf: \
	PREFETCHT1 (SI)(R13*1); \
	PREFETCHT1 (R9)(R13*1); \
	R2GROUP(BODYA, STEP); \
	JLT loopApf; \
endA: \
	YSTORE12(R11); \
	R2PASS(R10, zeroB, readyB); \
loopB: \
	R2GROUP(BODYB, STEP); \
	JLT loopB; \
	TESTQ $FL_FINAL, R14; \
	JNZ final; \
	YSTORE12(R10); \
	JMP next; \
final: \
	SUMS; \
next: \
	MOVQ w+0(FP), SI; \
	ADDQ R13, SI; \
	MOVQ SI, w+0(FP); \
	MOVQ acc+32(FP), R11; \
	ADDQ $768, R11; \
	MOVQ R11, acc+32(FP); \
	DECQ tiles+48(FP); \
	JNZ tile; \
	VZEROUPPER; \
	RET

// The two-row tiles store their sums in place with FL_OUT (R2OUT, R2OUT2).
TEXT ·mmtBF16AVX2x2x3(SB), NOSPLIT, $0-64
	VPBROADCASTD mmtHiMask<>(SB), Y14
	MT2X3(XP3, R2BF16A, R2BF16B, $64, R2SUMBF16; R2OUT)

TEXT ·mmtF32AVX2x2x3(SB), NOSPLIT, $0-64
	MT2X3(XP3, R2F32A, R2F32B, $128, R2SUMF32; R2OUT)

// The 2 × 2 tiles: outputs (r, t) at acc[3r + t], as the 2 × 3 tile's.
TEXT ·mmtBF16AVX2x2x2(SB), NOSPLIT, $0-64
	VPBROADCASTD mmtHiMask<>(SB), Y14
	MT2X3(XP2, R2BF16A2, R2BF16B2, $64, R2SUMBF16; R2OUT2)

TEXT ·mmtF32AVX2x2x2(SB), NOSPLIT, $0-64
	MT2X3(XP2, R2F32A2, R2F32B2, $128, R2SUMF32; R2OUT2)

// func mmtEvenOdd(dst, src *float32, n int): src's n floats (a multiple
// of 32) in the bf16 tiles' input layout: per 32-float group, its 16 even
// elements in order, then its 16 odd ones. AVX2.
TEXT ·mmtEvenOdd(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ eodone

eoloop:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VSHUFPS $0x88, Y1, Y0, Y4
	VSHUFPS $0xDD, Y1, Y0, Y5
	VSHUFPS $0x88, Y3, Y2, Y6
	VSHUFPS $0xDD, Y3, Y2, Y7
	VPERMPD $0xD8, Y4, Y4
	VPERMPD $0xD8, Y5, Y5
	VPERMPD $0xD8, Y6, Y6
	VPERMPD $0xD8, Y7, Y7
	VMOVUPS Y4, 0(DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y5, 64(DI)
	VMOVUPS Y7, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ eoloop

eodone:
	VZEROUPPER
	RET

// ---- the bf16 3 × 4 tile, row-major: every input tile per row tile ----
//
// func mmtBF16AVX512x4R(w *byte, stride int, d *mmtDesc, n int, rows, nti int, pf *byte)
//
// A product whose inputs' columns, all of them, fit L1 at once (one
// column block of n, the whole row: mmtRowMajorFits) runs row tile by row
// tile (rows of them, three weight rows each, w on by three rows a row
// tile), each row tile over all its nti input tiles (descriptors d[0..nti),
// 72 bytes each: the four inputs' first elements, the 16-float scratch of
// ZHSUM12EO, the four outputs' addresses at row 0): the row tile's weights
// come from memory once and are then read from L1 by every input tile,
// and the inputs stay in L1 for all the row tiles, so the tiles compute
// from L1 while the next weights arrive. Input j of input tile ti gets its
// three sums of row tile rt at d[ti].out[j], which OUT12 moves on by the
// three rows (the bits of the matrix-vector product, as the other
// tiles'). While input tile k computes,
// it prefetches (to L1) one line a 32-column group of the next row tile's
// rows: row 2 − k for k < 3, or rows 1 and 2 then row 0 where nti = 2 (the
// last row tile: of the rows at pf, the next group's, where pf is not nil).
//
// Frame: 0(SP) the descriptor, 8(SP) input tiles left, 16(SP) the row
// tile's weights, 32(SP) row tiles left, 40(SP) the next row tile's
// weights (prefetched).
TEXT ·mmtBF16AVX512x4R(SB), NOSPLIT, $48-56
	VPBROADCASTD mmtHiMask<>(SB), Z28
	MOVQ stride+8(FP), R8
	MOVQ w+0(FP), AX
	MOVQ AX, 16(SP)
	MOVQ rows+32(FP), AX
	MOVQ AX, 32(SP)

rowtile:
	MOVQ 16(SP), AX
	LEAQ (R8)(R8*2), R13
	ADDQ R13, AX
	CMPQ 32(SP), $1
	JNE pfset
	MOVQ pf+48(FP), AX

pfset:
	MOVQ AX, 40(SP)
	MOVQ d+16(FP), AX
	MOVQ AX, 0(SP)
	MOVQ nti+40(FP), AX
	MOVQ AX, 8(SP)

tile:
	MOVQ 0(SP), R13
	MOVQ 0(R13), BX
	MOVQ 8(R13), CX
	MOVQ 16(R13), DX
	MOVQ 24(R13), DI
	MOVQ 16(SP), SI
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	MOVQ n+24(FP), R12
	XORQ AX, AX
	ZZERO24

	// Input tile k = nti − (tiles left) prefetches its rows, if any.
	MOVQ nti+40(FP), R14
	SUBQ 8(SP), R14
	CMPQ R14, $3
	JGE loop
	MOVQ 40(SP), R13
	TESTQ R13, R13
	JZ loop
	CMPQ nti+40(FP), $2
	JNE pfone
	TESTQ R14, R14
	JNZ pfrow0
	LEAQ (R13)(R8*1), R14

loopPF2:
	PREFETCHT0 (R14)
	PREFETCHT0 (R14)(R8*1)
	ADDQ $64, R14
	MTITER(BODY4_BF16, $64)
	JLT loopPF2
	JMP done

pfrow0:
	MOVQ R13, R14
	JMP loopPF

pfone:
	NEGQ R14
	ADDQ $2, R14
	IMULQ R8, R14
	ADDQ R13, R14

loopPF:
	PREFETCHT0 (R14)
	ADDQ $64, R14
	MTITER(BODY4_BF16, $64)
	JLT loopPF
	JMP done

loop:
	MTITER(BODY4_BF16, $64)
	JLT loop

done:
	MOVQ 0(SP), R13
	MOVQ 32(R13), R11
	ZHSUM12EO
	LEAQ 40(R13), R12
	OUT12
	ADDQ $72, 0(SP)
	DECQ 8(SP)
	JNZ tile
	LEAQ (R8)(R8*2), R13
	ADDQ R13, 16(SP)
	DECQ 32(SP)
	JNZ rowtile
	VZEROUPPER
	RET

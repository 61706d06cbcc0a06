// Horizontal sums of the 32-lane accumulators in the fixed tree order of
// reduce32 (matvec_portable.go), shared by the kernels of matvec_amd64.s,
// quant_amd64.s and bf16compute_amd64.s.

// ---- horizontal sums in the fixed tree order ----

// HSUM16TO folds Z's 16 lanes in halves (8, 4, 2, 1 apart) into the low
// lane of X (Z's low part). Scratch: Z31. AVX-512F instructions only.
#define HSUM16TO(Z, X) \
	VEXTRACTF64X4 $1, Z, Y31; \
	VADDPS Z31, Z, Z; \
	VEXTRACTF32X4 $1, Z, X31; \
	VADDPS Z31, Z, Z; \
	VPERMILPS $0x0E, Z, Z31; \
	VADDPS Z31, Z, Z; \
	VMOVSHDUP Z, Z31; \
	VADDSS X31, X, X

// HSUM512 sums the 16 lanes of Z into the low lane of X and stores it to
// DST.
#define HSUM512(Z, X, DST) \
	HSUM16TO(Z, X); \
	VMOVSS X, DST

// HSUM32_512 reduces 32 lanes held as ZA (0-15) and ZB (16-31).
#define HSUM32_512(ZA, ZB, XA, DST) \
	VADDPS ZB, ZA, ZA; \
	HSUM512(ZA, XA, DST)

// HSUM8TO folds Y's 8 lanes in halves (4, 2, 1 apart) into the low lane
// of X (Y's low part). Scratch: X15.
#define HSUM8TO(Y, X) \
	VEXTRACTF128 $1, Y, X15; \
	VADDPS X15, X, X; \
	VPERMILPS $0x0E, X, X15; \
	VADDPS X15, X, X; \
	VMOVSHDUP X, X15; \
	VADDSS X15, X, X

// HSUM256 sums lanes 0-7 (YL) and 8-15 (YH) into the low lane of XL (YL's
// low part) and stores it to DST. Scratch: Y15.
#define HSUM256(YL, YH, XL, DST) \
	VADDPS YH, YL, YL; \
	HSUM8TO(YL, XL); \
	VMOVSS XL, DST

// HSUM32_256 reduces 32 lanes held as Y0-7, Y8-15, Y16-23, Y24-31 (names
// are the registers holding those lane groups).
#define HSUM32_256(YA, YB, YC, YD, XA, DST) \
	VADDPS YC, YA, YA; \
	VADDPS YD, YB, YB; \
	HSUM256(YA, YB, XA, DST)

// ---- the 3×4 tiles' sums, transposed ----
//
// ZTREE12 folds twelve 16-lane registers V0…V11 (output i = 4r + t in Vi)
// in the fixed tree of HSUM16TO — lanes 8, 4, 2, then 1 apart — for all
// twelve at once: each step adds two registers whose lanes were shuffled
// so that every lane holds the same pair of partial sums as HSUM16TO's
// step for one output (additions commute exactly, so the bits are those
// of HSUM16TO). 12 × 4 dependent steps become 12 independent register
// additions with their shuffles (~3 operations an output, not ~8).
// ZTREE12A, the folds 8 and 4 apart: V0 = [V0 | V1] (each register's
// lane i + lane i+8 in one 8-lane half), …; then 128-bit lane q of V0,
// V4, V8 (the tile's rows 0, 1, 2) = input q's 4 lanes folded 4 apart.
// ZTREE12B (W0-W2: those V0, V4, V8), the folds 2 and 1 apart: lane
// 4q + r of W0 = the sum of output (row r, input q), r < 3 (lane 4q + 3
// repeats row 2). So a tile
// stores output (r, t) at acc[4t + r] (mmtScatter). Scratch: Z24-Z27,
// Z29-Z31 (not Z28, the bf16 mask).
#define ZFOLD8(A, B, YB, T1, T2) \
	VINSERTF64X4 $1, YB, A, T1; \
	VSHUFF64X2 $0xEE, B, A, T2; \
	VADDPS T2, T1, A
#define ZFOLD4(P, Q, T1, T2) \
	VSHUFF32X4 $0x88, Q, P, T1; \
	VSHUFF32X4 $0xDD, Q, P, T2; \
	VADDPS T2, T1, P
// ZSHUFADD: A = shuffle LO of (A, B) + shuffle HI, per 128-bit lane;
// ZFOLD2 pairs lanes 0 and 2, 1 and 3 (0x44, 0xEE), ZFOLD1 lanes 0 and 1,
// 2 and 3 (0x88, 0xDD): A's pairs in lanes 0-1, B's in 2-3.
#define ZSHUFADD(LO, HI, A, B, T1, T2) \
	VSHUFPS LO, B, A, T1; \
	VSHUFPS HI, B, A, T2; \
	VADDPS T2, T1, A
#define ZFOLD2(W, X, T1, T2) ZSHUFADD($0x44, $0xEE, W, X, T1, T2)
#define ZFOLD1(Y, V, T1, T2) ZSHUFADD($0x88, $0xDD, Y, V, T1, T2)
#define ZTREE12A(V0, V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, U1, U3, U5, U7, U9, U11) \
	ZFOLD8(V0, V1, U1, Z24, Z25); \
	ZFOLD8(V2, V3, U3, Z26, Z27); \
	ZFOLD8(V4, V5, U5, Z29, Z30); \
	ZFOLD8(V6, V7, U7, Z31, Z24); \
	ZFOLD8(V8, V9, U9, Z25, Z26); \
	ZFOLD8(V10, V11, U11, Z27, Z29); \
	ZFOLD4(V0, V2, Z30, Z31); \
	ZFOLD4(V4, V6, Z24, Z25); \
	ZFOLD4(V8, V10, Z26, Z27)
#define ZTREE12B(W0, W1, W2) \
	ZFOLD2(W0, W1, Z29, Z30); \
	ZFOLD2(W2, W2, Z31, Z24); \
	ZFOLD1(W0, W2, Z25, Z26)

// ZHSUM12: a 3×4 tile's 12 outputs (lanes 0-15 in Z(2i), 16-31 in
// Z(2i+1), output i = 4r + t): the fold 16 apart, then the transposed
// tree (ZTREE12), stored to (R11): output (r, t) at float 4t + r. Used by
// the f32-mode tiles (mmtile_amd64.s) and the bf16 mode's
// (bf16compute_amd64.s).
#define ZHSUM12 \
	VADDPS Z1, Z0, Z0; \
	VADDPS Z3, Z2, Z2; \
	VADDPS Z5, Z4, Z4; \
	VADDPS Z7, Z6, Z6; \
	VADDPS Z9, Z8, Z8; \
	VADDPS Z11, Z10, Z10; \
	VADDPS Z13, Z12, Z12; \
	VADDPS Z15, Z14, Z14; \
	VADDPS Z17, Z16, Z16; \
	VADDPS Z19, Z18, Z18; \
	VADDPS Z21, Z20, Z20; \
	VADDPS Z23, Z22, Z22; \
	ZTREE12A(Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22, Y2, Y6, Y10, Y14, Y18, Y22); \
	ZTREE12B(Z0, Z8, Z16); \
	VMOVUPS Z0, (R11)

// ZLOAD12 / ZSTORE12 / ZZERO12: accumulators Z0-Z11 from / to the 12 × 16
// floats at P, or zeroed (a 3 × 2 tile's state between column blocks); the
// 24 forms add Z12-Z23 at P + 768 (a 3 × 4 tile's: the f32-mode tiles and
// the bf16 mode's).
#define ZLOAD12(P) \
	VMOVUPS 0(P), Z0; \
	VMOVUPS 64(P), Z1; \
	VMOVUPS 128(P), Z2; \
	VMOVUPS 192(P), Z3; \
	VMOVUPS 256(P), Z4; \
	VMOVUPS 320(P), Z5; \
	VMOVUPS 384(P), Z6; \
	VMOVUPS 448(P), Z7; \
	VMOVUPS 512(P), Z8; \
	VMOVUPS 576(P), Z9; \
	VMOVUPS 640(P), Z10; \
	VMOVUPS 704(P), Z11

#define ZLOAD12HI(P) \
	VMOVUPS 768(P), Z12; \
	VMOVUPS 832(P), Z13; \
	VMOVUPS 896(P), Z14; \
	VMOVUPS 960(P), Z15; \
	VMOVUPS 1024(P), Z16; \
	VMOVUPS 1088(P), Z17; \
	VMOVUPS 1152(P), Z18; \
	VMOVUPS 1216(P), Z19; \
	VMOVUPS 1280(P), Z20; \
	VMOVUPS 1344(P), Z21; \
	VMOVUPS 1408(P), Z22; \
	VMOVUPS 1472(P), Z23

#define ZSTORE12(P) \
	VMOVUPS Z0, 0(P); \
	VMOVUPS Z1, 64(P); \
	VMOVUPS Z2, 128(P); \
	VMOVUPS Z3, 192(P); \
	VMOVUPS Z4, 256(P); \
	VMOVUPS Z5, 320(P); \
	VMOVUPS Z6, 384(P); \
	VMOVUPS Z7, 448(P); \
	VMOVUPS Z8, 512(P); \
	VMOVUPS Z9, 576(P); \
	VMOVUPS Z10, 640(P); \
	VMOVUPS Z11, 704(P)

#define ZSTORE12HI(P) \
	VMOVUPS Z12, 768(P); \
	VMOVUPS Z13, 832(P); \
	VMOVUPS Z14, 896(P); \
	VMOVUPS Z15, 960(P); \
	VMOVUPS Z16, 1024(P); \
	VMOVUPS Z17, 1088(P); \
	VMOVUPS Z18, 1152(P); \
	VMOVUPS Z19, 1216(P); \
	VMOVUPS Z20, 1280(P); \
	VMOVUPS Z21, 1344(P); \
	VMOVUPS Z22, 1408(P); \
	VMOVUPS Z23, 1472(P)

#define ZZERO12 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11

#define ZZERO12HI \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

#define ZLOAD24(P) ZLOAD12(P); ZLOAD12HI(P)
#define ZSTORE24(P) ZSTORE12(P); ZSTORE12HI(P)
#define ZZERO24 ZZERO12; ZZERO12HI

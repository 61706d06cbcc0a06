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

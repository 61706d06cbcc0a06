//go:build arm64 && !purego

#include "textflag.h"

// func readSumNEON(p *byte, n int) uint64 — sums n bytes (n a positive
// multiple of 128) as uint64 lanes, two 64-byte loads per iteration into
// eight independent 2-lane sums, with a software prefetch 32 KiB ahead as
// the amd64 probe does (prefetches never fault).
TEXT ·readSumNEON(SB), NOSPLIT, $0-24
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	ADD $32768, R0, R4
loop:
	PRFM (R4), PLDL1KEEP
	PRFM 64(R4), PLDL1KEEP
	ADD $128, R4, R4
	VLD1.P 64(R0), [V16.D2, V17.D2, V18.D2, V19.D2]
	VLD1.P 64(R0), [V20.D2, V21.D2, V22.D2, V23.D2]
	VADD V16.D2, V0.D2, V0.D2
	VADD V17.D2, V1.D2, V1.D2
	VADD V18.D2, V2.D2, V2.D2
	VADD V19.D2, V3.D2, V3.D2
	VADD V20.D2, V4.D2, V4.D2
	VADD V21.D2, V5.D2, V5.D2
	VADD V22.D2, V6.D2, V6.D2
	VADD V23.D2, V7.D2, V7.D2
	SUBS $128, R1, R1
	BNE loop
	VADD V1.D2, V0.D2, V0.D2
	VADD V3.D2, V2.D2, V2.D2
	VADD V5.D2, V4.D2, V4.D2
	VADD V7.D2, V6.D2, V6.D2
	VADD V2.D2, V0.D2, V0.D2
	VADD V6.D2, V4.D2, V4.D2
	VADD V4.D2, V0.D2, V0.D2
	VMOV V0.D[0], R2
	VMOV V0.D[1], R3
	ADD R3, R2, R2
	MOVD R2, ret+16(FP)
	RET

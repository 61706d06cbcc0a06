// ASIMD (NEON) encodings and the 32-lane sum shared by the arm64 kernels.
//
// The Go assembler has no mnemonics for some ASIMD instructions used here
// (vector FADD, FMUL, FADDP, FCVTL and EXT); they are WORD encodings whose
// arguments are register numbers: OP(m, n, d) computes Vd = Vn op Vm.

// FADD / FSUB / FMUL Vd.4S, Vn.4S, Vm.4S
#define FADD4(m, n, d) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))
#define FSUB4(m, n, d) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL4(m, n, d) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))
// FCVTL Vd.4S, Vn.4H (halves 0-3)
#define FCVTLO(n, d) WORD $(0x0E217800 | ((n)<<5) | (d))
// EXT Vd.16B, Vn.16B, Vm.16B, #8
#define EXT8(m, n, d) WORD $(0x6E004000 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Sd, Vn.2S: lane 0 + lane 1
#define FADDP2(n, d) WORD $(0x7E30D800 | ((n)<<5) | (d))

// HSUM32(b) sums the 32 lanes in V(b)…V(b+7) in the tree order of
// reduce32 (matvec_portable.go) into lane 0 of V(b): s16 = lanes i + i+16
// (V(b+q) + V(b+q+4)), s8 = s16[i] + s16[i+8], s4 = s8[i] + s8[i+4], s2 =
// s4[i] + s4[i+2] (the register plus itself rotated by 8 bytes), then
// s2[0] + s2[1]. Every kernel's reduction is this one: it is the bit
// contract.
#define HSUM32(b) \
	FADD4((b)+4, b, b); \
	FADD4((b)+5, (b)+1, (b)+1); \
	FADD4((b)+6, (b)+2, (b)+2); \
	FADD4((b)+7, (b)+3, (b)+3); \
	FADD4((b)+2, b, b); \
	FADD4((b)+3, (b)+1, (b)+1); \
	FADD4((b)+1, b, b); \
	EXT8(b, b, (b)+1); \
	FADD4((b)+1, b, b); \
	FADDP2(b, b)

// ZERO8 clears eight vector registers.
#define ZERO8(A0, A1, A2, A3, A4, A5, A6, A7) \
	VEOR A0.B16, A0.B16, A0.B16; \
	VEOR A1.B16, A1.B16, A1.B16; \
	VEOR A2.B16, A2.B16, A2.B16; \
	VEOR A3.B16, A3.B16, A3.B16; \
	VEOR A4.B16, A4.B16, A4.B16; \
	VEOR A5.B16, A5.B16, A5.B16; \
	VEOR A6.B16, A6.B16, A6.B16; \
	VEOR A7.B16, A7.B16, A7.B16

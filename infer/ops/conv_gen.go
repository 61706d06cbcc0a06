//go:build ignore

// conv_gen writes conv_amd64.s, the register-tile kernels of the
// convolutions (see conv_kernels.go for their contract):
//
//	cd infer/ops && go run conv_gen.go
package main

import (
	"bytes"
	"fmt"
	"os"
)

const (
	maxR512 = 12 // rows of the AVX-512 tiles: 12 rows × 2 zmm accumulators
	maxR256 = 6  // rows of the AVX2 tiles: 6 rows × 2 ymm (a half panel)
	pfDist  = 1024
)

var b bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

// rowAddr is the address of element 0 of window row r: SI is row 0, R10
// row 4, R11 row 8; R8 holds the row step, R9 three row steps.
func rowAddr(r int) string {
	base := []string{"SI", "R10", "R11"}[r/4]
	switch r % 4 {
	case 0:
		return "(" + base + ")"
	case 1:
		return "(" + base + ")(R8*1)"
	case 2:
		return "(" + base + ")(R8*2)"
	}
	return "(" + base + ")(R9*1)"
}

// header loads the arguments shared by both variants and sets up the row
// pointers of the first tap.
func header(name string, R int) {
	p("")
	p("// func %s(x *float32, xRow, xTap, taps, in int, w *float32, out *float32, outRow int, bias *float32)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-72", name)
	p("\tMOVQ x+0(FP), R12")
	p("\tMOVQ xRow+8(FP), R8")
	p("\tLEAQ (R8)(R8*2), R9")
	p("\tMOVQ xTap+16(FP), R13")
	p("\tMOVQ taps+24(FP), DX")
	p("\tMOVQ w+40(FP), DI")
}

func tapStart(R int) {
	p("tap:")
	p("\tMOVQ R12, SI")
	if R > 4 {
		p("\tLEAQ (SI)(R8*4), R10")
	}
	if R > 8 {
		p("\tLEAQ (R10)(R8*4), R11")
	}
	p("\tMOVQ in+32(FP), CX")
}

func loopEnd(R int) {
	p("\tADDQ $4, SI")
	if R > 4 {
		p("\tADDQ $4, R10")
	}
	if R > 8 {
		p("\tADDQ $4, R11")
	}
	p("\tADDQ $128, DI")
	p("\tDECQ CX")
	p("\tJNZ loop")
	p("\tADDQ R13, R12")
	p("\tDECQ DX")
	p("\tJNZ tap")
}

func gen512(R int) {
	name := fmt.Sprintf("convTile512R%d", R)
	header(name, R)
	for i := 0; i < 2*R; i++ {
		p("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	tapStart(R)
	p("loop:")
	p("\tPREFETCHT0 %d(DI)", pfDist)
	p("\tPREFETCHT0 %d(DI)", pfDist+64)
	p("\tVMOVUPS (DI), Z28")
	p("\tVMOVUPS 64(DI), Z29")
	for r := 0; r < R; r++ {
		z := 30 + r%2
		p("\tVBROADCASTSS %s, Z%d", rowAddr(r), z)
		p("\tVFMADD231PS Z%d, Z28, Z%d", z, 2*r)
		p("\tVFMADD231PS Z%d, Z29, Z%d", z, 2*r+1)
	}
	loopEnd(R)
	p("\tMOVQ bias+64(FP), BX")
	p("\tVMOVUPS (BX), Z28")
	p("\tVMOVUPS 64(BX), Z29")
	p("\tMOVQ out+48(FP), AX")
	p("\tMOVQ outRow+56(FP), R14")
	for r := 0; r < R; r++ {
		p("\tVADDPS Z28, Z%d, Z%d", 2*r, 2*r)
		p("\tVADDPS Z29, Z%d, Z%d", 2*r+1, 2*r+1)
		p("\tVMOVUPS Z%d, (AX)", 2*r)
		p("\tVMOVUPS Z%d, 64(AX)", 2*r+1)
		if r < R-1 {
			p("\tADDQ R14, AX")
		}
	}
	p("\tVZEROUPPER")
	p("\tRET")
}

// gen256 is a half panel: 16 columns at w (the panel's rows are still 128
// bytes apart), written to out[0:16], bias[0:16].
func gen256(R int) {
	name := fmt.Sprintf("convTile256R%d", R)
	header(name, R)
	for i := 0; i < 2*R; i++ {
		p("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	tapStart(R)
	p("loop:")
	p("\tPREFETCHT0 %d(DI)", pfDist)
	p("\tVMOVUPS (DI), Y12")
	p("\tVMOVUPS 32(DI), Y13")
	for r := 0; r < R; r++ {
		y := 14 + r%2
		p("\tVBROADCASTSS %s, Y%d", rowAddr(r), y)
		p("\tVFMADD231PS Y%d, Y12, Y%d", y, 2*r)
		p("\tVFMADD231PS Y%d, Y13, Y%d", y, 2*r+1)
	}
	loopEnd(R)
	p("\tMOVQ bias+64(FP), BX")
	p("\tVMOVUPS (BX), Y12")
	p("\tVMOVUPS 32(BX), Y13")
	p("\tMOVQ out+48(FP), AX")
	p("\tMOVQ outRow+56(FP), R14")
	for r := 0; r < R; r++ {
		p("\tVADDPS Y12, Y%d, Y%d", 2*r, 2*r)
		p("\tVADDPS Y13, Y%d, Y%d", 2*r+1, 2*r+1)
		p("\tVMOVUPS Y%d, (AX)", 2*r)
		p("\tVMOVUPS Y%d, 32(AX)", 2*r+1)
		if r < R-1 {
			p("\tADDQ R14, AX")
		}
	}
	p("\tVZEROUPPER")
	p("\tRET")
}

// ELU constants (float32 bits), in the order the kernels load them.
var eluConsts = []struct {
	name string
	bits uint32
}{
	{"lo", 0xc1a00000},    // -20: expm1 is -1 in float32 below
	{"log2e", 0x3fb8aa3b}, // 1/ln 2
	{"ln2hi", 0xbf318000}, // -0.693359375 (exact with few bits)
	{"ln2lo", 0x395e8083}, // 2.12194440e-4: ln 2 ≈ 0.693359375 − ln2lo
	{"c7", 0x39500d01},    // 1/5040
	{"c6", 0x3ab60b61},    // 1/720
	{"c5", 0x3c088889},    // 1/120
	{"c4", 0x3d2aaaab},    // 1/24
	{"c3", 0x3e2aaaab},    // 1/6
	{"c2", 0x3f000000},    // 1/2
	{"one", 0x3f800000},
}

func genELU512() {
	p("")
	p("// func eluAVX512(dst, src *float32, n int): n a positive multiple of 16.")
	p("TEXT ·eluAVX512(SB), NOSPLIT, $0-24")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ n+16(FP), CX")
	for i, c := range eluConsts {
		p("\tMOVL $0x%08x, AX // %s", c.bits, c.name)
		p("\tVPBROADCASTD AX, Z%d", 16+i)
	}
	p("\tVPXORD Z27, Z27, Z27")
	p("\tMOVL $127, AX")
	p("\tVPBROADCASTD AX, Z28")
	p("eloop:")
	p("\tVMOVUPS (SI), Z0")
	p("\tVMAXPS Z0, Z16, Z1")      // xc = max(−20, x), a NaN x goes through
	p("\tVMINPS Z1, Z27, Z1")      // xc = min(0, xc)
	p("\tVMULPS Z17, Z1, Z2")      // z = xc·log2e
	p("\tVRNDSCALEPS $0, Z2, Z2")  // n = roundeven(z)
	p("\tVFMADD231PS Z18, Z2, Z1") // r = xc + n·(−ln2hi)
	p("\tVFMADD231PS Z19, Z2, Z1") // r = r + n·ln2lo
	p("\tVMOVAPS Z20, Z3")
	p("\tVFMADD213PS Z21, Z1, Z3") // q = c7·r + c6
	p("\tVFMADD213PS Z22, Z1, Z3") // q = q·r + c5
	p("\tVFMADD213PS Z23, Z1, Z3") // q = q·r + c4
	p("\tVFMADD213PS Z24, Z1, Z3") // q = q·r + c3
	p("\tVFMADD213PS Z25, Z1, Z3") // q = q·r + c2
	p("\tVMULPS Z1, Z1, Z4")       // r²
	p("\tVFMADD213PS Z1, Z4, Z3")  // p = q·r² + r
	p("\tVCVTPS2DQ Z2, Z5")
	p("\tVPADDD Z28, Z5, Z5")
	p("\tVPSLLD $23, Z5, Z5")        // t = 2^n
	p("\tVSUBPS Z26, Z5, Z6")        // t − 1
	p("\tVFMADD213PS Z6, Z5, Z3")    // e = t·p + (t − 1)
	p("\tVCMPPS $0x1e, Z27, Z0, K1") // x > 0
	p("\tVMOVAPS Z0, K1, Z3")
	p("\tVMOVUPS Z3, (DI)")
	p("\tADDQ $64, SI")
	p("\tADDQ $64, DI")
	p("\tSUBQ $16, CX")
	p("\tJNZ eloop")
	p("\tVZEROUPPER")
	p("\tRET")
}

func genELU256() {
	p("")
	p("// func eluAVX2(dst, src *float32, n int): n a positive multiple of 8.")
	p("TEXT ·eluAVX2(SB), NOSPLIT, $0-24")
	p("\tMOVQ dst+0(FP), DI")
	p("\tMOVQ src+8(FP), SI")
	p("\tMOVQ n+16(FP), CX")
	for i, c := range eluConsts[:5] {
		p("\tMOVL $0x%08x, AX // %s", c.bits, c.name)
		p("\tVMOVD AX, X%d", 8+i)
		p("\tVPBROADCASTD X%d, Y%d", 8+i, 8+i)
	}
	p("\tVXORPS Y13, Y13, Y13")
	p("eloop:")
	p("\tVMOVUPS (SI), Y0")
	p("\tVMAXPS Y0, Y8, Y1")
	p("\tVMINPS Y1, Y13, Y1")
	p("\tVMULPS Y9, Y1, Y2")
	p("\tVROUNDPS $0, Y2, Y2")
	p("\tVFMADD231PS Y10, Y2, Y1")
	p("\tVFMADD231PS Y11, Y2, Y1")
	p("\tVMOVAPS Y12, Y3")
	for _, c := range eluConsts[5:10] {
		p("\tMOVL $0x%08x, AX // %s", c.bits, c.name)
		p("\tVMOVD AX, X4")
		p("\tVPBROADCASTD X4, Y4")
		p("\tVFMADD213PS Y4, Y1, Y3")
	}
	p("\tVMULPS Y1, Y1, Y4")
	p("\tVFMADD213PS Y1, Y4, Y3")
	p("\tVCVTPS2DQ Y2, Y5")
	p("\tMOVL $127, AX")
	p("\tVMOVD AX, X6")
	p("\tVPBROADCASTD X6, Y6")
	p("\tVPADDD Y6, Y5, Y5")
	p("\tVPSLLD $23, Y5, Y5")
	p("\tMOVL $0x3f800000, AX")
	p("\tVMOVD AX, X6")
	p("\tVPBROADCASTD X6, Y6")
	p("\tVSUBPS Y6, Y5, Y6")
	p("\tVFMADD213PS Y6, Y5, Y3")
	p("\tVCMPPS $0x1e, Y13, Y0, Y7")
	p("\tVBLENDVPS Y7, Y0, Y3, Y3")
	p("\tVMOVUPS Y3, (DI)")
	p("\tADDQ $32, SI")
	p("\tADDQ $32, DI")
	p("\tSUBQ $8, CX")
	p("\tJNZ eloop")
	p("\tVZEROUPPER")
	p("\tRET")
}

func main() {
	p("// Code generated by conv_gen.go; DO NOT EDIT.")
	p("")
	p("//go:build amd64 && !purego")
	p("")
	p("#include \"textflag.h\"")
	p("")
	p("// Register tiles of the convolution kernels (conv_kernels.go): R window")
	p("// rows × one 32-column weight panel (AVX-512: two zmm per row) or half a")
	p("// panel (AVX2: two ymm per row). Each output is one sequential chain of")
	p("// FMAs over the taps and the elements of a tap, then + bias: the same")
	p("// float32 operations whatever the tile or the vector width.")
	for R := 1; R <= maxR512; R++ {
		gen512(R)
	}
	for R := 1; R <= maxR256; R++ {
		gen256(R)
	}
	genELU512()
	genELU256()
	out := "conv_amd64.s"
	if len(os.Args) > 1 {
		out = os.Args[1] // tests write elsewhere and compare
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

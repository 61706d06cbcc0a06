package weights

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block-quantized weight formats, in llama.cpp's (ggml's) layouts, so that
// files convert both ways. A matrix is stored row by row; a row of n
// elements is ceil(n/BlockElems) blocks (llama.cpp requires n to be a
// multiple of the block: for such rows the bytes are ggml's exactly; a
// partial last block is padded with zeros when quantized and its padding
// is never read as a weight).
//
//   - Q8_0: blocks of 32 elements, 34 bytes: an f16 scale d, then 32 int8
//     q. The weight is w = d·q, exact in float32 (11-bit × 8-bit
//     significands).
//   - Q4_K: super-blocks of 256 elements, 144 bytes: f16 d, f16 dmin, 12
//     bytes of 6-bit scales and mins for the 8 sub-blocks of 32
//     (get_scale_min_k4's packing), 128 bytes of 4-bit q: bytes 32c..32c+31
//     hold elements 64c+l in their low nibble and 64c+32+l in their high
//     one. For sub-block j with 6-bit scale sc and min m, the weight is
//     w = float32(ds·q) − ms with ds = d·sc and ms = dmin·m: ds, ms and
//     ds·q are exact in float32, so w is one rounding of the subtraction
//     (FMA or not, every implementation gets the same bits).
//
// Activations are never quantized: products dequantize weights to float32
// exactly as above and follow the float32 kernels' reduction order.
const (
	Q8_0 DType = "Q8_0"
	Q4_K DType = "Q4_K"
)

// Quantized reports whether d is a block format (its Size is 0: elements
// have no byte width of their own; see BlockElems, BlockBytes, RowBytes).
func (d DType) Quantized() bool { return d == Q8_0 || d == Q4_K }

// BlockElems is the number of elements of one block (1 for plain dtypes).
func (d DType) BlockElems() int {
	switch d {
	case Q8_0:
		return 32
	case Q4_K:
		return 256
	}
	return 1
}

// BlockBytes is the size of one block (the element size for plain dtypes).
func (d DType) BlockBytes() int {
	switch d {
	case Q8_0:
		return 34
	case Q4_K:
		return 144
	}
	return d.Size()
}

// RowBytes is the storage of a row of cols elements.
func (d DType) RowBytes(cols int) int64 {
	be := int64(d.BlockElems())
	return (int64(cols) + be - 1) / be * int64(d.BlockBytes())
}

// StorageBytes is the storage of a tensor of the given (logical) shape: its
// last dimension is the row (a scalar or vector is one row).
func (d DType) StorageBytes(shape []int) int64 {
	if !d.Quantized() {
		n := int64(1)
		for _, s := range shape {
			n *= int64(s)
		}
		return n * int64(d.Size())
	}
	if len(shape) == 0 {
		return d.RowBytes(1)
	}
	rows := int64(1)
	for _, s := range shape[:len(shape)-1] {
		rows *= int64(s)
	}
	return rows * d.RowBytes(shape[len(shape)-1])
}

// ParseQuantFormat maps a user's format name (q8_0, q4_k, any case) to its
// dtype.
func ParseQuantFormat(s string) (DType, error) {
	switch s {
	case "q8_0", "Q8_0":
		return Q8_0, nil
	case "q4_k", "q4_K", "Q4_K":
		return Q4_K, nil
	}
	return "", fmt.Errorf("unknown weight format %q (have q8_0, q4_k)", s)
}

// FloatToHalf rounds f to the nearest IEEE binary16 value (ties to even),
// as ggml's GGML_FP32_TO_FP16 and the F16C instructions do.
func FloatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b >> 23 & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A half subnormal (or zero): m·2^(exp−150) in units of 2^−24.
		if exp == 0 {
			return sign
		}
		shift := uint(14 - e)
		if shift > 24 {
			return sign
		}
		m := mant | 0x800000
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is right (up to infinity)
	}
	return sign | uint16(h)
}

// QuantizeRow quantizes one row of values into dst (RowBytes(len(src))
// bytes) as llama.cpp's reference quantizers do (quantize_row_q8_0_ref,
// quantize_row_q4_K_ref: round to nearest, no importance matrix).
func QuantizeRow(dt DType, dst []byte, src []float32) {
	if int64(len(dst)) != dt.RowBytes(len(src)) {
		panic(fmt.Sprintf("weights: QuantizeRow: %d bytes for a %s row of %d", len(dst), dt, len(src)))
	}
	be, bb := dt.BlockElems(), dt.BlockBytes()
	var pad [256]float32
	for b := 0; b*be < len(src); b++ {
		blk := src[b*be : min((b+1)*be, len(src))]
		if len(blk) < be {
			pad = [256]float32{}
			copy(pad[:], blk)
			blk = pad[:be]
		}
		out := dst[b*bb : (b+1)*bb]
		switch dt {
		case Q8_0:
			quantizeQ8_0(out, blk)
		case Q4_K:
			quantizeQ4_K(out, blk)
		default:
			panic("weights: QuantizeRow: " + string(dt))
		}
	}
}

// DequantizeRow writes the len(dst) weights of a quantized row.
func DequantizeRow(dt DType, dst []float32, src []byte) {
	if int64(len(src)) < dt.RowBytes(len(dst)) {
		panic(fmt.Sprintf("weights: DequantizeRow: %d bytes for a %s row of %d", len(src), dt, len(dst)))
	}
	be, bb := dt.BlockElems(), dt.BlockBytes()
	var tmp [256]float32
	for b := 0; b*be < len(dst); b++ {
		out := dst[b*be : min((b+1)*be, len(dst))]
		blk := src[b*bb : (b+1)*bb]
		w := out
		if len(out) < be {
			w = tmp[:be]
		}
		switch dt {
		case Q8_0:
			dequantizeQ8_0(w, blk)
		case Q4_K:
			dequantizeQ4_K(w, blk)
		default:
			panic("weights: DequantizeRow: " + string(dt))
		}
		if len(out) < be {
			copy(out, w)
		}
	}
}

// Q8_0At is element j of a Q8_0 row (the kernels' tails).
func Q8_0At(row []byte, j int) float32 {
	blk := row[j/32*34:]
	return HalfToFloat(binary.LittleEndian.Uint16(blk)) * float32(int8(blk[2+j%32]))
}

// Q4_KAt is element j of a Q4_K row (the kernels' tails).
func Q4_KAt(row []byte, j int) float32 {
	blk := row[j/256*144:]
	k := j % 256
	sub := k / 32
	ds, ms := Q4_KSubScales(blk, sub)
	b := blk[16+k/64*32+k%32]
	q := b & 0xf
	if sub&1 == 1 {
		q = b >> 4
	}
	return float32(ds*float32(q)) - ms
}

// Q4_KSubScales is (d·sc, dmin·m) of sub-block j (0..7) of a Q4_K block:
// both exact in float32.
func Q4_KSubScales(blk []byte, j int) (ds, ms float32) {
	d := HalfToFloat(binary.LittleEndian.Uint16(blk[0:]))
	dmin := HalfToFloat(binary.LittleEndian.Uint16(blk[2:]))
	sc, m := scaleMinK4(j, blk[4:16])
	return d * float32(sc), dmin * float32(m)
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j
// (get_scale_min_k4).
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

func quantizeQ8_0(out []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(out, FloatToHalf(d))
	for j, v := range x {
		q := math.Round(float64(v * id)) // roundf: half away from zero
		out[2+j] = byte(int8(max(-128, min(127, q))))
	}
}

func dequantizeQ8_0(w []float32, blk []byte) {
	d := HalfToFloat(binary.LittleEndian.Uint16(blk))
	for j := range w {
		w[j] = d * float32(int8(blk[2+j]))
	}
}

func dequantizeQ4_K(w []float32, blk []byte) {
	for j := 0; j < 8; j++ {
		ds, ms := Q4_KSubScales(blk, j)
		qs := blk[16+j/2*32 : 16+j/2*32+32]
		for l, b := range qs {
			q := b & 0xf
			if j&1 == 1 {
				q = b >> 4
			}
			w[32*j+l] = float32(ds*float32(q)) - ms
		}
	}
}

// nearestInt is ggml's nearest_int: round half to even through the float32
// magic number (|f| ≤ 2^22).
func nearestInt(f float32) int {
	v := float32(f + 12582912)
	return int(math.Float32bits(v)&0x7fffff) - 0x400000
}

// quantizeQ4_K ports quantize_row_q4_K_ref for one super-block of 256.
func quantizeQ4_K(out []byte, x []float32) {
	var L [256]uint8
	var laux [32]uint8
	var wts [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			wts[l] = avX + float32(math.Abs(float64(v)))
		}
		scales[j], mins[j] = makeQKX2Quants(15, xs, wts[:], L[32*j:32*j+32], laux[:], -1, 0.1, 20)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	s := out[4:16]
	clear(s)
	for j := 0; j < 8; j++ {
		ls := uint8(min(63, nearestInt(float32(invScale*scales[j]))))
		lm := uint8(min(63, nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			s[j] = ls
			s[j+4] = lm
		} else {
			s[j+4] = ls&0xf | (lm&0xf)<<4
			s[j-4] |= (ls >> 4) << 6
			s[j] |= (lm >> 4) << 6
		}
	}
	binary.LittleEndian.PutUint16(out[0:], FloatToHalf(maxScale/63))
	binary.LittleEndian.PutUint16(out[2:], FloatToHalf(maxMin/63))
	for j := 0; j < 8; j++ {
		d, dm := Q4_KSubScales(out, j)
		if d == 0 {
			continue
		}
		for i := 0; i < 32; i++ {
			l := nearestInt(float32(x[32*j+i]+dm) / d)
			L[32*j+i] = uint8(max(0, min(15, l)))
		}
	}
	q := out[16:144]
	for j := 0; j < 256; j += 64 {
		for l := 0; l < 32; l++ {
			q[j/2+l] = L[j+l] | L[j+l+32]<<4
		}
	}
}

// makeQKX2Quants ports make_qkx2_quants (use_mad false): the scale and the
// (negated) min of one sub-block, its levels in L.
func makeQKX2Quants(nmax int, x, w []float32, L, laux []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		mn = min(mn, x[i])
		mx = max(mx, x[i])
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -mn
	}
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * (x[i] - mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(scale*float32(L[i])) + mn - x[i]
		bestErr += float32(w[i] * float32(diff*diff))
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * (x[i] - mn)))
			l = max(0, min(nmax, l))
			laux[i] = uint8(l)
			fl := float32(l)
			sumL += float32(w[i] * fl)
			sumL2 += float32(float32(w[i]*fl) * fl)
			sumXL += float32(float32(w[i]*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i := 0; i < n; i++ {
				diff := float32(thisScale*float32(laux[i])) + thisMin - x[i]
				cur += float32(w[i] * float32(diff*diff))
			}
			if cur < bestErr {
				copy(L[:n], laux[:n])
				bestErr = cur
				scale = thisScale
				mn = thisMin
			}
		}
	}
	return scale, -mn
}

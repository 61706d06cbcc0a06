package weights

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// FloatToHalf inverts HalfToFloat on every finite half, and rounds the
// midpoint of two neighbours to the even one.
func TestFloatToHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h>>10&0x1f == 0x1f {
			continue
		}
		f := HalfToFloat(uint16(h))
		if got := FloatToHalf(f); got != uint16(h) {
			t.Fatalf("FloatToHalf(HalfToFloat(%#04x) = %g) = %#04x", h, f, got)
		}
		if h&0x7fff == 0x7bff { // largest finite: its upper neighbour is infinity
			continue
		}
		a, b := f, HalfToFloat(uint16(h+1))
		mid := float32((float64(a) + float64(b)) / 2)
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if got := FloatToHalf(mid); got != want {
			t.Fatalf("FloatToHalf(midpoint %g of %#04x, %#04x) = %#04x, want %#04x", mid, h, h+1, got, want)
		}
	}
	for _, c := range []struct {
		f float32
		h uint16
	}{{65520, 0x7c00}, {65519, 0x7bff}, {-1e10, 0xfc00}, {1e-10, 0}, {float32(math.Ldexp(1, -25)), 0}, {float32(math.Ldexp(1.5, -25)), 1}} {
		if got := FloatToHalf(c.f); got != c.h {
			t.Errorf("FloatToHalf(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

// Q8_0 on a block computed by hand: amax 127·0.5 gives d = 0.5, q = x/d
// rounded half away from zero; the tail of a short row is padding.
func TestQ8_0KnownBlock(t *testing.T) {
	x := make([]float32, 35)
	x[0], x[1], x[2], x[3], x[4] = 63.5, -63.5, 0.25, 0.75, -0.2
	x[32], x[33], x[34] = 1, -2, 4
	b := make([]byte, Q8_0.RowBytes(len(x)))
	if len(b) != 68 {
		t.Fatalf("RowBytes(35) = %d, want 68", len(b))
	}
	QuantizeRow(Q8_0, b, x)
	if d := binary.LittleEndian.Uint16(b); d != FloatToHalf(0.5) {
		t.Fatalf("d = %#04x, want 0.5", d)
	}
	for j, want := range []int8{127, -127, 1, 2, 0} { // 0.25/0.5 = 0.5 → 1, 1.5 → 2
		if got := int8(b[2+j]); got != want {
			t.Errorf("q[%d] = %d, want %d", j, got, want)
		}
	}
	// Second block: amax 4, d = 4/127 (rounded to f16), q = ±32, ±64, 127.
	qs := []int8{int8(b[36]), int8(b[37]), int8(b[38])}
	if qs[0] != 32 || qs[1] != -64 || qs[2] != 127 {
		t.Errorf("second block q = %v, want [32 -64 127]", qs)
	}
	for _, p := range b[39:] {
		if p != 0 {
			t.Fatal("padding of the last block is not zero")
		}
	}
	w := make([]float32, len(x))
	DequantizeRow(Q8_0, w, b)
	if w[0] != 63.5 || w[1] != -63.5 || w[2] != 0.5 || w[3] != 1 || w[4] != 0 {
		t.Errorf("dequantized %v", w[:5])
	}
	for j := range x {
		if got := Q8_0At(b, j); got != w[j] {
			t.Fatalf("Q8_0At(%d) = %g, DequantizeRow %g", j, got, w[j])
		}
	}
}

// Q4_K on a ramp computed by hand: x = 0..15 in every sub-block gives
// min 0, scale 1 for each, so d = 1/63·63, levels = x, exact round trip.
func TestQ4_KKnownBlock(t *testing.T) {
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i % 16)
	}
	b := make([]byte, 144)
	QuantizeRow(Q4_K, b, x)
	w := make([]float32, 256)
	DequantizeRow(Q4_K, w, b)
	for i := range x {
		if math.Abs(float64(w[i]-x[i])) > 15.0/2048 { // d = 1/63 rounded to f16
			t.Fatalf("w[%d] = %g, want %g", i, w[i], x[i])
		}
		if got := Q4_KAt(b, i); got != w[i] {
			t.Fatalf("Q4_KAt(%d) = %g, DequantizeRow %g", i, got, w[i])
		}
	}
	// Nibble layout: element 64c+l in the low nibble of byte 32c+l, 64c+32+l
	// in the high one.
	if b[16] != 0x00 || b[17] != 0x11 || b[16+15] != 0xff {
		t.Errorf("q bytes %x", b[16:32])
	}
	// The 6-bit packing round trips for every scale/min pair.
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, b[4:16])
		if sc == 0 {
			t.Errorf("sub-block %d: scale 0", j)
		}
		_ = m
	}
}

// Every 6-bit scale and min of every sub-block survives the packing.
func TestQ4_KScalePacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var ls, lm [8]uint8
		s := make([]byte, 12)
		for j := range 8 {
			ls[j], lm[j] = uint8(rng.IntN(64)), uint8(rng.IntN(64))
			if j < 4 {
				s[j] |= ls[j]
				s[j+4] |= lm[j]
			} else {
				s[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
				s[j-4] |= (ls[j] >> 4) << 6
				s[j] |= (lm[j] >> 4) << 6
			}
		}
		for j := range 8 {
			if sc, m := scaleMinK4(j, s); sc != ls[j] || m != lm[j] {
				t.Fatalf("sub-block %d: (%d, %d), packed (%d, %d)", j, sc, m, ls[j], lm[j])
			}
		}
	}
}

// Round trips of random rows stay within the formats' error bounds: q8_0
// within half a step (amax/127/2, plus the f16 rounding of d) of each value;
// q4_K within a relative RMS error typical of 4 bits.
func TestQuantRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cols := range []int{1, 31, 32, 33, 100, 256, 257, 600, 4096} {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
		}
		for _, dt := range []DType{Q8_0, Q4_K} {
			b := make([]byte, dt.RowBytes(cols))
			QuantizeRow(dt, b, x)
			w := make([]float32, cols)
			DequantizeRow(dt, w, b)
			var se, sx float64
			for i := range x {
				e := float64(w[i] - x[i])
				se += e * e
				sx += float64(x[i]) * float64(x[i])
				if dt == Q8_0 {
					blk := x[i/32*32 : min(len(x), i/32*32+32)]
					var amax float64
					for _, v := range blk {
						amax = math.Max(amax, math.Abs(float64(v)))
					}
					if bound := amax / 127 * (0.5 + 127.0/2048) * 1.001; math.Abs(e) > bound { // half a step + the f16 rounding of d
						t.Fatalf("q8_0 cols %d: |w-x| = %g at %d, bound %g", cols, math.Abs(e), i, bound)
					}
				}
			}
			rel := math.Sqrt(se / sx)
			lim := map[DType]float64{Q8_0: 0.01, Q4_K: 0.12}[dt]
			if rel > lim {
				t.Errorf("%s cols %d: relative RMS error %.4f > %.2f", dt, cols, rel, lim)
			}
		}
	}
}

// A quantized tensor written by Write opens with its logical shape, its
// blocks mapped; bad metadata is a one-line error naming file and tensor.
func TestQuantizedFile(t *testing.T) {
	x := make([]float32, 3*40)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	src := Float32Tensor("w", []int{3, 40}, x)
	qb, err := QuantizeTensor(src, Q8_0, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := &Tensor{Name: "w", DType: Q8_0, Shape: []int{3, 40}, Data: qb}
	other := Float32Tensor("norm", []int{4}, []float32{1, 2, 3, 4})
	var buf bytes.Buffer
	if err := Write(&buf, []*Tensor{q, other}, map[string]string{MetaSourceSHA256: "abc"}); err != nil {
		t.Fatal(err)
	}
	f, err := FromBytes("q.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.Get("w", 3, 40)
	if err != nil {
		t.Fatal(err)
	}
	if g.DType != Q8_0 || !bytes.Equal(g.Data, qb) || g.Bytes() != 3*68 {
		t.Fatalf("got %s %v, %d bytes", g.DType, g.Shape, len(g.Data))
	}
	if f.Metadata[MetaSourceSHA256] != "abc" || f.Metadata[MetaFormat] != QuantFormat {
		t.Fatalf("metadata %v", f.Metadata)
	}
	if n, _ := f.Get("norm"); n.DType != F32 {
		t.Fatal("plain tensor changed")
	}

	bad := func(name string, meta map[string]string, want string) {
		t.Helper()
		u8 := &Tensor{Name: "w", DType: U8, Shape: []int{3, 68}, Data: qb}
		var b bytes.Buffer
		if err := Write(&b, []*Tensor{u8}, meta); err != nil {
			t.Fatal(err)
		}
		_, err := FromBytes("bad.safetensors", b.Bytes())
		if err == nil || !strings.Contains(err.Error(), "bad.safetensors") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming the file and %q", name, err, want)
		}
	}
	ok := map[string]string{MetaFormat: QuantFormat}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range ok {
			m[a] = b
		}
		m[k] = v
		return m
	}
	bad("no format", map[string]string{MetaTensorPrefix + "w": QuantEntry(Q8_0, []int{3, 40})}, MetaFormat)
	bad("size", with(MetaTensorPrefix+"w", QuantEntry(Q8_0, []int{3, 70})), `"w"`)
	bad("q4_k size", with(MetaTensorPrefix+"w", QuantEntry(Q4_K, []int{3, 40})), `"w"`)
	bad("unknown format", with(MetaTensorPrefix+"w", `{"dtype":"Q2_K","shape":[3,40]}`), "Q2_K")
	bad("bad json", with(MetaTensorPrefix+"w", `{"dtype":`), `"w"`)
	bad("negative", with(MetaTensorPrefix+"w", `{"dtype":"Q8_0","shape":[-3,40]}`), `"w"`)
	bad("huge", with(MetaTensorPrefix+"w", `{"dtype":"Q8_0","shape":[4294967296,4294967296]}`), `"w"`)
	bad("missing", with(MetaTensorPrefix+"v", QuantEntry(Q8_0, []int{3, 40})), `"v"`)
}

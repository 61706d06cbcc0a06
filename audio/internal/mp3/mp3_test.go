package mp3

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	cases := []struct {
		b                                []byte
		version, kbps, rate, mode, bytes int
		samples, side                    int
		crc, pad                         bool
	}{
		// MPEG-1, 128 kbit/s, 44.1 kHz, joint stereo (MS), no CRC.
		{[]byte{0xFF, 0xFB, 0x90, 0x64}, 1, 128, 44100, JointStereo, 417, 1152, 32, false, false},
		// The same, padded and CRC-protected.
		{[]byte{0xFF, 0xFA, 0x92, 0x64}, 1, 128, 44100, JointStereo, 418, 1152, 32, true, true},
		// MPEG-1, 320 kbit/s, 32 kHz, mono.
		{[]byte{0xFF, 0xFB, 0xE8, 0xC0}, 1, 320, 32000, Mono, 1440, 1152, 17, false, false},
		// MPEG-2, 64 kbit/s, 24 kHz, stereo.
		{[]byte{0xFF, 0xF3, 0x84, 0x00}, 2, 64, 24000, Stereo, 192, 576, 17, false, false},
		// MPEG-2.5, 64 kbit/s, 8 kHz, mono.
		{[]byte{0xFF, 0xE3, 0x88, 0xC0}, 25, 64, 8000, Mono, 576, 576, 9, false, false},
		// MPEG-2.5, 8 kbit/s, 11.025 kHz, dual channel, padded.
		{[]byte{0xFF, 0xE3, 0x12, 0x80}, 25, 8, 11025, DualChannel, 53, 576, 17, false, true},
	}
	for _, c := range cases {
		h, err := ParseHeader(c.b)
		if err != nil {
			t.Fatalf("% x: %v", c.b, err)
		}
		if h.Version != c.version || h.Kbps != c.kbps || h.Rate != c.rate || h.Mode != c.mode || h.FrameBytes != c.bytes ||
			h.Samples != c.samples || h.SideInfoBytes() != c.side || h.CRC != c.crc || h.Padding != c.pad {
			t.Errorf("% x: %+v", c.b, h)
		}
		if (h.Channels() == 1) != (c.mode == Mono) {
			t.Errorf("% x: %d channels", c.b, h.Channels())
		}
	}
	bad := []struct {
		b   []byte
		err error
	}{
		{[]byte{0xFF, 0xFD, 0x90, 0x00}, ErrNotLayer3}, // layer II
		{[]byte{0xFF, 0xFF, 0x90, 0x00}, ErrNotLayer3}, // layer I
		{[]byte{0xFF, 0xFB, 0x00, 0x00}, ErrFreeFormat},
		{[]byte{0xFF, 0xFB, 0xF0, 0x00}, ErrNoSync}, // bitrate index 15
		{[]byte{0xFF, 0xFB, 0x9C, 0x00}, ErrNoSync}, // sample rate index 3
		{[]byte{0xFF, 0xEB, 0x90, 0x00}, ErrNoSync}, // reserved version
		{[]byte{0xFF, 0xF9, 0x90, 0x00}, ErrNoSync}, // reserved layer
		{[]byte{0xFE, 0xFB, 0x90, 0x00}, ErrNoSync},
		{[]byte{0xFF, 0xFB, 0x90}, ErrNoSync},
		// MPEG-2.5 at 8 kbit/s and 12 kHz: 48 bytes; stereo side info and
		// CRC fit, but MPEG-1 at 32 kbit/s and 48 kHz (96 bytes) always.
		{[]byte{0xFF, 0xE2, 0x14, 0x00}, nil},
	}
	for _, c := range bad {
		_, err := ParseHeader(c.b)
		if c.err == nil {
			if err != nil {
				t.Errorf("% x: %v", c.b, err)
			}
			continue
		}
		if !errors.Is(err, c.err) {
			t.Errorf("% x: %v, want %v", c.b, err, c.err)
		}
	}
}

// The band tables cover a granule exactly.
func TestBandTables(t *testing.T) {
	for r := range 9 {
		if longStart[r][22] != 576 || shortStart[r][13] != 192 {
			t.Errorf("rate %d: long bands end at %d, short at %d", r, longStart[r][22], shortStart[r][13])
		}
	}
	for row, kinds := range lsfBands {
		for kind, want := range []int{21, 36, 33} {
			n := 0
			for _, c := range kinds[kind] {
				n += c
			}
			if n != want {
				t.Errorf("nr_of_sfb row %d kind %d: %d factors, want %d", row, kind, n, want)
			}
		}
	}
}

// bitWriter builds test bit streams.
type bitWriter struct {
	b []byte
	n int
}

func (w *bitWriter) put(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		if v>>uint(i)&1 != 0 {
			w.b[len(w.b)-1] |= 0x80 >> uint(w.n%8)
		}
		w.n++
	}
}

func (w *bitWriter) str(s string) {
	for _, c := range s {
		w.put(uint32(c-'0'), 1)
	}
}

// Codewords of ISO/IEC 11172-3 table B.7 decode to their values.
func TestHuffmanKnownCodes(t *testing.T) {
	cases := []struct {
		table int
		code  string
		x, y  uint32
	}{
		{1, "1", 0, 0}, {1, "001", 0, 1}, {1, "01", 1, 0}, {1, "000", 1, 1},
		{2, "1", 0, 0}, {2, "010", 0, 1}, {2, "000001", 0, 2}, {2, "00011", 2, 0}, {2, "000000", 2, 2},
		{3, "11", 0, 0}, {3, "10", 0, 1}, {3, "01", 1, 1},
		{15, "111", 0, 0}, {15, "1100", 0, 1},
		{16, "1", 0, 0}, {13, "1", 0, 0},
		{24, "1111", 0, 0}, {24, "1101", 0, 1},
	}
	for _, c := range cases {
		var w bitWriter
		w.str(c.code)
		w.str("1") // a following bit that must stay unread
		br := bitReader{data: w.b}
		v := bigTables[c.table].decode(&br)
		if v>>4 != c.x || v&15 != c.y || br.pos != len(c.code) {
			t.Errorf("table %d %s: (%d, %d) after %d bits, want (%d, %d) after %d", c.table, c.code, v>>4, v&15, br.pos, c.x, c.y, len(c.code))
		}
	}
	quads := []struct {
		b    bool
		code string
		v    uint32
	}{
		{false, "1", 0}, {false, "0101", 1}, {false, "0100", 2}, {false, "00101", 3}, {false, "000001", 15}, {false, "000000", 11},
		{true, "1111", 0}, {true, "0000", 15}, {true, "1010", 5},
	}
	for _, c := range quads {
		var w bitWriter
		w.str(c.code)
		br := bitReader{data: w.b}
		q := quadTables[0]
		if c.b {
			q = quadTables[1]
		}
		if v := q.decode(&br); v != c.v || br.pos != len(c.code) {
			t.Errorf("count1 table %v %s: %04b after %d bits, want %04b", c.b, c.code, v, br.pos, c.v)
		}
	}
}

// Every codeword of every table, in a stream of random codewords, decodes
// back to its (x, y): the two-level lookup holds each table whole; and each
// table is a complete prefix code (Kraft sum 1).
func TestHuffmanRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tables := append([]codeTable{}, bigValueCodes[:]...)
	tables = append(tables, quadCodesA)
	for ti, ct := range tables {
		if len(ct.hlen) == 0 {
			continue
		}
		kraft := 0.0
		for _, l := range ct.hlen {
			kraft += math.Pow(2, -float64(l))
		}
		if math.Abs(kraft-1) > 1e-12 {
			t.Errorf("table %d: Kraft sum %v", ti, kraft)
		}
		n := 2
		for n*n < len(ct.hlen) {
			n++
		}
		ht := bigTables[ti%len(bigTables)]
		if ti == len(bigValueCodes) {
			ht, n = quadTables[0], 1<<30
		}
		var w bitWriter
		var want []int
		for range 4000 {
			i := rng.IntN(len(ct.hlen))
			want = append(want, i)
			w.put(uint32(ct.hcod[i]), int(ct.hlen[i]))
		}
		br := bitReader{data: w.b}
		for k, i := range want {
			v := ht.decode(&br)
			got := int(v)
			if n < 1<<30 {
				got = int(v>>4)*n + int(v&15)
			}
			if got != i {
				t.Fatalf("table %d, codeword %d: entry %d, want %d", ti, k, got, i)
			}
		}
		if br.pos != w.n {
			t.Fatalf("table %d: %d bits read, %d written", ti, br.pos, w.n)
		}
	}
}

// The IMDCT against its definition, x_i = Σ_k X_k cos(π/2n (2i + 1 + n/2)(2k + 1)),
// windowed, with the overlap-add.
func TestIMDCT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	win := func(bt, i int) float64 {
		s := func(n, j int) float64 { return math.Sin(math.Pi / float64(n) * (float64(j) + 0.5)) }
		switch bt {
		case 0:
			return s(36, i)
		case 1:
			switch {
			case i < 18:
				return s(36, i)
			case i < 24:
				return 1
			case i < 30:
				return s(12, i-18)
			}
			return 0
		case 3:
			switch {
			case i < 6:
				return 0
			case i < 12:
				return s(12, i-6)
			case i < 18:
				return 1
			}
			return s(36, i)
		}
		return s(12, i)
	}
	imdct := func(x []float64, n int) []float64 {
		y := make([]float64, n)
		for i := range n {
			for k := range n / 2 {
				y[i] += x[k] * math.Cos(math.Pi/float64(2*n)*float64(2*i+1+n/2)*float64(2*k+1))
			}
		}
		return y
	}
	for _, bt := range []int{0, 1, 2, 3} {
		x := make([]float64, 18)
		prev := make([]float64, 18)
		for i := range x {
			x[i] = rng.Float64()*2 - 1
			prev[i] = rng.Float64()*2 - 1
		}
		want := make([]float64, 36)
		if bt == 2 {
			for w := range 3 {
				xs := make([]float64, 6)
				for k := range 6 {
					xs[k] = x[3*k+w]
				}
				for i, v := range imdct(xs, 12) {
					want[6+6*w+i] += v * win(2, i)
				}
			}
		} else {
			for i, v := range imdct(x, 36) {
				want[i] = v * win(bt, i)
			}
		}
		for i := range 18 {
			want[i] += prev[i]
		}
		out := make([]float64, 18)
		if bt == 2 {
			imdctShortBlock(x, out, prev)
		} else {
			imdctLongBlock(x, bt, out, prev)
		}
		for i := range 36 {
			got := out[min(i, 17)]
			if i >= 18 {
				got = prev[i-18]
			}
			if math.Abs(got-want[i]) > 1e-12 {
				t.Fatalf("block type %d, sample %d: %v, want %v", bt, i, got, want[i])
			}
		}
	}
}

func TestDCT32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var x, got [32]float64
	for i := range x {
		x[i] = rng.Float64()*2 - 1
	}
	dct32(&x, &got)
	for m := range 32 {
		want := 0.0
		for k := range 32 {
			want += x[k] * math.Cos(math.Pi*float64(m*(2*k+1))/64)
		}
		if math.Abs(got[m]-want) > 1e-12 {
			t.Fatalf("X[%d] = %v, want %v", m, got[m], want)
		}
	}
}

// The synthesis window: values of table 3-B.3, and the filter bank against
// the standard's description (shift V by 64, V = N·S, build U, window by
// D, add 16 terms) run directly.
func TestSynthesis(t *testing.T) {
	for _, c := range []struct {
		i int
		v float64
	}{{0, 0}, {1, -0.000015259}, {7, -0.000030518}, {256, 1.144989014}, {257, 1.144287109}, {511, 0.000015259}} {
		if math.Abs(synthD[c.i]-c.v) > 1e-9 {
			t.Errorf("D[%d] = %.9f, want %.9f", c.i, synthD[c.i], c.v)
		}
	}
	// D[512 − i] = −D[i] but for i = 64, 128, 192, where D[512 − i] = D[i].
	if synthD[448] != synthD[64] || synthD[384] != synthD[128] || synthD[320] != synthD[192] || synthD[300] != -synthD[212] || synthD[64] == 0 {
		t.Errorf("D is not symmetric as table 3-B.3 is")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	d := NewDecoder()
	var V [1024]float64
	for gr := range 3 {
		for i := range d.hyb {
			d.hyb[i] = rng.Float64()*0.2 - 0.1
		}
		out := make([]float32, 576)
		d.synthesize(0, out)
		for ts := range 18 {
			copy(V[64:], V[:960])
			for i := range 64 {
				V[i] = 0
				for k := range 32 {
					V[i] += math.Cos(float64((16+i)*(2*k+1))*math.Pi/64) * d.hyb[18*k+ts]
				}
			}
			var U [512]float64
			for i := range 8 {
				for j := range 32 {
					U[64*i+j] = V[128*i+j]
					U[64*i+32+j] = V[128*i+96+j]
				}
			}
			for j := range 32 {
				want := 0.0
				for i := range 16 {
					want += U[j+32*i] * synthD[j+32*i]
				}
				if got := float64(out[32*ts+j]); math.Abs(got-want) > 1e-6 {
					t.Fatalf("granule %d, slot %d, sample %d: %v, want %v", gr, ts, j, got, want)
				}
			}
		}
	}
}

// frame builds an MPEG-1 layer III mono frame (128 kbit/s, 44.1 kHz: 417
// bytes) with the given side information bits and main data.
func frame(side func(w *bitWriter), main []byte) []byte {
	f := []byte{0xFF, 0xFB, 0x90, 0xC0}
	var w bitWriter
	side(&w)
	for w.n < 17*8 {
		w.put(0, 1)
	}
	f = append(f, w.b...)
	f = append(f, main...)
	for len(f) < 417 {
		f = append(f, 0)
	}
	return f[:417]
}

// gran writes one mono granule's side information: long blocks, tables 1.
func gran(w *bitWriter, part23, bigValues, gain int) {
	w.put(uint32(part23), 12)
	w.put(uint32(bigValues), 9)
	w.put(uint32(gain), 8)
	w.put(0, 4) // scalefac_compress: no scale factor bits
	w.put(0, 1) // no window switching
	for range 3 {
		w.put(1, 5)
	}
	w.put(15, 4) // region0_count
	w.put(7, 3)
	w.put(0, 3) // preflag, scalefac_scale, count1table
}

func TestDecodeFrames(t *testing.T) {
	pcm := [2][]float32{make([]float32, 1152), make([]float32, 1152)}
	silent := func() bool {
		for _, v := range pcm[0] {
			if v != 0 {
				return false
			}
		}
		return true
	}
	d := NewDecoder()
	// A frame of nothing: silence, no error.
	zero := frame(func(w *bitWriter) {}, nil)
	if _, err := d.Decode(zero, pcm); err != nil || !silent() {
		t.Fatalf("empty frame: %v", err)
	}
	// A tone: one line per granule, (1, 0) in table 1: code "01" then
	// the sign bit 0, at the highest gain.
	tone := func(mdb int) []byte {
		return frame(func(w *bitWriter) {
			w.put(uint32(mdb), 9)
			w.put(0, 5+4)
			gran(w, 3, 1, 210)
			gran(w, 3, 1, 210)
		}, []byte{0b01001010})
	}
	if _, err := d.Decode(tone(0), pcm); err != nil || silent() {
		t.Fatalf("tone frame: %v (silent %v)", err, silent())
	}
	peak := 0.0
	for _, v := range pcm[0] {
		peak = max(peak, math.Abs(float64(v)))
	}
	if peak < 0.001 || peak > 1 {
		t.Fatalf("tone peak %v", peak)
	}
	// Main data before the stream's start: silence (the filter tail
	// aside), no error.
	d = NewDecoder()
	if _, err := d.Decode(tone(200), pcm); err != nil || !silent() {
		t.Fatalf("missing main data: %v (silent %v)", err, silent())
	}
	// Corrupt side information: an error wrapping ErrCorrupt, silence.
	for _, c := range []struct {
		name string
		side func(w *bitWriter)
		msg  string
	}{
		{"big_values", func(w *bitWriter) { w.put(0, 18); gran(w, 10, 289, 100) }, "big_values 289"},
		{"part2_3", func(w *bitWriter) { w.put(0, 18); gran(w, 4095, 0, 100); gran(w, 4095, 0, 100) }, "main data of 8190 bits"},
		{"block type", func(w *bitWriter) {
			w.put(0, 18)
			w.put(0, 12+9+8+4)
			w.put(1, 1)
			w.put(0, 2)
		}, "block type 0"},
		{"table 4", func(w *bitWriter) {
			w.put(0, 18)
			w.put(0, 12+9+8+4+1)
			w.put(4, 5)
		}, "table_select 4"},
	} {
		d := NewDecoder()
		_, err := d.Decode(frame(c.side, nil), pcm)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.msg) || !silent() {
			t.Errorf("%s: %v (silent %v)", c.name, err, silent())
		}
	}
	// Granule 0's Huffman data overruns its part2_3_length (1 bit for a
	// 3-bit pair): it alone is concealed, granule 1 (the next 3 bits)
	// decodes.
	d = NewDecoder()
	_, err := d.Decode(frame(func(w *bitWriter) {
		w.put(0, 9+5+4)
		gran(w, 1, 1, 210)
		gran(w, 3, 1, 210)
	}, []byte{0b00100000}), pcm)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "overruns") {
		t.Errorf("granule overrun: %v", err)
	}
	if slices.ContainsFunc(pcm[0][:576], func(v float32) bool { return v != 0 }) || !slices.ContainsFunc(pcm[0][576:], func(v float32) bool { return v != 0 }) {
		t.Errorf("granule overrun: granule 0 not silent or granule 1 silent")
	}
	// A cut frame and a short output buffer: errors, nothing decoded.
	if _, err := d.Decode(zero[:100], pcm); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("cut frame: %v", err)
	}
	if _, err := d.Decode(zero, [2][]float32{make([]float32, 100)}); err == nil {
		t.Errorf("short buffer: no error")
	}
	// The reservoir keeps at most 511 bytes.
	for range 5 {
		d.Decode(zero, pcm)
	}
	if len(d.res) > maxReservoir {
		t.Errorf("reservoir of %d bytes", len(d.res))
	}
}

// FuzzDecode feeds arbitrary frames (a valid header of the fuzzer's choice,
// then side information and main data) through one decoder, reservoir and
// all: no panic, and samples stay in [-1, 1].
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0xFF, 0xFB, 0x90, 0x64, 0, 0, 0, 0})
	f.Add([]byte{0xFF, 0xE3, 0x88, 0xC0, 0x12, 0x34, 0x56})
	f.Add([]byte{0xFF, 0xF3, 0x84, 0x60, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFF})
	f.Add([]byte{0xFF, 0xFA, 0x92, 0x44, 0x80, 0x01, 0x7F, 0xFE})
	pcm := [2][]float32{make([]float32, 1152), make([]float32, 1152)}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		if err != nil || len(data) == 4 {
			return
		}
		body := data[4:]
		d := NewDecoder()
		// Four frames of the header, each body the fuzzer's bytes from a
		// different start, repeated to fill it.
		for k := range 4 {
			fr := make([]byte, h.FrameBytes)
			copy(fr, data[:4])
			for i := 4; i < len(fr); i++ {
				fr[i] = body[(k*131+i-4)%len(body)]
			}
			if _, err := d.Decode(fr, pcm); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("whole frame refused: %v", err)
			}
			for ch := range h.Channels() {
				for _, v := range pcm[ch][:h.Samples] {
					if !(v >= -1 && v <= 1) {
						t.Fatalf("sample %v", v)
					}
				}
			}
		}
	})
}

// Intensity and MS stereo against ISO/IEC 11172-3 2.4.3.4.9 and 13818-3
// 2.4.3.2: an MPEG-1 long block with both, and an MPEG-2 short block with
// intensity only, where each window's intensity bands start above its last
// nonzero right-channel band.
func TestStereo(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const r2 = math.Sqrt2 / 2
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

	// MPEG-1, 44.1 kHz, long blocks: the right channel is nonzero up to
	// line 19 (bands 0 to 4).
	d := NewDecoder()
	h := Header{Version: 1, Mode: JointStereo, ModeExt: 3, rateIndex: 0}
	var l0, r0 [576]float64
	for i := range 576 {
		l0[i] = rng.Float64()*2 - 1
		d.is[0][i] = 1
		if i < 20 {
			r0[i] = rng.Float64()*2 - 1
			d.is[1][i] = 1
		}
	}
	for b := range 22 {
		d.sf[1].l[b] = b % 8 // 7: not intensity coded
	}
	d.xr[0], d.xr[1] = l0, r0
	d.nz = [2]int{576, 20}
	gs := [2]granule{}
	d.stereo(h, &gs)
	for b := range 22 {
		pos := d.sf[1].l[min(b, 20)]
		for i := longStart[0][b]; i < longStart[0][b+1]; i++ {
			wl, wr := (l0[i]+r0[i])*r2, (l0[i]-r0[i])*r2
			if b >= 5 && pos < 7 {
				k := math.Tan(float64(pos) * math.Pi / 12)
				wl, wr = l0[i]*k/(1+k), l0[i]/(1+k)
				if pos == 6 {
					wl, wr = l0[i], 0
				}
			}
			if !near(d.xr[0][i], wl) || !near(d.xr[1][i], wr) {
				t.Fatalf("MPEG-1 band %d line %d: (%v, %v), want (%v, %v)", b, i, d.xr[0][i], d.xr[1][i], wl, wr)
			}
		}
	}

	// MPEG-2, 22.05 kHz, short blocks, intensity only, intensity_scale 1.
	// Window 0 of the right channel is nonzero in bands 0 to 2, window 1
	// in band 0, window 2 nowhere.
	d = NewDecoder()
	h = Header{Version: 2, Mode: JointStereo, ModeExt: 1, rateIndex: 3}
	gs = [2]granule{{blockType: 2}, {blockType: 2, sfCompress: 1}}
	last := [3]int{3, 1, 0} // bands with nonzero lines, per window
	l0, r0 = [576]float64{}, [576]float64{}
	d.is = [2][576]int32{}
	for b := range 13 {
		s, w := 3*shortStart[3][b], shortWidths[3][b]
		for win := range 3 {
			for i := s + win*w; i < s+(win+1)*w; i++ {
				l0[i] = rng.Float64()*2 - 1
				d.is[0][i] = 1
				if b < last[win] {
					r0[i] = rng.Float64()*2 - 1
					d.is[1][i] = 1
				}
			}
			d.sf[1].s[b][win] = (b + win) % 8
		}
		d.sf[1].smax[b] = 7
	}
	d.xr[0], d.xr[1] = l0, r0
	d.nz = [2]int{576, 576}
	d.stereo(h, &gs)
	io := math.Pow(2, -0.5)
	for b := range 13 {
		s, w := 3*shortStart[3][b], shortWidths[3][b]
		for win := range 3 {
			pos := d.sf[1].s[min(b, 11)][win]
			for i := s + win*w; i < s+(win+1)*w; i++ {
				wl, wr := l0[i], r0[i]
				if b >= last[win] && pos != 7 {
					switch {
					case pos == 0:
					case pos%2 == 1:
						wl *= math.Pow(io, float64(pos+1)/2)
						wr = l0[i]
					default:
						wr = l0[i] * math.Pow(io, float64(pos)/2)
					}
					if pos == 0 {
						wr = l0[i]
					}
				}
				if !near(d.xr[0][i], wl) || !near(d.xr[1][i], wr) {
					t.Fatalf("MPEG-2 band %d window %d line %d: (%v, %v), want (%v, %v)", b, win, i, d.xr[0][i], d.xr[1][i], wl, wr)
				}
			}
		}
	}
}

package audio

import (
	"bytes"
	"crypto/md5"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// tTone is n samples of a tone plus noise at amp of full scale in bps
// bits, quantized to multiples of 2^wasted (a fixed generator).
func tTone(n int, bps uint, freq, amp float64, wasted uint, seed uint32) []int64 {
	out := make([]int64, n)
	top := float64(int64(1) << (bps - 1))
	for i := range out {
		seed = seed*1664525 + 1013904223
		v := amp*math.Sin(2*math.Pi*freq*float64(i)) + 0.01*(float64(seed>>8)/(1<<24)-0.5)
		q := int64(math.Round(v*top)) >> wasted << wasted
		out[i] = max(min(q, int64(top)-1), -int64(top))
	}
	return out
}

// flacHandStreams are the streams flac_test.go builds: named, with the
// channel samples each should decode to.
func flacHandStreams() map[string]*tStream {
	streams := map[string]*tStream{}
	// Variable block sizes (1 to 65535, every header block size code),
	// stereo, every channel assignment, subframe type and residual coding,
	// escaped partitions, wasted bits, and metadata blocks to skip.
	v := &tStream{rate: 24000, channels: 2, bps: 16, variable: true,
		extra: [][]byte{append([]byte{1}, make([]byte, 1000)...), []byte("\x02appl some application data"), []byte("\x04\x00\x00\x00\x00")}}
	sizes := []int{1000, 4096, 17, 192, 65535, 576, 4608, 255, 256, 1, 2304, 32768, 3, 16}
	subs := []tSub{
		{kind: "verbatim"},
		{kind: "fixed", order: 2, method: 0, porder: 3},
		{kind: "fixed", order: 4, method: 1, porder: 4, escape: true},
		{kind: "lpc", order: 2, prec: 12, shift: 10, method: 0, porder: 0},
		{kind: "fixed", order: 1, method: 1, porder: 2, riceMax: 0},
		{kind: "lpc", order: 8, prec: 15, shift: 13, method: 1, porder: 5, escape: true},
		{kind: "fixed", order: 0, method: 0, porder: 0, riceMax: 8}, // unary codes past 64 bits
		{kind: "fixed", order: 3, method: 0, porder: 1},
		{kind: "constant"},
	}
	lpc8 := []int64{6000, -3000, 1500, -700, 300, -100, 40, -10}
	for i, bs := range sizes {
		w := uint(0)
		if i%4 == 3 {
			w = 3
		}
		f := tFrame{samples: [][]int64{tTone(bs, 16, 0.01+0.002*float64(i), 0.4, w, uint32(i)), tTone(bs, 16, 0.013, 0.3, w, uint32(i+100))}, assign: []int{0, 8, 9, 10}[i%4]}
		for c := range 2 {
			s := subs[(i+c*4)%len(subs)]
			if s.kind == "lpc" && s.order == 2 {
				s.coef = []int64{int64(math.Round(2 * math.Cos(2*math.Pi*0.01) * 1024)), -1024}
			}
			if s.kind == "lpc" && s.order == 8 {
				s.coef = lpc8
			}
			if s.kind == "constant" && f.assign != 0 {
				s = tSub{kind: "verbatim"} // a constant side channel needs constant channels
			}
			if s.kind == "constant" {
				for k := range f.samples[c] {
					f.samples[c][k] = -1234 >> w << w
				}
			}
			if w > 0 && s.kind != "constant" {
				s.wasted = w
				if f.assign == 10 && c == 0 {
					s.wasted = w - 1 // mid = (l+r)>>1 loses one of them
				}
			}
			if bs <= s.order {
				s = tSub{kind: "verbatim", wasted: s.wasted}
			}
			for s.kind != "verbatim" && s.kind != "constant" && (bs>>s.porder < s.order || bs%(1<<s.porder) != 0) {
				s.porder-- // the block size bounds the partitions
			}
			f.subs = append(f.subs, s)
		}
		v.frames = append(v.frames, f)
		v.total += uint64(bs)
	}
	streams["variable"] = v
	// 32-bit stereo at the extremes: left +2^31−1, right −2^31, so the
	// side channel is 2^32−1 and needs its 33rd bit, in every assignment
	// and as VERBATIM and FIXED.
	x := &tStream{rate: 48000, channels: 2, bps: 32}
	for i := range 8 {
		l := tTone(4096, 32, 0.003, 0.9, 0, 1)
		r := tTone(4096, 32, 0.003, -0.9, 0, 2)
		kind := tSub{kind: "fixed", order: 2, method: 1, porder: 2}
		if i%2 == 0 {
			// The extremes, VERBATIM (their FIXED residual would not fit
			// in 32 bits, which the format requires).
			l[10], r[10] = 1<<31-1, -1<<31
			l[11], r[11] = -1<<31, 1<<31-1
			kind = tSub{kind: "verbatim"}
		}
		x.frames = append(x.frames, tFrame{samples: [][]int64{l, r}, assign: []int{0, 8, 9, 10}[i/2], subs: []tSub{kind, kind}})
		x.total += 4096
	}
	streams["32bit_side33"] = x
	// Depths 4, 8, 12 (6 channels), 20 and 24; sample rates given by each
	// header code (kHz, Hz, tens of Hz, STREAMINFO's alone); frame numbers
	// past one byte.
	for _, c := range []struct {
		name     string
		bps      uint
		ch, rate int
	}{{"4bit", 4, 1, 8000}, {"8bit", 8, 2, 7350}, {"12bit_6ch", 12, 6, 110250}, {"20bit", 20, 1, 12000}, {"24bit", 24, 2, 700001}} {
		s := &tStream{rate: c.rate, channels: c.ch, bps: c.bps}
		for i := range 300 {
			f := tFrame{}
			for ch := range c.ch {
				f.samples = append(f.samples, tTone(192, c.bps, 0.02*float64(ch+1), 0.5, 0, uint32(i*7+ch)))
				f.subs = append(f.subs, []tSub{{kind: "fixed", order: 2, method: 0, porder: 2}, {kind: "lpc", order: 1, prec: 8, shift: 7, coef: []int64{120}, method: 1, porder: 1, escape: true}, {kind: "verbatim"}}[(i+ch)%3])
			}
			s.frames = append(s.frames, f)
			s.total += 192
		}
		streams[c.name] = s
	}
	return streams
}

// Hand-built streams decode to exactly the samples they were built from,
// as flac -d decodes them (which shows the test writer writes valid FLAC).
func TestFLACHandBuilt(t *testing.T) {
	_, noFLAC := exec.LookPath("flac")
	for name, s := range flacHandStreams() {
		t.Run(name, func(t *testing.T) {
			data := s.bytes()
			c, err := Decode(data, name+".flac")
			if err != nil {
				t.Fatal(err)
			}
			checkFLACSamples(t, c, s)
			if noFLAC != nil || testing.Short() {
				return
			}
			dir := t.TempDir()
			p := filepath.Join(dir, name+".flac")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, "flac", "-s", "-f", "-d", p, "-o", p+".wav")
			ref := mustReadClip(t, p+".wav")
			for ch := range ref.Channels {
				if !sameBits(c.Channels[ch], ref.Channels[ch]) {
					t.Fatalf("channel %d differs from flac -d", ch)
				}
			}
		})
	}
}

func checkFLACSamples(t *testing.T, c *Clip, s *tStream) {
	t.Helper()
	if c.SampleRate != s.rate || len(c.Channels) != s.channels || uint64(c.Frames()) != s.total {
		t.Fatalf("%d Hz, %d channels, %d frames; built %d Hz, %d, %d", c.SampleRate, len(c.Channels), c.Frames(), s.rate, s.channels, s.total)
	}
	scale := 1 / float32(int64(1)<<(s.bps-1))
	at := 0
	for fi, f := range s.frames {
		for ch, x := range f.samples {
			for i, v := range x {
				if got, want := c.Channels[ch][at+i], float32(v)*scale; got != want {
					t.Fatalf("frame %d channel %d sample %d: %g, built %g", fi, ch, i, got, want)
				}
			}
		}
		at += len(f.samples[0])
	}
}

// A stream cut out of a longer one (its first frame or sample number past
// 0; 2^35 needs the 7-byte coded number) decodes; numbers must run on.
func TestFLACFirstNumber(t *testing.T) {
	for _, variable := range []bool{false, true} {
		s := &tStream{rate: 16000, channels: 1, bps: 16, variable: variable, first: 1 << 35}
		if !variable {
			s.first = 1<<31 - 5 // frame numbers: up to 31 bits in 6 bytes
		}
		for i := range 5 {
			s.total += 4096
			s.frames = append(s.frames, tFrame{samples: [][]int64{tTone(4096, 16, 0.01, 0.5, 0, uint32(i))}, subs: []tSub{{kind: "fixed", order: 2, method: 0, porder: 4}}})
		}
		c, err := Decode(s.bytes(), "cut.flac")
		if err != nil {
			t.Fatalf("variable %v: %v", variable, err)
		}
		checkFLACSamples(t, c, s)
	}
}

// Damaged and inconsistent streams: one line naming the file, the frame and
// the fault.
func TestFLACDamaged(t *testing.T) {
	base := func() *tStream {
		s := &tStream{rate: 24000, channels: 2, bps: 16}
		for i := range 3 {
			s.frames = append(s.frames, tFrame{samples: [][]int64{tTone(1152, 16, 0.01, 0.5, 0, uint32(i)), tTone(1152, 16, 0.02, 0.5, 0, uint32(i+9))}, subs: []tSub{{kind: "verbatim"}, {kind: "verbatim"}}})
		}
		return s
	}
	s := base()
	good := s.bytes()
	at := s.frameAt
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x10
		return b
	}
	dropFrame1 := append(bytes.Clone(good[:at[1]]), good[at[2]:]...)
	vs := base()
	vs.variable = true
	vdata := vs.bytes()
	mixed := append(bytes.Clone(good[:at[1]]), vdata[vs.frameAt[1]:]...)
	// FIXED order 1 from 100 with residuals of +100: past 8 bits at once.
	over := &tStream{rate: 8000, channels: 1, bps: 8, frames: []tFrame{{samples: [][]int64{{100, 200, 300, 400}}, subs: []tSub{{kind: "fixed", order: 1}}}}}
	// A second STREAMINFO; a block longer than the file; 3 bits.
	si := good[4:42]
	twoSI := append(append([]byte("fLaC"), si[0]&0x7F), si[1:]...)
	twoSI = append(twoSI, si...)
	long := append([]byte("fLaC\x81\xff\xff\xff"), make([]byte, 100)...)
	threeBit := bytes.Clone(good)
	threeBit[4+4+12] &^= 0x01 // bps−1 straddles bytes 20 and 21
	threeBit[4+4+13] = threeBit[4+4+13]&0x0F | 0x20
	tag := append(bytes.Clone(good), append([]byte("TAG"), make([]byte, 125)...)...)
	// The MD5 signature: the samples interleaved, 16-bit little-endian.
	h := md5.New()
	for _, f := range s.frames {
		for i := range f.samples[0] {
			for _, ch := range f.samples {
				h.Write([]byte{byte(ch[i]), byte(ch[i] >> 8)})
			}
		}
	}
	signed := withMD5(good, h.Sum(nil))
	var wrongSum [16]byte
	copy(wrongSum[:], h.Sum(nil))
	wrongSum[15] ^= 1
	wrong := withMD5(good, wrongSum[:])
	// A frame re-encoded with other samples and a right CRC: only the
	// signature tells.
	alt := base()
	alt.frames[1].samples[0][7]++
	altSigned := withMD5(alt.bytes(), h.Sum(nil))
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"crc16", flip(at[1] + 100), "x.flac: corrupt FLAC frame 1: CRC-16 mismatch (the frame is damaged)"},
		{"crc8", flip(at[2] + 4), "x.flac: corrupt FLAC frame 2: header CRC mismatch"},
		{"missing frame", dropFrame1, "x.flac: corrupt FLAC frame 1: frame number 2, expected 1 (a frame is missing or out of place)"},
		{"strategy", mixed, "x.flac: corrupt FLAC frame 1: the blocking strategy changes"},
		{"out of range", over.bytes(), "x.flac: corrupt FLAC frame 0: channel 0: a sample outside 8 bits"},
		{"no streaminfo", []byte("fLaC\x84\x00\x00\x00"), "x.flac: bad FLAC header: the first metadata block is of type 4, not STREAMINFO"},
		{"two streaminfo", twoSI, "x.flac: bad FLAC header: a second STREAMINFO block (block 1)"},
		{"block past the end", long, "x.flac: bad FLAC header: metadata block 0 claims 16777215 bytes, the file has 100 left"},
		{"3 bits", threeBit, "x.flac: bad FLAC header: 3 bits per sample (4 to 32 are valid)"},
		{"cut in a frame", good[:at[2]+10], "x.flac: truncated FLAC stream (frame 2 is cut off)"},
		{"cut at a frame", good[:at[2]], "x.flac: truncated FLAC stream: header says 3456 samples, only 2304 decoded"},
		{"trailing tag", tag, ""},
		{"md5 right", signed, ""},
		{"md5 wrong", wrong, "x.flac: corrupt FLAC stream: the decoded audio does not match the MD5 signature in STREAMINFO"},
		{"md5 of other audio", altSigned, "x.flac: corrupt FLAC stream: the decoded audio does not match the MD5 signature in STREAMINFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "cut at a frame" || tc.name == "cut in a frame" || tc.name == "trailing tag" {
				// base() declares no total; these need one.
				tc.data = withTotal(tc.data, 3*1152)
			}
			c, err := Decode(tc.data, "x.flac")
			if tc.want == "" {
				if err != nil || c.Frames() != 3*1152 {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v\nwant  %s", err, tc.want)
			}
		})
	}
}

// withMD5 sets STREAMINFO's MD5 signature.
func withMD5(b, sum []byte) []byte {
	b = bytes.Clone(b)
	copy(b[4+4+18:4+4+34], sum)
	return b
}

// withTotal sets STREAMINFO's total sample count.
func withTotal(b []byte, total uint64) []byte {
	b = bytes.Clone(b)
	p := 4 + 4 + 13 // the byte with the total's top 4 bits in its low nibble
	b[p] = b[p]&0xF0 | byte(total>>32&0x0F)
	for i := range 4 {
		b[p+1+i] = byte(total >> (24 - 8*i))
	}
	return b
}

// The hand-built streams as fuzz seeds, cut to their short frames (a few KB
// each: the fuzzer minimizes every new input, which takes its whole minute
// on a 300 KB one).
func flacFuzzSeeds() [][]byte {
	var out [][]byte
	for _, name := range []string{"variable", "32bit_side33", "12bit_6ch"} {
		s := flacHandStreams()[name]
		frames := s.frames
		s.frames, s.total = nil, 0
		for _, f := range frames {
			if n := len(f.samples[0]); n <= 1152 && len(s.frames) < 6 {
				s.frames = append(s.frames, f)
				s.total += uint64(n)
			}
		}
		if len(s.frames) == 0 { // 32-bit: one frame's first 256 samples
			f := frames[0]
			for c := range f.samples {
				f.samples[c] = f.samples[c][:256]
			}
			s.frames, s.total = []tFrame{f}, 256
		}
		out = append(out, s.bytes())
	}
	return out
}

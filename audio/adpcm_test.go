package audio

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestADPCMMatchesFFmpeg: ffmpeg encodes the test signal as IMA and MS
// ADPCM WAV (mono, stereo, several block sizes); the
// native decoders' samples equal ffmpeg's adpcm_ima_wav / adpcm_ms decoding
// bit for bit, also with the last block cut short.
func TestADPCMMatchesFFmpeg(t *testing.T) {
	needFFmpeg(t)
	for _, tc := range []struct {
		codec    string
		channels int
		block    int // -block_size (0: ffmpeg's default)
	}{
		{"adpcm_ima_wav", 1, 0}, {"adpcm_ima_wav", 2, 0}, {"adpcm_ima_wav", 1, 256},
		{"adpcm_ms", 1, 0}, {"adpcm_ms", 2, 0}, {"adpcm_ms", 2, 512},
	} {
		name := tc.codec + "_" + strconv.Itoa(tc.channels) + "ch_" + strconv.Itoa(tc.block)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := writeSourceWAV(t, dir, tc.channels, 9000, 16000)
			p := filepath.Join(dir, "adpcm.wav")
			args := []string{"-i", src, "-c:a", tc.codec}
			if tc.block > 0 {
				args = append(args, "-block_size", strconv.Itoa(tc.block))
			}
			ffmpegRun(t, append(args, p)...)
			full, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// The same file with its last block cut short (the data chunk's
			// size adjusted): 40 bytes less.
			cut := filepath.Join(dir, "cut.wav")
			short := cutData(t, full, 40)
			if err := os.WriteFile(cut, short, 0o644); err != nil {
				t.Fatal(err)
			}
			refFull, refCut := ffmpegDecodeRef(t, p), ffmpegDecodeRef(t, cut)
			t.Setenv("PATH", t.TempDir()) // native only
			for _, f := range []struct {
				path string
				ref  []float32
			}{{p, refFull}, {cut, refCut}} {
				c, err := Read(f.path)
				if err != nil {
					t.Fatal(err)
				}
				if c.SampleRate != 16000 {
					t.Fatalf("rate %d", c.SampleRate)
				}
				checkExact(t, c, f.ref, tc.channels)
				mono, err := LoadMono(f.path, 16000)
				if err != nil || !sameBits(mono, c.Channels[0]) {
					t.Fatalf("LoadMono: %v, or differs from channel 0", err)
				}
			}
			if snr := snrAgainst(testSignal(tc.channels, 9000, 16000)[0], mustRead1(t, p)); snr < 10 {
				t.Fatalf("SNR against the source %.1f dB: not the signal", snr)
			}
		})
	}
}

func mustRead1(t *testing.T, p string) []float32 {
	t.Helper()
	c, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	return c.Channels[0]
}

// cutData drops n bytes from the end of a WAV whose last chunk is data and
// fixes the data and RIFF sizes.
func cutData(t *testing.T, b []byte, n int) []byte {
	t.Helper()
	i := bytes.LastIndex(b, []byte("data"))
	if i < 0 {
		t.Fatal("no data chunk")
	}
	out := bytes.Clone(b[:len(b)-n])
	le := binary.LittleEndian
	le.PutUint32(out[i+4:], le.Uint32(out[i+4:])-uint32(n))
	le.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// imaFmt / msFmt build ADPCM fmt chunks with an extension.
func imaFmt(channels, blockAlign, spb int) []byte {
	b := fmtRaw(tagIMAADPCM, channels, 8000, 4000, blockAlign, 4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	return binary.LittleEndian.AppendUint16(b, uint16(spb))
}

func msFmt(channels, blockAlign, spb int, coefs [][2]int16) []byte {
	le := binary.LittleEndian
	b := fmtRaw(tagMSADPCM, channels, 8000, 4000, blockAlign, 4)
	b = le.AppendUint16(b, uint16(4+4*len(coefs)))
	b = le.AppendUint16(b, uint16(spb))
	b = le.AppendUint16(b, uint16(len(coefs)))
	for _, c := range coefs {
		b = le.AppendUint16(b, uint16(c[0]))
		b = le.AppendUint16(b, uint16(c[1]))
	}
	return b
}

func stdCoefs() [][2]int16 {
	var c [][2]int16
	for i := range msCoeff1 {
		c = append(c, [2]int16{int16(msCoeff1[i]), int16(msCoeff2[i])})
	}
	return c
}

func TestADPCMHeaders(t *testing.T) {
	// A mono IMA block: predictor 100, step index 0, then 4 bytes of
	// nibbles. The first sample is the header's predictor; then each nibble
	// n moves it by ±((2·(n&7)+1)·7)>>3 at step index 0 (7): code 0 → +0,
	// code 1 → +2 and the index stays 0 for codes 0..3.
	blk := []byte{100, 0, 0, 0, 0x10, 0x00, 0x00, 0x00}
	c, err := Decode(riff(ck("fmt ", imaFmt(1, 8, 9)), ck("data", blk)), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{100, 100, 102, 102, 102, 102, 102, 102, 102}
	for i := range want {
		want[i] /= 32768
	}
	if !sameBits(c.Channels[0], want) {
		t.Fatalf("IMA block = %v, want %v", c.Channels[0], want)
	}
	// An MS block: predictor 0 (c1 256, c2 0), delta 16, s1 10, s2 20;
	// output s2, s1, then s1 + nibble·delta: nibble 1 → 26, delta stays 16
	// (230·16>>8 = 14, floored at 16).
	ms := []byte{0, 16, 0, 10, 0, 20, 0, 0x10}
	c, err = Decode(riff(ck("fmt ", msFmt(1, 8, 4, stdCoefs())), ck("data", ms)), "x")
	if err != nil {
		t.Fatal(err)
	}
	want = []float32{20, 10, 26, 26}
	for i := range want {
		want[i] /= 32768
	}
	if !sameBits(c.Channels[0], want) {
		t.Fatalf("MS block = %v, want %v", c.Channels[0], want)
	}

	bad := stdCoefs()
	bad[3][0] = 100
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"IMA 3-bit", riff(ck("fmt ", fmtRaw(tagIMAADPCM, 1, 8000, 4000, 8, 3)), ck("data", blk)), "x: unsupported IMA ADPCM sample size: 3 bits (want 4)"},
		{"IMA odd block", riff(ck("fmt ", imaFmt(1, 10, 9)), ck("data", blk)), "x: IMA ADPCM block align 10 is not a multiple of 4 bytes × 1 channel(s)"},
		{"IMA header-only block", riff(ck("fmt ", imaFmt(2, 8, 1)), ck("data", blk)), "x: IMA ADPCM block align 8 is not a multiple of 4 bytes × 2 channel(s)"},
		{"IMA samples per block", riff(ck("fmt ", imaFmt(1, 8, 8)), ck("data", blk)), "x: IMA ADPCM fmt chunk says 8 samples per block; block align 8 holds 9"},
		{"IMA step index", riff(ck("fmt ", imaFmt(1, 8, 9)), ck("data", []byte{0, 0, 89, 0, 0, 0, 0, 0})), "x: corrupt IMA ADPCM block at data byte 0: step index out of range"},
		{"IMA reserved byte", riff(ck("fmt ", imaFmt(1, 8, 9)), ck("data", append(bytes.Clone(blk), 0, 0, 0, 1, 0, 0, 0, 0))), "x: corrupt IMA ADPCM block at data byte 8: step index out of range"},
		{"IMA 3 channels", riff(ck("fmt ", imaFmt(3, 24, 9)), ck("data", blk)), "x: IMA ADPCM with 3 channels is not supported (mono or stereo)"},
		{"MS 3 channels", riff(ck("fmt ", msFmt(3, 21, 2, stdCoefs())), ck("data", ms)), "x: Microsoft ADPCM with 3 channels is not supported (mono or stereo)"},
		{"MS short block", riff(ck("fmt ", msFmt(2, 12, 2, stdCoefs())), ck("data", ms)), "x: Microsoft ADPCM block align 12 does not fit 2 channel(s)"},
		{"MS samples per block", riff(ck("fmt ", msFmt(1, 8, 5, stdCoefs())), ck("data", ms)), "x: Microsoft ADPCM fmt chunk says 5 samples per block; block align 8 holds 4"},
		{"MS coefficients", riff(ck("fmt ", msFmt(1, 8, 4, bad)), ck("data", ms)), "x: Microsoft ADPCM with non-standard coefficients (pair 3 is 100, 64) is not supported"},
		{"MS few coefficients", riff(ck("fmt ", msFmt(1, 8, 4, stdCoefs()[:5])), ck("data", ms)), "x: Microsoft ADPCM fmt chunk declares 5 coefficient pairs (want the 7 standard ones)"},
		{"MS predictor", riff(ck("fmt ", msFmt(1, 8, 4, stdCoefs())), ck("data", []byte{7, 16, 0, 10, 0, 20, 0, 0x10})), "x: corrupt Microsoft ADPCM block at data byte 0: predictor index out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, "x")
			oneLineErr(t, err, tc.want)
		})
	}
}

// TestADPCMLimit: ADPCM expands each byte to two samples; the caller's
// limit is checked before the samples are allocated.
func TestADPCMLimit(t *testing.T) {
	data := bytes.Repeat([]byte{0, 0, 0, 0, 0x77, 0x77, 0x77, 0x77}, 1000) // 9000 frames
	f := riff(ck("fmt ", imaFmt(1, 8, 9)), ck("data", data))
	if _, err := DecodeReaderAtLimits(bytes.NewReader(f), int64(len(f)), "x", Limits{MaxSamples: 9000}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := DecodeReaderAtLimits(bytes.NewReader(f), int64(len(f)), "x", Limits{MaxSamples: 8999})
	oneLineErr(t, err, "x: decodes to 1.1")
}

// TestADPCMRandomBlocksMatchFFmpeg: blocks of random bytes under valid
// headers (any predictor, step index, delta and samples, so clipping, the
// delta floor and negative deltas all occur)
// decode as ffmpeg decodes them.
func TestADPCMRandomBlocksMatchFFmpeg(t *testing.T) {
	needFFmpeg(t)
	seed := uint32(7)
	rnd := func() byte { seed = seed*1664525 + 1013904223; return byte(seed >> 24) }
	for _, tc := range []struct {
		tag      uint16
		channels int
		block    int
	}{
		{tagIMAADPCM, 1, 36}, {tagIMAADPCM, 2, 72}, {tagIMAADPCM, 2, 40},
		{tagMSADPCM, 1, 64}, {tagMSADPCM, 2, 128},
	} {
		t.Run(knownTags[tc.tag]+" "+strconv.Itoa(tc.channels), func(t *testing.T) {
			var data []byte
			for b := 0; b < 40; b++ {
				blk := make([]byte, tc.block)
				for i := range blk {
					blk[i] = rnd()
				}
				for c := 0; c < tc.channels; c++ {
					if tc.tag == tagIMAADPCM {
						blk[4*c+2], blk[4*c+3] = rnd()%89, 0
					} else {
						blk[c] = rnd() % 7
					}
				}
				data = append(data, blk...)
			}
			data = data[:len(data)-tc.block/3] // a short last block
			var fmtb []byte
			if tc.tag == tagIMAADPCM {
				fmtb = imaFmt(tc.channels, tc.block, imaSamples(tc.block, tc.channels))
			} else {
				fmtb = msFmt(tc.channels, tc.block, msSamples(tc.block, tc.channels), stdCoefs())
			}
			p := filepath.Join(t.TempDir(), "random.wav")
			if err := os.WriteFile(p, riff(ck("fmt ", fmtb), ck("data", data)), 0o644); err != nil {
				t.Fatal(err)
			}
			ref := ffmpegDecodeRef(t, p)
			t.Setenv("PATH", t.TempDir())
			c, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			checkExact(t, c, ref, tc.channels)
		})
	}
}

// FuzzDecodeADPCM: Decode on mutated IMA / MS ADPCM WAV files never
// panics, returns a one-line error naming the file or a clip of at most two
// samples per byte of the file.
func FuzzDecodeADPCM(f *testing.F) {
	f.Setenv("PATH", f.TempDir())
	ima := []byte{100, 0, 0, 0, 0x10, 0x9F, 0x77, 0x08}
	ms := []byte{0, 1, 16, 0, 16, 0, 10, 0, 10, 0, 20, 0, 20, 0, 0x1F, 0x80}
	f.Add(riff(ck("fmt ", imaFmt(1, 8, 9)), ck("data", append(bytes.Clone(ima), ima[:6]...))))
	f.Add(riff(ck("fmt ", imaFmt(2, 16, 9)), ck("data", append(bytes.Clone(ima), ima...))))
	f.Add(riff(ck("fmt ", msFmt(2, 16, 4, stdCoefs())), ck("data", ms)))
	f.Add(riff(ck("fmt ", msFmt(1, 8, 4, stdCoefs())), ck("data", ms[:12])))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data, "fuzz.wav")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.wav: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		for _, ch := range c.Channels {
			if len(ch) != c.Frames() {
				t.Fatal("channels of different lengths")
			}
		}
		if sniff(data) == kindWAV && int64(len(c.Channels))*int64(c.Frames()) > 2*int64(len(data)) {
			t.Fatalf("%d×%d samples from %d bytes", len(c.Channels), c.Frames(), len(data))
		}
	})
}

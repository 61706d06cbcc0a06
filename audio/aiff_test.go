package audio

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toExtended encodes a positive float64 as an 80-bit IEEE extended float
// (independently of extendedRate: through math.Frexp).
func toExtended(v float64) []byte {
	frac, exp := math.Frexp(v) // v = frac · 2^exp, frac in [0.5, 1)
	m := uint64(frac * (1 << 53))
	m <<= 11 // 64-bit mantissa, integer bit set
	b := binary.BigEndian.AppendUint16(nil, uint16(exp-1+16383))
	return binary.BigEndian.AppendUint64(b, m)
}

func TestExtendedRate(t *testing.T) {
	for _, r := range []float64{1, 2, 3, 8000, 11025, 22050, 24000, 44100, 48000, 96000, 192000, 768000, 22254.545454545454, 11127.5, 0.5, 1 << 30, math.MaxInt32} {
		got, ok := extendedRate(toExtended(r))
		want := int(math.Floor(r + 0.5))
		if !ok || got != want {
			t.Errorf("rate %v: got %d, %v; want %d", r, got, ok, want)
		}
	}
	for _, b := range [][]byte{
		toExtended(0.25),    // rounds to 0
		toExtended(1 << 31), // over 2^31−1
		toExtended(1 << 70), // far over
		append([]byte{0x80}, toExtended(44100)[1:]...), // negative
		make([]byte, 10),                        // zero
		{0x7F, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0}, // infinity
		{0x7F, 0xFF, 0xC0, 0, 0, 0, 0, 0, 0, 0}, // NaN
		{0x00, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 0}, // tiny
	} {
		if r, ok := extendedRate(b); ok {
			t.Errorf("%X: accepted as %d Hz", b, r)
		}
	}
}

// aiffFile assembles a FORM file of the given type with chunks (big-endian
// sizes, a pad byte after odd sizes unless the size is forced).
func aiffFile(form string, chunks ...chunk) []byte {
	body := []byte(form)
	for _, c := range chunks {
		body = append(body, c.id...)
		size := c.size
		if size < 0 {
			size = int64(len(c.data))
		}
		body = binary.BigEndian.AppendUint32(body, uint32(size))
		body = append(body, c.data...)
		if len(c.data)%2 == 1 && c.size < 0 {
			body = append(body, 0)
		}
	}
	return append(binary.BigEndian.AppendUint32([]byte("FORM"), uint32(len(body))), body...)
}

// comm builds a COMM chunk body; codec "" is plain AIFF.
func comm(channels int, frames uint32, bits int, rate float64, codec string) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, uint16(channels))
	b = be.AppendUint32(b, frames)
	b = be.AppendUint16(b, uint16(bits))
	b = append(b, toExtended(rate)...)
	if codec != "" {
		b = append(b, codec...)
		b = append(b, 3, 'a', 'b', 'c') // pstring name, even total
	}
	return b
}

// ssnd builds an SSND chunk body with the given offset.
func ssnd(offset int, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(offset))
	b = binary.BigEndian.AppendUint32(b, 0)
	return append(append(b, make([]byte, offset)...), data...)
}

func be16s(v ...int16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.BigEndian.AppendUint16(b, uint16(x))
	}
	return b
}

func TestAIFFHandMade(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		rate int
		want [][]float32
	}{
		{"16-bit stereo, odd chunk, SSND offset",
			aiffFile("AIFF", ck("COMM", comm(2, 2, 16, 44100, "")), ck("ANNO", []byte("odd")), ck("SSND", ssnd(4, be16s(1, -2, 32767, -32768)))),
			44100, [][]float32{{1.0 / 32768, 32767.0 / 32768}, {-2.0 / 32768, -1}}},
		{"12-bit left-justified",
			aiffFile("AIFF", ck("COMM", comm(1, 2, 12, 8000, "")), ck("SSND", ssnd(0, be16s(0x7FF0, -16)))),
			8000, [][]float32{{float32(0x7FF0) / 32768, -16.0 / 32768}}},
		{"8-bit signed",
			aiffFile("AIFF", ck("COMM", comm(1, 3, 8, 8000, "")), ck("SSND", ssnd(0, []byte{0x80, 0x7F, 0x01}))),
			8000, [][]float32{{-1, 127.0 / 128, 1.0 / 128}}},
		{"24-bit",
			aiffFile("AIFF", ck("COMM", comm(1, 2, 24, 48000, "")), ck("SSND", ssnd(0, []byte{0x80, 0, 0, 0x00, 0x00, 0x01}))),
			48000, [][]float32{{-1, 1.0 / (1 << 23)}}},
		{"AIFC sowt",
			aiffFile("AIFC", ck("FVER", []byte{0xA2, 0x80, 0x51, 0x40}), ck("COMM", comm(1, 2, 16, 24000, "sowt")), ck("SSND", ssnd(0, []byte{0x01, 0x00, 0xFF, 0xFF}))),
			24000, [][]float32{{1.0 / 32768, -1.0 / 32768}}},
		{"AIFC fl32",
			aiffFile("AIFC", ck("COMM", comm(1, 2, 32, 24000, "fl32")), ck("SSND", ssnd(0, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, math.Float32bits(0.25)), math.Float32bits(-0.5))))),
			24000, [][]float32{{0.25, -0.5}}},
		{"AIFC ulaw says 16 bits",
			aiffFile("AIFC", ck("COMM", comm(1, 2, 16, 8000, "ulaw")), ck("SSND", ssnd(0, []byte{0x00, 0xFF}))),
			8000, [][]float32{{float32(ulawToLinear(0)) / 32768, float32(ulawToLinear(0xFF)) / 32768}}},
		{"SSND longer than COMM's frames",
			aiffFile("AIFF", ck("COMM", comm(1, 1, 16, 8000, "")), ck("SSND", ssnd(0, be16s(5, 6, 7)))),
			8000, [][]float32{{5.0 / 32768}}},
		{"fractional rate rounded",
			aiffFile("AIFF", ck("COMM", comm(1, 1, 16, 22254.545454545454, "")), ck("SSND", ssnd(0, be16s(5)))),
			22255, [][]float32{{5.0 / 32768}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k := sniff(tc.data); k != kindAIFF {
				t.Fatalf("sniffed as %d", k)
			}
			c, err := Decode(tc.data, "x.aiff")
			if err != nil {
				t.Fatal(err)
			}
			if c.SampleRate != tc.rate || len(c.Channels) != len(tc.want) {
				t.Fatalf("%d Hz × %d channels, want %d × %d", c.SampleRate, len(c.Channels), tc.rate, len(tc.want))
			}
			for ch := range tc.want {
				if !sameBits(c.Channels[ch], tc.want[ch]) {
					t.Fatalf("channel %d = %v, want %v", ch, c.Channels[ch], tc.want[ch])
				}
			}
		})
	}
}

func TestAIFFMalformed(t *testing.T) {
	good := ck("COMM", comm(1, 2, 16, 8000, ""))
	data := ck("SSND", ssnd(0, be16s(1, 2)))
	t.Setenv("PATH", t.TempDir()) // no ffmpeg: compressed AIFF-C gets the message
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"bad form type", append([]byte("FORM\x00\x00\x00\x04AIFX"), make([]byte, 8)...), ""}, // not sniffed as AIFF
		{"chunk past the end", aiffFile("AIFF", good, chunk{id: "SSND", data: ssnd(0, be16s(1)), size: 1000}), "x: truncated SSND chunk: header says 1000 bytes, file has 10"},
		{"other chunk past the end", aiffFile("AIFF", chunk{id: "COMM", data: comm(1, 2, 16, 8000, ""), size: 1 << 31}, data), "x: chunk \"COMM\" at offset 12 claims 2147483648 bytes"},
		{"no COMM", aiffFile("AIFF", data), "x: no COMM chunk"},
		{"no SSND", aiffFile("AIFF", good), "x: no SSND chunk"},
		{"two COMM", aiffFile("AIFF", good, good, data), "x: more than one COMM chunk"},
		{"short COMM", aiffFile("AIFF", ck("COMM", comm(1, 2, 16, 8000, "")[:17]), data), "x: COMM chunk is 17 bytes, need at least 18"},
		{"short AIFC COMM", aiffFile("AIFC", ck("COMM", comm(1, 2, 16, 8000, "")), data), "x: COMM chunk is 18 bytes, need at least 22"},
		{"frames past the data", aiffFile("AIFF", ck("COMM", comm(1, 3, 16, 8000, "")), data), "x: truncated SSND chunk: COMM says 3 frames, the data holds 2"},
		{"zero channels", aiffFile("AIFF", ck("COMM", comm(0, 2, 16, 8000, "")), data), "x: COMM chunk declares 0 channels"},
		{"negative channels", aiffFile("AIFF", ck("COMM", comm(0xFFFF, 2, 16, 8000, "")), data), "x: COMM chunk declares -1 channels"},
		{"0 bits", aiffFile("AIFF", ck("COMM", comm(1, 2, 0, 8000, "")), data), "x: unsupported AIFF sample size: 0 bits"},
		{"33 bits", aiffFile("AIFF", ck("COMM", comm(1, 2, 33, 8000, "")), data), "x: unsupported AIFF sample size: 33 bits"},
		{"zero rate", aiffFile("AIFF", ck("COMM", append(comm(1, 2, 16, 8000, "")[:8], make([]byte, 10)...)), data), "x: implausible sample rate (80-bit value 00000000000000000000)"},
		{"sowt 24", aiffFile("AIFC", ck("COMM", comm(1, 2, 24, 8000, "sowt")), data), "x: AIFF-C \"sowt\" with 24-bit samples is not supported (want 16)"},
		{"SSND offset past", aiffFile("AIFF", good, ck("SSND", binary.BigEndian.AppendUint32(nil, 100))), "x: SSND chunk is 4 bytes, need at least 8"},
		{"SSND offset past data", aiffFile("AIFF", good, ck("SSND", append(binary.BigEndian.AppendUint32(nil, 100), 0, 0, 0, 0, 1, 2))), "x: SSND data offset 100 is past the chunk's 2 bytes"},
		{"compressed without ffmpeg", aiffFile("AIFC", ck("COMM", comm(1, 2, 16, 8000, "ima4")), data), "x: AIFF-C \"ima4\" (abc) is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i x -c:a pcm_f32le out.wav"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, "x")
			if tc.want == "" {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			oneLineErr(t, err, tc.want)
		})
	}
}

// TestAIFFMatchesFFmpeg: ffmpeg writes AIFF / AIFF-C in each encoding its
// muxer has; the native reader's samples equal ffmpeg's decoding bit for
// bit.
func TestAIFFMatchesFFmpeg(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		codec    string
		channels int
	}{
		{"pcm_s16be", 2}, {"pcm_s24be", 1}, {"pcm_s32be", 2}, {"pcm_s8", 1},
		{"pcm_f32be", 2}, {"pcm_f64be", 1}, {"pcm_alaw", 1}, {"pcm_mulaw", 2},
		{"pcm_s16le", 2}, // AIFF-C sowt
	} {
		t.Run(tc.codec, func(t *testing.T) {
			src := writeSourceWAV(t, t.TempDir(), tc.channels, 4000, 22050)
			p := filepath.Join(dir, tc.codec+".aiff")
			ffmpegRun(t, "-i", src, "-c:a", tc.codec, "-f", "aiff", p)
			ref := ffmpegDecodeRef(t, p)
			t.Setenv("PATH", t.TempDir()) // the native reader, not ffmpeg
			c, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			if c.SampleRate != 22050 {
				t.Fatalf("rate %d", c.SampleRate)
			}
			checkExact(t, c, ref, tc.channels)
			mono, err := LoadMono(p, 22050)
			if err != nil || !sameBits(mono, c.Channels[0]) {
				t.Fatalf("LoadMono: %v, or differs from channel 0", err)
			}
		})
	}
}

// TestAIFFCompressedThroughFFmpeg: an AIFF-C codec the reader does not
// decode (ima4) goes to ffmpeg and decodes as ffmpeg decodes it.
func TestAIFFCompressedThroughFFmpeg(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	src := writeSourceWAV(t, dir, 1, 4000, 22050)
	p := filepath.Join(dir, "ima4.aifc")
	ffmpegRun(t, "-i", src, "-c:a", "adpcm_ima_qt", "-f", "aiff", p)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if sniff(b) != kindAIFF {
		t.Fatal("not sniffed as AIFF")
	}
	c, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	checkExact(t, c, ffmpegDecodeRef(t, p), 1)
}

// FuzzDecodeAIFF: Decode on mutated AIFF / AIFF-C files never panics,
// returns a one-line error naming the file or a clip whose samples come
// from the file's bytes (at most one per byte). ffmpeg is kept off PATH
// (compressed AIFF-C would go to it).
func FuzzDecodeAIFF(f *testing.F) {
	f.Setenv("PATH", f.TempDir())
	for _, s := range [][]byte{
		aiffFile("AIFF", ck("COMM", comm(2, 2, 16, 44100, "")), ck("ANNO", []byte("odd")), ck("SSND", ssnd(4, be16s(1, -2, 32767, -32768)))),
		aiffFile("AIFF", ck("COMM", comm(1, 3, 24, 48000, "")), ck("SSND", ssnd(0, make([]byte, 9)))),
		aiffFile("AIFC", ck("FVER", []byte{0xA2, 0x80, 0x51, 0x40}), ck("COMM", comm(1, 2, 16, 24000, "sowt")), ck("SSND", ssnd(0, []byte{1, 0, 0xFF, 0xFF}))),
		aiffFile("AIFC", ck("COMM", comm(1, 1, 64, 8000, "fl64")), ck("SSND", ssnd(0, make([]byte, 8)))),
		aiffFile("AIFC", ck("COMM", comm(2, 1, 8, 8000, "alaw")), ck("SSND", ssnd(0, []byte{1, 2}))),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data, "fuzz.aiff")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.aiff: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		if c.SampleRate <= 0 || len(c.Channels) == 0 {
			t.Fatalf("clip with rate %d and %d channels", c.SampleRate, len(c.Channels))
		}
		for _, ch := range c.Channels {
			if len(ch) != c.Frames() {
				t.Fatal("channels of different lengths")
			}
		}
		if sniff(data) == kindAIFF && int64(len(c.Channels))*int64(c.Frames()) > int64(len(data)) {
			t.Fatalf("%d×%d samples from %d bytes", len(c.Channels), c.Frames(), len(data))
		}
	})
}

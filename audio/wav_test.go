package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ---- helpers to craft WAV files ----

type chunk struct {
	id   string
	data []byte
	size int64 // declared size; -1 = len(data)
}

func ck(id string, data []byte) chunk { return chunk{id: id, data: data, size: -1} }

// riff assembles RIFF/WAVE with the chunks (pad byte after odd sizes).
func riff(chunks ...chunk) []byte {
	var body []byte
	body = append(body, "WAVE"...)
	for _, c := range chunks {
		body = append(body, c.id...)
		size := c.size
		if size < 0 {
			size = int64(len(c.data))
		}
		body = binary.LittleEndian.AppendUint32(body, uint32(size))
		body = append(body, c.data...)
		if len(c.data)%2 == 1 && c.size < 0 {
			body = append(body, 0)
		}
	}
	out := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	return append(out, body...)
}

// fmtChunk builds a 16-byte fmt chunk body with a consistent block align.
func fmtChunk(tag uint16, channels, rate, bits int) []byte {
	ba := channels * ((bits + 7) / 8)
	return fmtRaw(tag, channels, rate, ba*rate, ba, bits)
}

func fmtRaw(tag uint16, channels, rate, byteRate, blockAlign, bits int) []byte {
	le := binary.LittleEndian
	b := le.AppendUint16(nil, tag)
	b = le.AppendUint16(b, uint16(channels))
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(byteRate))
	b = le.AppendUint16(b, uint16(blockAlign))
	return le.AppendUint16(b, uint16(bits))
}

// fmtExt builds a 40-byte WAVE_FORMAT_EXTENSIBLE fmt chunk.
func fmtExt(sub uint16, channels, rate, bits, validBits int) []byte {
	le := binary.LittleEndian
	b := fmtChunk(0xFFFE, channels, rate, bits)
	b = le.AppendUint16(b, 22)
	b = le.AppendUint16(b, uint16(validBits))
	b = le.AppendUint32(b, 0x3) // channel mask
	b = le.AppendUint16(b, sub)
	return append(b, subtypeSuffix...)
}

func i16s(v ...int16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, uint16(x))
	}
	return b
}

func i24s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16))
	}
	return b
}

func i32s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func f32s(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// ---- supported formats ----

func TestDecodeFormats(t *testing.T) {
	list := ck("LIST", append([]byte("INFOISFT"), binary.LittleEndian.AppendUint32([]byte{}, 5)...))
	list.data = append(list.data, "Lavf\x00"...) // odd-sized sub-chunk content → whole LIST odd: pad byte
	odd := ck("junk", []byte{1, 2, 3})           // odd size, pad byte follows
	fact := ck("fact", i32s(3))
	tests := []struct {
		name  string
		file  []byte
		rate  int
		chans [][]float32
	}{
		{"pcm8", riff(ck("fmt ", fmtChunk(1, 1, 8000, 8)), ck("data", []byte{0, 128, 255, 64})),
			8000, [][]float32{{-1, 0, 127.0 / 128, -0.5}}},
		{"pcm16", riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", i16s(-32768, -1, 0, 1, 32767, 16384))),
			24000, [][]float32{{-1, -1.0 / 32768, 0, 1.0 / 32768, 32767.0 / 32768, 0.5}}},
		{"pcm24", riff(ck("fmt ", fmtChunk(1, 1, 44100, 24)), ck("data", i24s(-8388608, 8388607, 1, -1, 4194304))),
			44100, [][]float32{{-1, 8388607.0 / 8388608, 1.0 / 8388608, -1.0 / 8388608, 0.5}}},
		{"pcm32", riff(ck("fmt ", fmtChunk(1, 1, 48000, 32)), ck("data", i32s(math.MinInt32, math.MaxInt32, 1<<30, -(1<<29)))),
			48000, [][]float32{{-1, 1, 0.5, -0.25}}}, // 2^31−1 rounds to 2^31 in float32
		{"float32", riff(ck("fmt ", fmtChunk(3, 1, 16000, 32)), fact, ck("data", f32s(0.5, -0.25, 1.5, float32(math.Inf(-1)), 1e-30))),
			16000, [][]float32{{0.5, -0.25, 1.5, float32(math.Inf(-1)), 1e-30}}},
		{"float64", riff(ck("fmt ", fmtChunk(3, 1, 22050, 64)), ck("data", f64s(0.1, -2, 0.25))),
			22050, [][]float32{{float32(0.1), -2, 0.25}}},
		{"float32 fmt18", riff(ck("fmt ", append(fmtChunk(3, 1, 16000, 32), 0, 0)), fact, ck("data", f32s(0.125))),
			16000, [][]float32{{0.125}}},
		{"extensible pcm16 stereo", riff(ck("fmt ", fmtExt(1, 2, 48000, 16, 16)), ck("data", i16s(16384, -16384, 8192, 0))),
			48000, [][]float32{{0.5, 0.25}, {-0.5, 0}}},
		{"extensible 24-in-32", riff(ck("fmt ", fmtExt(1, 1, 96000, 32, 24)), ck("data", i32s(0x40000000, -0x40000000, 0x100))),
			96000, [][]float32{{0.5, -0.5, 1.0 / 8388608}}},
		{"extensible float", riff(ck("fmt ", fmtExt(3, 1, 24000, 32, 32)), ck("data", f32s(0.75, -1))),
			24000, [][]float32{{0.75, -1}}},
		{"extensible valid bits 0", riff(ck("fmt ", fmtExt(1, 1, 24000, 16, 0)), ck("data", i16s(8192))),
			24000, [][]float32{{0.25}}},
		{"stereo pcm16", riff(ck("fmt ", fmtChunk(1, 2, 24000, 16)), ck("data", i16s(1, 2, 3, 4, 5, 6))),
			24000, [][]float32{{1.0 / 32768, 3.0 / 32768, 5.0 / 32768}, {2.0 / 32768, 4.0 / 32768, 6.0 / 32768}}},
		{"3 channels pcm24", riff(ck("fmt ", fmtChunk(1, 3, 24000, 24)), ck("data", i24s(1, 2, 3, -1, -2, -3))),
			24000, [][]float32{{1.0 / 8388608, -1.0 / 8388608}, {2.0 / 8388608, -2.0 / 8388608}, {3.0 / 8388608, -3.0 / 8388608}}},
		{"extra chunks", riff(list, ck("fmt ", fmtChunk(1, 1, 24000, 16)), odd, fact, ck("data", i16s(100, -100)), ck("id3 ", []byte("tag"))),
			24000, [][]float32{{100.0 / 32768, -100.0 / 32768}}},
		{"data before fmt", riff(ck("data", i16s(7, 8)), ck("fmt ", fmtChunk(1, 1, 24000, 16))),
			24000, [][]float32{{7.0 / 32768, 8.0 / 32768}}},
		{"odd data size pads", riff(ck("fmt ", fmtChunk(1, 1, 8000, 8)), ck("data", []byte{128, 129, 130}), ck("LIST", []byte("INFO"))),
			8000, [][]float32{{0, 1.0 / 128, 2.0 / 128}}},
		{"partial last frame dropped", riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", []byte{0, 64, 0x12})),
			24000, [][]float32{{0.5}}},
		{"empty data", riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", nil)),
			24000, [][]float32{{}}},
		{"unknown length marker", riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), chunk{id: "data", data: i16s(3, 4), size: 0xFFFFFFFF}),
			24000, [][]float32{{3.0 / 32768, 4.0 / 32768}}},
		{"riff size lies", func() []byte {
			b := riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", i16s(5)))
			binary.LittleEndian.PutUint32(b[4:], 0) // streaming writers leave 0 here
			return b
		}(), 24000, [][]float32{{5.0 / 32768}}},
		{"rf64", func() []byte {
			ds64 := make([]byte, 28)
			binary.LittleEndian.PutUint64(ds64[8:], 4) // data size
			b := riff(ck("ds64", ds64), ck("fmt ", fmtChunk(1, 1, 24000, 16)), chunk{id: "data", data: i16s(9, 10), size: 0xFFFFFFFF})
			copy(b, "RF64")
			binary.LittleEndian.PutUint32(b[4:], 0xFFFFFFFF)
			return b
		}(), 24000, [][]float32{{9.0 / 32768, 10.0 / 32768}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(tc.file, "x.wav")
			if err != nil {
				t.Fatal(err)
			}
			if c.SampleRate != tc.rate {
				t.Errorf("rate %d, want %d", c.SampleRate, tc.rate)
			}
			if len(c.Channels) != len(tc.chans) {
				t.Fatalf("%d channels, want %d", len(c.Channels), len(tc.chans))
			}
			for i := range tc.chans {
				if !sameBits(c.Channels[i], tc.chans[i]) {
					t.Errorf("channel %d = %v, want %v", i, c.Channels[i], tc.chans[i])
				}
			}
		})
	}
}

// ---- malformed input ----

func TestDecodeMalformed(t *testing.T) {
	good16 := ck("fmt ", fmtChunk(1, 1, 24000, 16))
	truncated := riff(good16, chunk{id: "data", data: make([]byte, 400), size: 1000})
	tests := []struct {
		name string
		file []byte
		want string // the whole message after "bad.wav: " when it starts with "=", else a substring
	}{
		{"empty", nil, "=not a WAV file (only 0 bytes)"},
		{"short", []byte("RIFF\x04\x00"), "=not a WAV file (only 6 bytes)"},
		{"mp3", append([]byte("ID3\x03\x00\x00\x00\x00\x00\x00"), make([]byte, 20)...), "=no MP3 frame or FLAC stream found after the ID3 tag: it is followed by 20 bytes of no known format (starting 00 00 00 00 00 00 00 00)"},
		{"text", []byte("hello, this is not audio at all"), "=not a supported audio file (no WAV, AIFF, FLAC, MP3, Ogg, MP4/M4A, Matroska/WebM or MPEG audio header)"},
		{"avi", append([]byte("RIFF\x10\x00\x00\x00AVI LIST"), make([]byte, 8)...), `=not a WAV file (RIFF type "AVI ", want "WAVE")`},
		{"rifx", append([]byte("RIFX\x10\x00\x00\x00WAVE"), make([]byte, 8)...), "big-endian"},
		{"header only", riff(), "=no fmt chunk and no data chunk"},
		{"no data", riff(good16), "=no data chunk"},
		{"no fmt", riff(ck("data", i16s(1, 2))), "=no fmt chunk"},
		{"truncated data", truncated, "=truncated data chunk: header says 1000 bytes, file has 400"},
		{"truncated data odd", riff(good16, chunk{id: "data", data: i16s(1, 2, 3), size: 7}), "=truncated data chunk: header says 7 bytes, file has 6"},
		{"cut file", riff(good16, ck("data", make([]byte, 100)))[:80], "=truncated data chunk: header says 100 bytes, file has 36"},
		{"list lies", riff(chunk{id: "LIST", data: []byte("INFO"), size: 5000}, good16, ck("data", i16s(1))), `chunk "LIST" at offset 12 claims 5000 bytes, only`},
		{"fmt lies", riff(chunk{id: "fmt ", data: fmtChunk(1, 1, 24000, 16), size: 400}), "fmt chunk at offset 12 claims 400 bytes"},
		{"binary chunk id lies", riff(chunk{id: "\x00\x01\x02\x03", data: nil, size: 99}), "chunk 0x00010203 at offset 12 claims 99 bytes"},
		{"fmt too short", riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)[:14]), ck("data", i16s(1))), "=fmt chunk is 14 bytes, need at least 16"},
		{"zero channels", riff(ck("fmt ", fmtRaw(1, 0, 24000, 48000, 2, 16)), ck("data", i16s(1))), "=fmt chunk declares zero channels"},
		{"zero rate", riff(ck("fmt ", fmtRaw(1, 1, 0, 0, 2, 16)), ck("data", i16s(1))), "=fmt chunk declares a zero sample rate"},
		{"zero bits", riff(ck("fmt ", fmtRaw(1, 1, 24000, 48000, 2, 0)), ck("data", i16s(1))), "=fmt chunk declares 0 bits per sample"},
		{"block align mismatch", riff(ck("fmt ", fmtRaw(1, 2, 24000, 96000, 2, 16)), ck("data", i16s(1, 2))), "=block align 2 does not match 2 channel(s) × 2 byte(s) per sample"},
		{"block align zero", riff(ck("fmt ", fmtRaw(1, 1, 24000, 48000, 0, 16)), ck("data", i16s(1, 2))), "=block align 0 does not match 1 channel(s) × 2 byte(s) per sample"},
		{"pcm 40 bits", riff(ck("fmt ", fmtChunk(1, 1, 24000, 40)), ck("data", make([]byte, 10))), "unsupported PCM sample size: 40 bits"},
		{"float 16 bits", riff(ck("fmt ", fmtChunk(3, 1, 24000, 16)), ck("data", i16s(1))), "unsupported float sample size: 16 bits"},
		{"alaw 16 bits", riff(ck("fmt ", fmtChunk(6, 1, 8000, 16)), ck("data", i16s(1))), "=unsupported A-law sample size: 16 bits (want 8)"},
		{"gsm", riff(ck("fmt ", fmtChunk(0x31, 1, 8000, 0)), ck("data", []byte{1})), "=unsupported WAV encoding GSM 6.10 (format 0x0031); convert it to PCM or float"},
		{"mp3 in wav", riff(ck("fmt ", fmtChunk(0x55, 1, 8000, 8)), ck("data", []byte{1})), "MPEG layer 3 (format 0x0055)"},
		{"unknown tag", riff(ck("fmt ", fmtChunk(0x1234, 1, 8000, 8)), ck("data", []byte{1})), "format 0x1234"},
		{"extensible short", riff(ck("fmt ", append(fmtChunk(0xFFFE, 1, 24000, 16), 0, 0)), ck("data", i16s(1))), "WAVE_FORMAT_EXTENSIBLE fmt chunk is too short"},
		{"extensible guid", riff(ck("fmt ", func() []byte { b := fmtExt(1, 1, 24000, 16, 16); b[30] = 0x77; return b }()), ck("data", i16s(1))), "unsupported WAVE_FORMAT_EXTENSIBLE sub-format"},
		{"extensible mulaw 16 bits", riff(ck("fmt ", fmtExt(7, 1, 24000, 16, 16)), ck("data", i16s(1))), "µ-law sample size: 16 bits"},
		{"valid bits too large", riff(ck("fmt ", fmtExt(1, 1, 24000, 16, 24)), ck("data", i16s(1))), "valid bits per sample (24) exceed the container size (16 bits)"},
		{"two fmt", riff(good16, good16, ck("data", i16s(1))), "=more than one fmt chunk"},
		{"rf64 bad ds64", func() []byte {
			b := riff(ck("ds64", make([]byte, 8)), good16, ck("data", i16s(1)))
			copy(b, "RF64")
			return b
		}(), "bad ds64 chunk"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(tc.file, "bad.wav")
			if err == nil {
				t.Fatalf("no error, got %d channels at %d Hz", len(c.Channels), c.SampleRate)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("multi-line error %q", msg)
			}
			if !strings.HasPrefix(msg, "bad.wav: ") {
				t.Errorf("error %q does not name the file", msg)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			rest := strings.TrimPrefix(msg, "bad.wav: ")
			if w, exact := strings.CutPrefix(tc.want, "="); exact {
				if rest != w {
					t.Errorf("error %q, want %q", rest, w)
				}
			} else if !strings.Contains(rest, tc.want) {
				t.Errorf("error %q does not contain %q", rest, tc.want)
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(filepath.Join(dir, "missing.wav")); err == nil || !strings.Contains(err.Error(), "missing.wav") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(dir, "in.wav")
	if err := os.WriteFile(p, riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), chunk{id: "data", data: make([]byte, 400), size: 1000}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(p)
	if want := p + ": truncated data chunk: header says 1000 bytes, file has 400"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestReadFixtures(t *testing.T) {
	for _, tc := range []struct {
		path   string
		frames int
	}{
		{"../testdata/tiny/input.wav", 73200},
		{"../testdata/tiny/voices/TINYF0.wav", 48000},
	} {
		c, err := Read(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if c.SampleRate != 24000 || len(c.Channels) != 1 || c.Frames() != tc.frames {
			t.Errorf("%s: %d Hz, %d channels, %d frames", tc.path, c.SampleRate, len(c.Channels), c.Frames())
		}
		raw, _ := os.ReadFile(tc.path)
		// Cross-check against the raw 16-bit data (44-byte header: sox output).
		for i := 0; i < tc.frames; i += 997 {
			s := int16(binary.LittleEndian.Uint16(raw[44+2*i:]))
			if c.Channels[0][i] != float32(s)/32768 {
				t.Fatalf("%s: sample %d = %v, want %v", tc.path, i, c.Channels[0][i], float32(s)/32768)
			}
		}
		m, err := LoadMono(tc.path, 24000)
		if err != nil || !sameBits(m, c.Channels[0]) {
			t.Errorf("LoadMono at the file's rate is not the identity (%v)", err)
		}
	}
}

func TestLoadMonoStereoResampled(t *testing.T) {
	// Stereo 48 kHz: channel 0 a 1 kHz tone, channel 1 full-scale noise-like
	// values that must not leak into the result.
	n := 4800
	var data []byte
	for i := 0; i < n; i++ {
		l := int16(math.Round(16000 * math.Sin(2*math.Pi*1000*float64(i)/48000)))
		r := int16(30000 * (1 - 2*(i%2)))
		data = append(data, i16s(l, r)...)
	}
	p := filepath.Join(t.TempDir(), "st.wav")
	if err := os.WriteFile(p, riff(ck("fmt ", fmtChunk(1, 2, 48000, 16)), ck("data", data)), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadMono(p, 24000)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != n/2 {
		t.Fatalf("%d samples, want %d", len(m), n/2)
	}
	for i := 200; i < len(m)-200; i++ {
		want := 16000.0 / 32768 * math.Sin(2*math.Pi*1000*float64(i)/24000)
		if d := math.Abs(float64(m[i]) - want); d > 1e-4 {
			t.Fatalf("sample %d = %v, want %v", i, m[i], want)
		}
	}
	if _, err := LoadMono(p, 0); err == nil {
		t.Error("rate 0 accepted")
	}
}

func TestDecodeReaderAtShortReads(t *testing.T) {
	// A file that shrinks between Stat and ReadAt must give an error, not a
	// panic or zeros.
	b := riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", make([]byte, 1<<17)))
	_, err := DecodeReaderAt(bytes.NewReader(b[:1000]), int64(len(b)), "shrunk.wav")
	if err == nil || !strings.HasPrefix(err.Error(), "shrunk.wav: ") {
		t.Errorf("got %v", err)
	}
}

// LoadMono decodes only the channel it uses (a 64-channel file costs one
// channel's memory) and gives what the full decode's channel 0 holds; a
// named pipe is refused at once instead of waiting for a writer.
func TestLoadMonoFirstChannelAndPipes(t *testing.T) {
	const ch, frames = 64, 3000
	var samples []int16
	for i := 0; i < frames; i++ {
		for c := 0; c < ch; c++ {
			samples = append(samples, int16(i*7+c*1000))
		}
	}
	p := filepath.Join(t.TempDir(), "many.wav")
	os.WriteFile(p, riff(ck("fmt ", fmtExt(1, ch, 24000, 16, 16)), ck("data", i16s(samples...))), 0o644)
	full, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	mono, err := LoadMono(p, 24000)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(mono, full.Channels[0]) {
		t.Fatal("channel 0 differs from the full decode's")
	}
	first, err := read(p, true)
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c < ch; c++ {
		if first.Channels[c] != nil {
			t.Fatalf("channel %d decoded", c)
		}
	}
	fifo := filepath.Join(t.TempDir(), "fifo.wav")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no mkfifo here:", err)
	}
	if _, err := LoadMono(fifo, 24000); err == nil || !strings.Contains(err.Error(), "is a pipe") {
		t.Fatalf("fifo: %v", err)
	}
	if _, err := LoadMono("/dev/zero", 24000); err == nil || !strings.Contains(err.Error(), "is a device") {
		t.Fatalf("/dev/zero: %v", err)
	}
}

package audio

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and it
// either returns a well-formed clip or a one-line error naming the file.
func FuzzDecode(f *testing.F) {
	for _, s := range [][]byte{
		riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", i16s(1, -2, 3))),
		riff(ck("fmt ", fmtChunk(1, 2, 8000, 8)), ck("data", []byte{1, 2, 3, 4})),
		riff(ck("fmt ", fmtChunk(1, 1, 44100, 24)), ck("data", i24s(5, -6))),
		riff(ck("fmt ", fmtChunk(1, 1, 48000, 32)), ck("data", i32s(7))),
		riff(ck("fmt ", fmtChunk(3, 1, 16000, 32)), ck("fact", i32s(1)), ck("data", f32s(0.5))),
		riff(ck("fmt ", fmtChunk(3, 1, 16000, 64)), ck("data", f64s(0.5))),
		riff(ck("fmt ", fmtExt(3, 2, 24000, 32, 32)), ck("data", f32s(0.5, 1))),
		riff(ck("LIST", []byte("INFOx")), ck("fmt ", fmtChunk(1, 1, 24000, 16)), ck("data", i16s(1))),
		riff(ck("fmt ", fmtChunk(1, 1, 24000, 16)), chunk{id: "data", data: i16s(1), size: 0xFFFFFFFF}),
		[]byte("RIFF\x00\x00\x00\x00WAVE"),
		[]byte("RF64\xff\xff\xff\xffWAVEds64"),
	} {
		f.Add(s)
	}
	if b, err := os.ReadFile("../testdata/tiny/voices/TINYF0.wav"); err == nil {
		f.Add(b[:200])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data, "fuzz.wav")
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.wav: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		if c.SampleRate <= 0 || len(c.Channels) == 0 {
			t.Fatalf("accepted clip with rate %d and %d channels", c.SampleRate, len(c.Channels))
		}
		for _, ch := range c.Channels {
			if len(ch) != len(c.Channels[0]) {
				t.Fatal("channels of different lengths")
			}
		}
		// The samples come from the data: at most len(data) bytes of them.
		if int64(len(c.Channels))*int64(len(c.Channels[0])) > int64(len(data)) {
			t.Fatalf("%d×%d samples from %d bytes", len(c.Channels), len(c.Channels[0]), len(data))
		}
		// Whatever decodes also decodes identically through ReaderAt.
		c2, err := DecodeReaderAt(bytes.NewReader(data), int64(len(data)), "fuzz.wav")
		if err != nil || len(c2.Channels) != len(c.Channels) || !sameBits(c2.Channels[0], c.Channels[0]) {
			t.Fatal("Decode and DecodeReaderAt disagree")
		}
	})
}

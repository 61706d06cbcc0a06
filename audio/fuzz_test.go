package audio

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio/internal/mp3"
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
		// WAV samples come from the data: at most len(data) bytes of them.
		if sniff(data) == kindWAV && int64(len(c.Channels))*int64(len(c.Channels[0])) > int64(len(data)) {
			t.Fatalf("%d×%d samples from %d bytes", len(c.Channels), len(c.Channels[0]), len(data))
		}
		// Whatever decodes also decodes identically through ReaderAt.
		c2, err := DecodeReaderAt(bytes.NewReader(data), int64(len(data)), "fuzz.wav")
		if err != nil || len(c2.Channels) != len(c.Channels) || !sameBits(c2.Channels[0], c.Channels[0]) {
			t.Fatal("Decode and DecodeReaderAt disagree")
		}
	})
}

// fuzzCompressed is the body of the compressed-format fuzz targets: decoding
// under a small limit (2^20 samples) must not panic or hang, and either
// returns a well-formed clip within the limit or a one-line error naming
// the file.
func fuzzCompressed(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		b, err := os.ReadFile(fixtures + s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:min(len(b), 200)])
	}
	lim := Limits{MaxSamples: 1 << 20}
	// The native decoders are fuzzed, not ffmpeg: with no ffmpeg on PATH the
	// formats it would read fail at once (each run of it took 200 ms and
	// the Vorbis target managed 21 inputs in 30 s).
	path := os.Getenv("PATH")
	os.Setenv("PATH", "")
	f.Cleanup(func() { os.Setenv("PATH", path) })
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeReaderAtLimits(bytes.NewReader(data), int64(len(data)), "fuzz.bin", lim)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.bin: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		// An empty WAV is a valid file (its emptiness is refused later, by
		// the job); a compressed stream with no samples is an error.
		if c.SampleRate <= 0 || len(c.Channels) == 0 || c.Frames() == 0 && sniff(data) != kindWAV {
			t.Fatalf("accepted clip with rate %d, %d channels, %d frames", c.SampleRate, len(c.Channels), c.Frames())
		}
		if int64(len(c.Channels))*int64(c.Frames()) > lim.MaxSamples {
			t.Fatalf("%d×%d samples past the cap", len(c.Channels), c.Frames())
		}
		for _, ch := range c.Channels {
			if len(ch) != c.Frames() {
				t.Fatal("channels of different lengths")
			}
		}
	})
}

func FuzzDecodeFLAC(f *testing.F) {
	f.Add(silentFLAC(f, 8000, 2, 2, 2*65535))
	f.Add(silentFLAC(f, 48000, 1, 1, 0))
	for _, b := range flacFuzzSeeds() {
		f.Add(b)
	}
	fuzzCompressed(f, "flac_24k_s16_mono.flac", "flac_44k_s24_stereo.flac")
}

func FuzzDecodeMP3(f *testing.F) {
	// MPEG-2.5 (8 kHz mono, 11.025 kHz joint stereo with CRC) streams of
	// fixed pseudo-random frame bodies, beside the MPEG-1 and MPEG-2
	// fixtures.
	for _, hdr := range [][]byte{{0xFF, 0xE3, 0x18, 0xC0}, {0xFF, 0xE2, 0x20, 0x70}} {
		h, err := mp3.ParseHeader(hdr)
		if err != nil {
			f.Fatal(err)
		}
		seed := uint32(3)
		var b []byte
		for range 3 {
			b = append(b, hdr...)
			for range h.FrameBytes - 4 {
				seed = seed*1664525 + 1013904223
				b = append(b, byte(seed>>24))
			}
		}
		f.Add(b)
	}
	fuzzCompressed(f, "mp3_24k_mono.mp3", "mp3_44k_stereo.mp3")
}

func FuzzDecodeVorbis(f *testing.F) {
	fuzzCompressed(f, "vorbis_24k_mono.ogg", "vorbis_48k_stereo.ogg")
}

func FuzzDecodeG711(f *testing.F) {
	fuzzCompressed(f, "ulaw_8k.wav", "alaw_8k_stereo.wav")
}

// FuzzDecodeVorbisPackets fuzzes the Vorbis headers and audio packets
// themselves: one packet of a fixture is replaced by the input and the Ogg
// pages are rebuilt with valid checksums (a mutated page is otherwise
// refused by its checksum before any packet is read).
func FuzzDecodeVorbisPackets(f *testing.F) {
	pk, _ := oggPackets(nil, mustReadF(f, fixtures+"vorbis_48k_stereo.ogg"))
	for i, p := range pk {
		f.Add(uint8(i), p)
	}
	lim := Limits{MaxSamples: 1 << 18}
	f.Fuzz(func(t *testing.T, which uint8, p []byte) {
		if len(p) > 1<<16 {
			return
		}
		q := append([][]byte(nil), pk...)
		q[int(which)%len(q)] = p
		data := oggFile(q, 1968)
		c, err := DecodeReaderAtLimits(bytes.NewReader(data), int64(len(data)), "fuzz.ogg", lim)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.ogg: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		if c.Frames() == 0 || int64(len(c.Channels))*int64(c.Frames()) > lim.MaxSamples {
			t.Fatalf("%d×%d samples", len(c.Channels), c.Frames())
		}
	})
}

func mustReadF(f *testing.F, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

package audio

import (
	"bytes"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/audio/internal/mp3"
)

// mp3Frames returns the offsets of the frames of an MP3 file (after its
// ID3v2 tag) and the offset where they end.
func mp3Frames(t *testing.T, data []byte) ([]int, int) {
	t.Helper()
	off := 0
	if string(data[:3]) == "ID3" {
		off = 10 + (int(data[6])<<21 | int(data[7])<<14 | int(data[8])<<7 | int(data[9]))
	}
	var offs []int
	for off+4 <= len(data) {
		h, err := mp3.ParseHeader(data[off:])
		if err != nil || off+h.FrameBytes > len(data) {
			break
		}
		offs = append(offs, off)
		off += h.FrameBytes
	}
	if len(offs) < 3 {
		t.Fatalf("%d frames", len(offs))
	}
	return offs, off
}

func splice(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func sameClip(t *testing.T, what string, got, want *Clip) {
	t.Helper()
	if got.SampleRate != want.SampleRate || len(got.Channels) != len(want.Channels) || got.Frames() != want.Frames() {
		t.Fatalf("%s: %d Hz × %d × %d frames, want %d Hz × %d × %d", what, got.SampleRate, len(got.Channels), got.Frames(), want.SampleRate, len(want.Channels), want.Frames())
	}
	for c := range want.Channels {
		if !slices.Equal(got.Channels[c], want.Channels[c]) {
			t.Fatalf("%s: channel %d differs", what, c)
		}
	}
}

// Junk between frames or before the first (with a stray frame header), a
// tag in the middle, trailing ID3v1 and APE tags:
// the frames around them decode as without them; a cut last frame is
// dropped, what came before kept.
func TestMP3Resync(t *testing.T) {
	for _, fixture := range []string{"mp3_44k_stereo.mp3", "mp3_24k_mono.mp3"} {
		data := mustRead(t, fixtures+fixture)
		want, err := Decode(data, "x.mp3")
		if err != nil {
			t.Fatal(err)
		}
		offs, end := mp3Frames(t, data)
		k := offs[2]
		junk := append(bytes.Repeat([]byte{0}, 100), 0xFF, 0xFB, 0x90, 0x64, 1, 2, 3) // a stray header
		id3 := append([]byte("ID3\x03\x00\x00\x00\x00\x00\x20"), bytes.Repeat([]byte{0xFF}, 32)...)
		v1 := append([]byte("TAG"), bytes.Repeat([]byte{0xFF}, 125)...)
		ape := append([]byte("APETAGEX\xd0\x07\x00\x00"), bytes.Repeat([]byte{0}, 20)...)
		for name, in := range map[string][]byte{
			"junk":       splice(data[:k], junk, data[k:]),
			"junk first": splice(data[:offs[0]], junk, data[offs[0]:]),
			"id3 inside": splice(data[:k], id3, data[k:]),
			"trailing":   splice(data[:end], ape, v1),
		} {
			got, err := Decode(in, "x.mp3")
			if err != nil {
				t.Fatalf("%s %s: %v", fixture, name, err)
			}
			sameClip(t, fixture+" "+name, got, want)
		}
		// Cut inside the last frame: the frames before it, trimmed the same
		// way at the end.
		cut, err := Decode(data[:offs[len(offs)-1]+100], "x.mp3")
		if err != nil {
			t.Fatal(err)
		}
		h, _ := mp3.ParseHeader(data[offs[0]:])
		n := want.Frames() - h.Samples
		if cut.Frames() != n {
			t.Fatalf("%s cut: %d frames, want %d", fixture, cut.Frames(), n)
		}
		for c := range want.Channels {
			if !slices.Equal(cut.Channels[c], want.Channels[c][:n]) {
				t.Fatalf("%s cut: channel %d differs", fixture, c)
			}
		}
	}
}

// A frame with invalid side information decodes as silence in its place:
// the length stays, the frames before are untouched. A file with no
// decodable frame is an error.
func TestMP3CorruptFrame(t *testing.T) {
	data := bytes.Clone(mustRead(t, fixtures+"mp3_44k_stereo.mp3"))
	want, err := Decode(data, "x.mp3")
	if err != nil {
		t.Fatal(err)
	}
	offs, _ := mp3Frames(t, data)
	// big_values (after main_data_begin, private bits, scfsi and
	// part2_3_length: bits 32 to 40 of the side info) set to 511.
	bad := bytes.Clone(data)
	si := offs[3] + 4
	bad[si+4] = 0xFF
	bad[si+5] |= 0x80
	got, err := Decode(bad, "x.mp3")
	if err != nil {
		t.Fatal(err)
	}
	if got.Frames() != want.Frames() {
		t.Fatalf("%d frames, want %d", got.Frames(), want.Frames())
	}
	// The corrupt frame's samples start at frame 3 minus the trimmed
	// start (the Xing frame, encoder delay + 529).
	x := mustXing(t, data)
	start := 3*1152 - (1152 + x.delay + mp3Decoder)
	for c := range want.Channels {
		if !slices.Equal(got.Channels[c][:start], want.Channels[c][:start]) {
			t.Fatalf("channel %d differs before the corrupt frame", c)
		}
		if slices.Equal(got.Channels[c], want.Channels[c]) {
			t.Fatalf("channel %d: the corrupt frame made no difference", c)
		}
	}
	// Every frame corrupt.
	for _, o := range offs[1:] {
		bad[o+4+4] = 0xFF
		bad[o+4+5] |= 0x80
	}
	_, err = Decode(bad, "x.mp3")
	oneLineErr(t, err, "x.mp3: corrupt MP3 data: no frame decodes (offset ")
}

func mustXing(t *testing.T, data []byte) xingInfo {
	t.Helper()
	offs, _ := mp3Frames(t, data)
	h, _ := mp3.ParseHeader(data[offs[0]:])
	x, ok := parseXing(data[offs[0]:offs[1]], mpegHeader{version: h.Version, crc: h.CRC, mono: h.Channels() == 1})
	if !ok || !x.lame {
		t.Fatal("no LAME tag")
	}
	return x
}

// MPEG-2.5 decodes natively (no ffmpeg on PATH), as do streams that switch
// between mono and stereo frames; free format is refused in one line.
func TestMP3Streams(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	silent := func(hdr []byte) []byte {
		h, err := mp3.ParseHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		return append(bytes.Clone(hdr), make([]byte, h.FrameBytes-4)...)
	}
	for _, c := range []struct {
		name   string
		frames [][]byte
		rate   int
		ch     int
		n      int
	}{
		{"MPEG-2.5 8 kHz mono", [][]byte{{0xFF, 0xE3, 0x88, 0xC0}, {0xFF, 0xE3, 0x88, 0xC0}}, 8000, 1, 1152},
		{"MPEG-2.5 11.025 kHz stereo", [][]byte{{0xFF, 0xE3, 0x80, 0x00}, {0xFF, 0xE3, 0x80, 0x00}, {0xFF, 0xE3, 0x82, 0x00}}, 11025, 2, 1728},
		{"MPEG-2.5 12 kHz joint", [][]byte{{0xFF, 0xE3, 0x84, 0x40}, {0xFF, 0xE2, 0x84, 0x40}}, 12000, 2, 1152},
		{"stereo then mono", [][]byte{{0xFF, 0xFB, 0x90, 0x00}, {0xFF, 0xFB, 0x90, 0xC0}, {0xFF, 0xFB, 0x90, 0x00}}, 44100, 2, 3456},
		{"mono then stereo", [][]byte{{0xFF, 0xF3, 0x80, 0xC0}, {0xFF, 0xF3, 0x80, 0x00}}, 22050, 1, 1152},
	} {
		var in []byte
		for _, f := range c.frames {
			in = append(in, silent(f)...)
		}
		got, err := Decode(in, "x.mp3")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.SampleRate != c.rate || len(got.Channels) != c.ch || got.Frames() != c.n {
			t.Fatalf("%s: %d Hz × %d × %d frames, want %d Hz × %d × %d", c.name, got.SampleRate, len(got.Channels), got.Frames(), c.rate, c.ch, c.n)
		}
		for _, ch := range got.Channels {
			if slices.ContainsFunc(ch, func(v float32) bool { return v != 0 }) {
				t.Fatalf("%s: silent frames decode to sound", c.name)
			}
		}
	}
	// (Free format after an ID3 tag: without one, the content is not
	// recognised as MP3 in the first place.)
	free := splice([]byte("ID3\x03\x00\x00\x00\x00\x00\x00"), []byte{0xFF, 0xFB, 0x00, 0x00}, make([]byte, 400))
	_, err := Decode(free, "x.mp3")
	oneLineErr(t, err, "x.mp3: free-format MP3 (bitrate index 0) is not supported")
}

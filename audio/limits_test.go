package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A FLAC declaring 2 h 47 min (a file of silence that long is a few
// hundred KB; it once reached 3.9 GB and a fatal out-of-memory) is refused
// from its header, before decoding: one line saying how long it is and how
// long a file the limit allows, and almost nothing allocated. (Its first
// frames only are written: the encoder's MD5 over 2 h 47 min takes 10 s.)
func TestLongFLACRefusedFromHeader(t *testing.T) {
	frames := 10020 * 48000 / 65535
	data := silentFLAC(t, 48000, 1, 3, uint64(frames*65535))
	var err error
	n := allocated(func() { _, err = Decode(data, "long.flac") })
	want := "long.flac: decodes to 2 h 46 min at 48000 Hz, more than the 1 h 33 min this job can hold (1.0 GiB of samples); cut the file (ffmpeg -i long.flac -t 5592.4 out.wav) or give the job more memory"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant  %s", err, want)
	}
	if n > 16<<20 {
		t.Fatalf("refusing it allocated %d MB", n>>20)
	}
	// A caller's limit: one minute.
	_, err = DecodeReaderAtLimits(bytes.NewReader(data), int64(len(data)), "long.flac", Limits{MaxSamples: 48000 * 60})
	if err == nil || !strings.Contains(err.Error(), "more than the 1 min 0 s this job can hold (11 MiB of samples)") {
		t.Fatalf("error %v", err)
	}
}

// Without a declared length the limit stops decoding as it is reached, and
// the store never grows past it.
func TestFLACUnknownLengthStopsAtLimit(t *testing.T) {
	data := silentFLAC(t, 24000, 2, 40, 0) // 2.6 M frames, stereo
	lim := Limits{MaxSamples: 1 << 20}
	var err error
	n := allocated(func() { _, err = DecodeReaderAtLimits(bytes.NewReader(data), int64(len(data)), "x.flac", lim) })
	if err == nil || !strings.HasPrefix(err.Error(), "x.flac: decodes to more than the 21 s at 24000 Hz this job can hold (4 MiB of samples)") {
		t.Fatalf("error %v", err)
	}
	// The samples (4 MiB at most) plus the decoder's buffers (one frame of
	// 65535 int64 per channel): well under 4× the limit.
	if n > 16*(1<<20)*4 {
		t.Fatalf("allocated %d MB", n>>20)
	}
	// Under the limit it decodes in full, exactly.
	c, err := DecodeReaderAtLimits(bytes.NewReader(data), int64(len(data)), "x.flac", Limits{MaxSamples: 2 * 40 * 65535})
	if err != nil || c.Frames() != 40*65535 || len(c.Channels) != 2 {
		t.Fatalf("%v, %d frames", err, c.Frames())
	}
}

// A FLAC whose frames run past the length STREAMINFO declares is corrupt
// (else the up-front check could be dodged by a small declared length).
func TestFLACPastDeclaredLength(t *testing.T) {
	data := silentFLAC(t, 24000, 1, 4, 65535)
	_, err := Decode(data, "x.flac")
	if err == nil || err.Error() != "x.flac: corrupt FLAC stream: frame 1 goes past the 65535 samples its header declares" {
		t.Fatalf("error %v", err)
	}
}

// oggPackets returns the packets of an Ogg file's first stream and the
// granule position of its last page.
func oggPackets(t *testing.T, data []byte) (pk [][]byte, last int64) {
	d := &oggDemux{r: bytes.NewReader(data), size: int64(len(data)), name: "x"}
	for {
		p, g, err := d.packet()
		if err != nil {
			break
		}
		pk = append(pk, p)
		if g >= 0 {
			last = g
		}
	}
	return pk, last
}

// oggFile builds an Ogg stream of the given packets: the three headers on
// a page each, then the audio packets, up to 200 lacing values a page, the
// last page with granule position last and the others with none (−1).
func oggFile(pk [][]byte, last int64) []byte {
	var pages [][][]byte
	for _, p := range pk[:3] {
		pages = append(pages, [][]byte{p})
	}
	var cur [][]byte
	nseg := 0
	for _, p := range pk[3:] {
		n := len(p)/255 + 1
		if nseg+n > 200 && len(cur) > 0 {
			pages = append(pages, cur)
			cur, nseg = nil, 0
		}
		cur = append(cur, p)
		nseg += n
	}
	pages = append(pages, cur)
	var out []byte
	for i, pg := range pages {
		var seg, body []byte
		for _, p := range pg {
			n := len(p)
			for ; n >= 255; n -= 255 {
				seg = append(seg, 255)
			}
			seg = append(seg, byte(n))
			body = append(body, p...)
		}
		h := make([]byte, 27)
		copy(h, "OggS")
		g := int64(-1)
		switch {
		case i == 0:
			h[5], g = 2, 0
		case i < 3:
			g = 0
		case i == len(pages)-1:
			h[5], g = 4, last
		}
		binary.LittleEndian.PutUint64(h[6:], uint64(g))
		binary.LittleEndian.PutUint32(h[14:], 0x1234)
		binary.LittleEndian.PutUint32(h[18:], uint32(i))
		h[26] = byte(len(seg))
		h = append(append(h, seg...), body...)
		var crc uint32
		for _, b := range h {
			crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^b]
		}
		binary.LittleEndian.PutUint32(h[22:], crc)
		out = append(out, h...)
	}
	return out
}

// setBits writes v into n bits of b at bit position pos (Vorbis order).
func setBits(b []byte, pos, n int, v uint32) {
	for i := 0; i < n; i++ {
		bit := byte(v >> i & 1)
		b[(pos+i)>>3] = b[(pos+i)>>3]&^(1<<((pos+i)&7)) | bit<<((pos+i)&7)
	}
}

// Vorbis headers that count more than they hold (a comment header claiming
// 2^32 − 1 comments asked the library for 64 GiB, a fatal out-of-memory;
// codebooks of 2^24 entries or of zero dimensions) are refused in one line
// before the library reads them, allocating almost nothing.
func TestVorbisHeaderBombs(t *testing.T) {
	pk, _ := oggPackets(t, mustRead(t, fixtures+"vorbis_24k_mono.ogg"))
	if len(pk) < 4 {
		t.Fatalf("%d packets", len(pk))
	}
	rebuild := func(i int, p []byte) []byte {
		q := append([][]byte(nil), pk...)
		q[i] = p
		return oggFile(q, 1440)
	}
	// The unmodified packets re-paged decode as the fixture does.
	want, err := Decode(mustRead(t, fixtures+"vorbis_24k_mono.ogg"), "x")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(rebuild(1, pk[1]), "x")
	if err != nil || !sameBits(got.Channels[0], want.Channels[0]) {
		t.Fatalf("re-paged fixture: %v", err)
	}

	comments := append([]byte("\x03vorbis"), 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1)
	setup := func(pos, n int, v uint32) []byte {
		b := bytes.Clone(pk[2])
		setBits(b[7:], pos, n, v)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"4G comments", rebuild(1, comments), "x: bad Ogg Vorbis header: comment header is cut off or counts more than it holds"},
		{"huge vendor", rebuild(1, append([]byte("\x03vorbis"), 0xFF, 0xFF, 0xFF, 0x7F)), "x: bad Ogg Vorbis header: comment header is cut off or counts more than it holds"},
		{"2^24 entries", rebuild(2, setup(48, 24, 1<<24-1)), "x: bad Ogg Vorbis setup header: codebook 0: 16777215 entries of"},
		{"0 dimensions", rebuild(2, setup(32, 16, 0)), "x: bad Ogg Vorbis setup header: codebook 0: "},
		{"0 entries", rebuild(2, setup(48, 24, 0)), "x: bad Ogg Vorbis setup header: codebook 0: 0 entries"},
		{"no sync", rebuild(2, setup(8, 24, 0)), "x: bad Ogg Vorbis setup header: codebook 0 has no sync pattern"},
		{"cut setup", rebuild(2, pk[2][:len(pk[2])/2]), "x: bad Ogg Vorbis setup header: "},
		{"bad channels", rebuild(0, append(append([]byte(nil), pk[0][:11]...), append([]byte{0}, pk[0][12:]...)...)), "x: bad Ogg Vorbis header: zero channels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Decode(tc.data, "x") })
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
			if n > 8<<20 {
				t.Fatalf("allocated %d MB", n>>20)
			}
		})
	}
}

// The length an Ogg Vorbis file declares (its last page's granule position)
// is checked against the limit before decoding, and a stream that decodes
// past it is corrupt, so a file over the limit is refused at once whatever
// it holds.
func TestVorbisDeclaredLength(t *testing.T) {
	pk, last := oggPackets(t, mustRead(t, fixtures+"vorbis_24k_mono.ogg"))
	if last != 1440 {
		t.Fatalf("fixture's last granule %d", last)
	}
	long := oggFile(pk, 24000*3600*5) // 5 hours
	var err error
	n := allocated(func() { _, err = Decode(long, "long.ogg") })
	if err == nil || !strings.HasPrefix(err.Error(), "long.ogg: decodes to 5 h 0 min at 24000 Hz, more than the 3 h 6 min this job can hold (1.0 GiB of samples)") {
		t.Fatalf("error %v", err)
	}
	if n > 8<<20 {
		t.Fatalf("allocated %d MB", n>>20)
	}
	// A last granule smaller than what the packets decode to: the stream
	// is cut there (as the spec says), and one far smaller is corrupt.
	short := oggFile(pk, 1000)
	c, err := Decode(short, "x")
	if err != nil || c.Frames() != 1000 {
		t.Fatalf("%v, %d frames", err, c.Frames())
	}
	many := append([][]byte(nil), pk[:3]...)
	for i := 0; i < 40; i++ {
		many = append(many, pk[3:]...)
	}
	_, err = Decode(oggFile(many, 1440), "x")
	if err == nil || !strings.HasPrefix(err.Error(), "x: corrupt Ogg Vorbis stream: it decodes past the 1440 samples its last page declares") {
		t.Fatalf("error %v", err)
	}
}

// The Xing frame count of an MP3 is checked against the limit up front.
func TestMP3XingLength(t *testing.T) {
	data := bytes.Clone(mustRead(t, fixtures+"mp3_24k_mono.mp3"))
	off, err := skipID3(bytes.NewReader(data), int64(len(data)), "x")
	if err != nil {
		t.Fatal(err)
	}
	h, ok := parseMPEGHeader(data[off:])
	if !ok {
		t.Fatal("no frame header")
	}
	x, ok := parseXing(data[off:off+int64(h.frameBytes)], h)
	if !ok || x.frames == 0 {
		t.Fatal("fixture has no Xing frame count")
	}
	p := bytes.Index(data[off:], []byte("Info"))
	if p < 0 {
		p = bytes.Index(data[off:], []byte("Xing"))
	}
	binary.BigEndian.PutUint32(data[off+int64(p)+8:], 1<<24) // frames
	_, err = Decode(data, "x.mp3")
	if err == nil || !strings.HasPrefix(err.Error(), "x.mp3: decodes to 111 h 50 min at 24000 Hz, more than the 3 h 6 min this job can hold") {
		t.Fatalf("error %v", err)
	}
}

// LoadMonoLimits bounds the resampled copy too: an 8 kHz file that fits
// the limit at 8 kHz but not at 24 kHz is refused before resampling.
func TestLoadMonoLimitsResampled(t *testing.T) {
	samples := make([]float32, 8000)
	path := filepath.Join(t.TempDir(), "in.wav")
	var buf bytes.Buffer
	if err := EncodePCM16(&buf, samples, 8000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := LoadMonoLimits(context.Background(), path, 24000, Limits{MaxSamples: 24000})
	if err != nil || len(x) != 24000 {
		t.Fatalf("%v, %d samples", err, len(x))
	}
	_, err = LoadMonoLimits(context.Background(), path, 24000, Limits{MaxSamples: 20000})
	if err == nil || !strings.HasPrefix(err.Error(), path+": decodes to 1.00 s at 24000 Hz, more than the 0.83 s this job can hold") {
		t.Fatalf("error %v", err)
	}
	// The decoded file itself over the limit.
	_, err = LoadMonoLimits(context.Background(), path, 24000, Limits{MaxSamples: 4000})
	if err == nil || !strings.HasPrefix(err.Error(), path+": decodes to 1.00 s at 8000 Hz, more than the 0.50 s") {
		t.Fatalf("error %v", err)
	}
}

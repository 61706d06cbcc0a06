package audio

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures under testdata/audio/ and their .ref.wav reference decodings
// (ffmpeg's, 32-bit float) are made by scripts/make_audio_fixtures.sh.
const fixtures = "../testdata/audio/"

// Tolerances against ffmpeg's decoding, measured on the fixtures (max abs
// difference 3.6e-7 for MP3: pp-offline's float decoder against ffmpeg's
// mp3float; 1.5e-7 for Vorbis) with some headroom. Lossless formats must be
// bit-identical.
const (
	mp3MaxAbs    = 1e-6
	mp3MinSNRdB  = 110
	vorbisMaxAbs = 1e-6
)

func TestDecodersMatchFFmpeg(t *testing.T) {
	for _, tc := range []struct {
		file     string
		rate     int
		channels int
		lossless bool
		frames   int // expected length; 0 = the reference's
	}{
		{"flac_24k_s16_mono.flac", 24000, 1, true, 0},
		{"flac_44k_s24_stereo.flac", 44100, 2, true, 0},
		{"ulaw_8k.wav", 8000, 1, true, 0},
		{"alaw_8k_stereo.wav", 8000, 2, true, 0},
		{"ulaw_all_codes.wav", 8000, 1, true, 256},
		{"alaw_all_codes.wav", 8000, 1, true, 256},
		{"mp3_24k_mono.mp3", 24000, 1, false, 0},
		{"mp3_44k_stereo.mp3", 44100, 2, false, 0},
		// Vorbis: the encoded length (0.06 s at 24 kHz; 0.04 s at 24 kHz resampled
		// to 48 kHz, 1968 samples with the resampler's tail), see decode.go.
		{"vorbis_24k_mono.ogg", 24000, 1, false, 1440},
		{"vorbis_48k_stereo.ogg", 48000, 2, false, 1968},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Read(fixtures + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := Read(fixtures + tc.file + ".ref.wav")
			if err != nil {
				t.Fatal(err)
			}
			if got.SampleRate != tc.rate || ref.SampleRate != tc.rate {
				t.Fatalf("rate %d, reference %d, want %d", got.SampleRate, ref.SampleRate, tc.rate)
			}
			if len(got.Channels) != tc.channels || len(ref.Channels) != tc.channels {
				t.Fatalf("%d channels, reference %d, want %d", len(got.Channels), len(ref.Channels), tc.channels)
			}
			want := tc.frames
			if want == 0 {
				want = ref.Frames()
			}
			if got.Frames() != want {
				t.Fatalf("%d frames, want %d (reference %d)", got.Frames(), want, ref.Frames())
			}
			if ref.Frames() < want {
				t.Fatalf("reference has %d frames, fewer than %d", ref.Frames(), want)
			}
			var maxAbs, sig, noise float64
			for c := range got.Channels {
				g, r := got.Channels[c], ref.Channels[c][:want]
				if tc.lossless {
					if !sameBits(g, r) {
						for i := range g {
							if g[i] != r[i] {
								t.Fatalf("channel %d sample %d = %v, ffmpeg %v", c, i, g[i], r[i])
							}
						}
					}
					continue
				}
				for i := range g {
					d := float64(g[i]) - float64(r[i])
					maxAbs = math.Max(maxAbs, math.Abs(d))
					sig += float64(r[i]) * float64(r[i])
					noise += d * d
				}
			}
			if tc.lossless {
				return
			}
			snr := 10 * math.Log10(sig/noise)
			t.Logf("max abs difference from ffmpeg %.3g, SNR %.1f dB", maxAbs, snr)
			switch {
			case strings.HasSuffix(tc.file, ".mp3"):
				if maxAbs > mp3MaxAbs || snr < mp3MinSNRdB {
					t.Fatalf("max abs %.3g (limit %g), SNR %.1f dB (limit %d)", maxAbs, mp3MaxAbs, snr, mp3MinSNRdB)
				}
			default:
				if maxAbs > vorbisMaxAbs {
					t.Fatalf("max abs %.3g (limit %g)", maxAbs, vorbisMaxAbs)
				}
			}
		})
	}
}

// The FLAC fixture is the 16-bit PCM excerpt it was made from, exactly: the
// same float32 values as the WAV decoding of the same samples.
func TestFLACEqualsItsWAV(t *testing.T) {
	f, err := Read(fixtures + "flac_24k_s16_mono.flac")
	if err != nil {
		t.Fatal(err)
	}
	w, err := Read("../testdata/tiny/input.wav")
	if err != nil {
		t.Fatal(err)
	}
	// The excerpt starts 1.0 s in (scripts/make_audio_fixtures.sh).
	if !sameBits(f.Channels[0], w.Channels[0][24000:24000+f.Frames()]) {
		t.Fatal("FLAC excerpt differs from the WAV samples it was encoded from")
	}
}

// Detection is by content: a file named .wav that holds FLAC (or MP3, or
// Vorbis) decodes the same, and so does one without an extension.
func TestDetectByContent(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"flac_24k_s16_mono.flac", "mp3_24k_mono.mp3", "vorbis_24k_mono.ogg", "ulaw_8k.wav"} {
		data, err := os.ReadFile(fixtures + f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode(data, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"disguised.wav", "noext", "x.mp3"} {
			p := filepath.Join(dir, n)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Read(p)
			if err != nil {
				t.Fatalf("%s as %s: %v", f, n, err)
			}
			if got.SampleRate != want.SampleRate || !sameBits(got.Channels[0], want.Channels[0]) {
				t.Fatalf("%s as %s decodes differently", f, n)
			}
		}
		// LoadMono, the entry point of the main job and of voice prompts.
		p := filepath.Join(dir, "disguised.wav")
		os.WriteFile(p, data, 0o644)
		x, err := LoadMono(p, want.SampleRate)
		if err != nil || !sameBits(x, want.Channels[0]) {
			t.Fatalf("LoadMono(%s): %v", f, err)
		}
	}
}

func TestUnsupportedCompressed(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // without ffmpeg (ffmpeg_test.go tests with it)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"opus", mustRead(t, fixtures+"opus_24k.opus"), "x: Ogg Opus is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i x -c:a pcm_f32le out.wav"},
		{"ogg flac", oggPage("\x7fFLAC\x01\x00"), "x: Ogg FLAC is not read natively and ffmpeg is not on PATH"},
		{"ogg other", oggPage("\x80theora"), "x: Ogg (no Vorbis stream) is not read natively and ffmpeg is not on PATH"},
		{"mp2", append([]byte{0xFF, 0xFD, 0x90, 0x00}, make([]byte, 400)...), "x: MPEG audio layer I/II (MP1/MP2) is not read natively and ffmpeg is not on PATH"},
		{"id3 too big", append([]byte("ID3\x03\x00\x00\x7f\x7f\x7f\x7f"), make([]byte, 30)...), "x: truncated ID3 tag: it claims 268435465 bytes, the file has 40"},
		{"id3 bad size", append([]byte("ID3\x03\x00\x00\x80\x00\x00\x00"), make([]byte, 30)...), "x: corrupt ID3 tag at offset 0 (bad size)"},
		{"flac header only", []byte("fLaC"), "x: bad FLAC header"},
		{"vorbis header only", mustRead(t, fixtures+"vorbis_24k_mono.ogg")[:60], "x: bad Ogg Vorbis header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, "x")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

// oggPage builds a first Ogg page holding one packet.
func oggPage(packet string) []byte {
	b := []byte("OggS\x00\x02")
	b = append(b, make([]byte, 20)...) // granule, serial, sequence, CRC
	b = append(b, 1, byte(len(packet)))
	return append(b, packet...)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Truncated and corrupted compressed files: a one-line error naming the file
// or a clip (a decoder may keep what it decoded before a cut, as ffmpeg
// does), never a panic. Truncated FLAC is always an error: the stream header
// records the length.
func TestCorruptCompressed(t *testing.T) {
	for _, f := range []string{"flac_24k_s16_mono.flac", "flac_44k_s24_stereo.flac", "mp3_24k_mono.mp3", "mp3_44k_stereo.mp3", "vorbis_24k_mono.ogg", "vorbis_48k_stereo.ogg"} {
		data := mustRead(t, fixtures+f)
		check := func(what string, b []byte) error {
			t.Helper()
			c, err := Decode(b, "bad."+f)
			if err != nil {
				if msg := err.Error(); !strings.HasPrefix(msg, "bad."+f+": ") || strings.Contains(msg, "\n") {
					t.Fatalf("%s: bad error %q", what, msg)
				}
				return err
			}
			if c.Frames() == 0 || c.SampleRate <= 0 {
				t.Fatalf("%s: empty clip without an error", what)
			}
			return nil
		}
		for cut := 0; cut < len(data); cut += 1 + len(data)/200 {
			err := check("cut", data[:cut])
			if strings.HasPrefix(f, "flac") && err == nil {
				t.Fatalf("%s cut at %d/%d bytes decoded without an error", f, cut, len(data))
			}
		}
		for i := 0; i < len(data); i += 1 + len(data)/300 {
			b := bytes.Clone(data)
			b[i] ^= 0x5A
			check("flip", b)
			b[i] = 0xFF
			check("0xFF", b)
		}
	}
}

func TestTruncatedFLACMessage(t *testing.T) {
	data := mustRead(t, fixtures+"flac_44k_s24_stereo.flac")
	_, err := Decode(data[:len(data)-100], "cut.flac")
	if err == nil || !strings.HasPrefix(err.Error(), "cut.flac: truncated FLAC stream") {
		t.Fatalf("error %v", err)
	}
}

// A compressed file may decode to far more samples than its size; the cap
// stops it before memory runs out.
func TestDecodedSizeCap(t *testing.T) {
	defer func(n int64) { maxDecodedSamples = n }(maxDecodedSamples)
	maxDecodedSamples = 1000
	for _, f := range []string{"flac_24k_s16_mono.flac", "mp3_24k_mono.mp3", "vorbis_24k_mono.ogg"} {
		_, err := Read(fixtures + f)
		if err == nil || !strings.Contains(err.Error(), "more than the 0.04 s this job can hold (4 KiB of samples)") {
			t.Fatalf("%s: error %v", f, err)
		}
	}
}

// The committed .ref.wav files are ffmpeg's decoding of the committed
// fixtures (skipped where ffmpeg is not installed, as in CI).
func TestFixtureReferencesAreFFmpegs(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	dir := t.TempDir()
	out, err := exec.Command("sh", "../scripts/make_audio_fixtures.sh", "decode", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	refs, _ := filepath.Glob(fixtures + "*.ref.wav")
	if len(refs) < 10 {
		t.Fatalf("only %d reference files", len(refs))
	}
	for _, r := range refs {
		want := mustRead(t, r)
		got := mustRead(t, filepath.Join(dir, filepath.Base(r)))
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not ffmpeg's decoding of its fixture (rerun scripts/make_audio_fixtures.sh)", r)
		}
	}
}

// Sniff names what the reader takes a file for, from its content alone.
func TestSniffNames(t *testing.T) {
	wav := make([]byte, 44)
	copy(wav, "RIFF")
	copy(wav[8:], "WAVEfmt ")
	for head, want := range map[string]string{
		string(wav):                        "WAV",
		"fLaC\x00\x00\x00\x22":             "FLAC",
		"FORM\x00\x00\x00\x10AIFC":         "AIFF",
		"\x1a\x45\xdf\xa3\x01":             "Matroska/WebM",
		"ID3\x04\x00\x00\x00\x00\x00\x00":  "MP3",
		"plain text, not audio at all....": "",
		"":                                 "",
	} {
		if got := Sniff([]byte(head)); got != want {
			t.Errorf("Sniff(%q) = %q, want %q", head[:min(len(head), 12)], got, want)
		}
	}
}

// A free-format MP3 (bitrate index 0) with no ID3 tag is recognised as MP3
// and refused by the decoder's own message, not as an unknown format.
func TestFreeFormatMP3Named(t *testing.T) {
	b := append([]byte{0xFF, 0xFB, 0x00, 0x00}, make([]byte, 2000)...)
	_, err := Decode(b, "free.mp3")
	if err == nil || !strings.Contains(err.Error(), "free.mp3") || !strings.Contains(err.Error(), "free-format") {
		t.Fatalf("got %v", err)
	}
}

// id3Tag is an ID3v2.3 tag of n bytes after its header (zeros: padding),
// with the footer flag and 10 footer bytes when footer is set.
func id3Tag(n int, footer bool) []byte {
	t := []byte{'I', 'D', '3', 3, 0, 0, byte(n >> 21 & 0x7F), byte(n >> 14 & 0x7F), byte(n >> 7 & 0x7F), byte(n & 0x7F)}
	t = append(t, make([]byte, n)...)
	if footer {
		t[3], t[5] = 4, 0x10
		t = append(t, "3DI\x04\x00\x10"...)
		t = append(t, t[6:10]...)
	}
	return t
}

// A FLAC file behind ID3v2 tags (taggers write them; flac -d and ffmpeg
// skip them) decodes to the samples of the same file without them, bit
// for bit: a small tag, an empty one, one with a footer, one longer than
// what sniffing reads, two tags; from memory and from a file.
func TestFLACAfterID3(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"flac_24k_s16_mono.flac", "flac_44k_s24_stereo.flac"} {
		data := mustRead(t, fixtures+f)
		want, err := Decode(data, "x.flac")
		if err != nil {
			t.Fatal(err)
		}
		for name, tag := range map[string][]byte{
			"small":    id3Tag(10, false),
			"empty":    id3Tag(0, false),
			"footer":   id3Tag(30, true),
			"long":     id3Tag(5000, false),
			"two tags": splice(id3Tag(20, false), id3Tag(300, true)),
		} {
			file := splice(tag, data)
			p := filepath.Join(dir, "tagged.flac")
			if err := os.WriteFile(p, file, 0o644); err != nil {
				t.Fatal(err)
			}
			for how, decode := range map[string]func() (*Clip, error){
				"Decode": func() (*Clip, error) { return Decode(file, "x.flac") },
				"Read":   func() (*Clip, error) { return Read(p) },
			} {
				c, err := decode()
				if err != nil {
					t.Fatalf("%s, %s tag, %s: %v", f, name, how, err)
				}
				if c.SampleRate != want.SampleRate || len(c.Channels) != len(want.Channels) || c.Frames() != want.Frames() {
					t.Fatalf("%s, %s tag, %s: %d Hz × %d × %d frames, want %d × %d × %d", f, name, how,
						c.SampleRate, len(c.Channels), c.Frames(), want.SampleRate, len(want.Channels), want.Frames())
				}
				for ch := range want.Channels {
					if !sameBits(c.Channels[ch], want.Channels[ch]) {
						t.Fatalf("%s, %s tag, %s: channel %d differs", f, name, how, ch)
					}
				}
			}
		}
		// Sniff names it where its first bytes hold the whole tag.
		if got := Sniff(splice(id3Tag(10, false), data)[:SniffLen]); got != "FLAC" {
			t.Errorf("Sniff = %q, want FLAC", got)
		}
	}
}

// An ID3 tag whose size runs past the end of the file, by a byte or by a
// hostile 256 MiB, or whose header the file cuts off, fails in one line
// naming the tag, whatever follows it (FLAC or MP3), without a panic and
// without allocating what it claims; and what follows an ID3 tag is named
// when it is neither MP3 nor FLAC, never called MP3.
func TestID3TagBounds(t *testing.T) {
	flac := mustRead(t, fixtures+"flac_24k_s16_mono.flac")
	mp3 := mustRead(t, fixtures+"mp3_24k_mono.mp3")
	ogg := mustRead(t, fixtures+"vorbis_24k_mono.ogg")
	past := func(tag []byte, over int) []byte { // a tag claiming over bytes more than the file has
		n := len(tag) - 10 + over
		if tag[5]&0x10 != 0 {
			n -= 10
		}
		b := bytes.Clone(tag)
		b[6], b[7], b[8], b[9] = byte(n>>21&0x7F), byte(n>>14&0x7F), byte(n>>7&0x7F), byte(n&0x7F)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // the whole message after "x: "
	}{
		{"flac, a byte past the end", past(splice(id3Tag(0, false), flac), 1), fmt.Sprintf("truncated ID3 tag: it claims %d bytes, the file has %d", len(flac)+11, len(flac)+10)},
		{"flac, footer past the end", past(splice(id3Tag(20, true), flac[:5]), 1), "truncated ID3 tag: it claims 46 bytes, the file has 45"},
		{"flac, 256 MiB", splice([]byte("ID3\x03\x00\x00\x7f\x7f\x7f\x7f"), flac), fmt.Sprintf("truncated ID3 tag: it claims 268435465 bytes, the file has %d", len(flac)+10)},
		{"mp3, 256 MiB", splice([]byte("ID3\x04\x00\x10\x7f\x7f\x7f\x7f"), mp3), fmt.Sprintf("truncated ID3 tag: it claims 268435475 bytes, the file has %d", len(mp3)+10)},
		{"second tag past the end", splice(id3Tag(4, false), []byte("ID3\x03\x00\x00\x00\x00\x01\x00"), flac[:100]), "truncated ID3 tag: it claims 138 bytes, the file has 110"},
		{"header cut off", []byte("ID3\x03\x00\x00\x00"), "truncated ID3 tag: the file ends in its 10-byte header"},
		{"header cut off after a tag", splice(id3Tag(4, false), []byte("ID3\x03")), "truncated ID3 tag: the file ends in its 10-byte header"},
		{"nothing after the tag", id3Tag(40, false), "no MP3 frame or FLAC stream found after the ID3 tag: it is followed by nothing (the file ends with the tag)"},
		{"ogg after the tag", splice(id3Tag(10, false), ogg), "an ID3 tag followed by Ogg Vorbis data: not supported; remove the tag or convert the file: ffmpeg -i x -c:a pcm_f32le out.wav"},
		{"junk after the tag", splice(id3Tag(10, false), []byte("not audio at all")), "no MP3 frame or FLAC stream found after the ID3 tag: it is followed by 16 bytes of no known format (starting 6e 6f 74 20 61 75 64 69)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Decode(tc.data, "x") })
			if err == nil || err.Error() != "x: "+tc.want {
				t.Fatalf("error %v\nwant     x: %s", err, tc.want)
			}
			if n > 1<<20 {
				t.Fatalf("allocated %d KiB", n>>10)
			}
		})
	}
}

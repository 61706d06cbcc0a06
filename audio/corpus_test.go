package audio

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The corpus test: files made here by the reference encoders (ffmpeg for
// the source signal, flac, oggenc, lame) at every rate a user may have, 1,
// 2 and 6 channels and several bitrates, decoded by pp-offline and by an
// independent decoder (the format's reference tool: flac -d, oggdec,
// lame --decode; and ffmpeg for Vorbis), compared sample by sample. It
// needs ffmpeg, flac, vorbis-tools and lame (.ci/run installs them where it
// can) and skips itself without them, or with -short.

var corpusRates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install ffmpeg flac vorbis-tools lame)", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// corpusSource writes a 1 s WAV at rate Hz of 16- or 24-bit samples: each
// channel a different pair of tones under 4 kHz (every rate's Nyquist
// frequency) plus a little noise (a fixed generator: the same file every
// run).
func corpusSource(t *testing.T, dir string, rate, channels, bits int) string {
	t.Helper()
	return corpusSourceOpts(t, dir, rate, channels, bits, false)
}

// corpusSourceOpts is corpusSource at any depth from 8 to 32 bits: 8-bit
// samples unsigned, 12 and 20 as WAVE_FORMAT_EXTENSIBLE with that many
// valid bits left-justified in 16 and 24 (what flac reads and flac -d
// writes). With anti, channel 1 is channel 0 negated (plus noise) near full
// scale, so that a 32-bit stereo file's side channel needs its 33rd bit.
func corpusSourceOpts(t *testing.T, dir string, rate, channels, bits int, anti bool) string {
	t.Helper()
	bps := (bits + 7) / 8
	data := make([]byte, 0, rate*channels*bps)
	seed := uint32(1)
	for i := 0; i < rate; i++ {
		tt := float64(i) / float64(rate)
		for c := 0; c < channels; c++ {
			seed = seed*1664525 + 1013904223
			v := 0.35*math.Sin(2*math.Pi*float64(220+110*c)*tt) + 0.2*math.Sin(2*math.Pi*float64(1700+300*c)*tt) + 0.02*(float64(seed>>8)/(1<<24)-0.5)
			if anti {
				v = 0.97*math.Sin(2*math.Pi*220*tt) + 0.02*(float64(seed>>8)/(1<<24)-0.5)
				if c == 1 {
					v = -v
				}
			}
			q := int64(math.Round(v * float64(int64(1)<<(bits-1))))
			q = max(min(q, int64(1)<<(bits-1)-1), -int64(1)<<(bits-1))
			q <<= 8*bps - bits
			if bits == 8 {
				q += 128
			}
			for k := 0; k < bps; k++ {
				data = append(data, byte(q>>(8*k)))
			}
		}
	}
	fmtChunk := make([]byte, 16, 40)
	binary.LittleEndian.PutUint16(fmtChunk[0:], 1)
	binary.LittleEndian.PutUint16(fmtChunk[2:], uint16(channels))
	binary.LittleEndian.PutUint32(fmtChunk[4:], uint32(rate))
	binary.LittleEndian.PutUint32(fmtChunk[8:], uint32(rate*channels*bps))
	binary.LittleEndian.PutUint16(fmtChunk[12:], uint16(channels*bps))
	binary.LittleEndian.PutUint16(fmtChunk[14:], uint16(8*bps))
	if bits%8 != 0 {
		binary.LittleEndian.PutUint16(fmtChunk[0:], 0xFFFE)
		fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, 22)
		fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, uint16(bits))
		fmtChunk = binary.LittleEndian.AppendUint32(fmtChunk, 0) // no channel mask
		fmtChunk = append(fmtChunk, "\x01\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"...)
	}
	h := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	h = binary.LittleEndian.AppendUint32(h, uint32(len(fmtChunk)))
	h = append(h, fmtChunk...)
	h = append(h, "data"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(data)))
	binary.LittleEndian.PutUint32(h[4:], uint32(len(h)-8+len(data)))
	p := filepath.Join(dir, fmt.Sprintf("src_%d_%d_%d.wav", rate, channels, bits))
	if anti {
		p = strings.TrimSuffix(p, ".wav") + "_anti.wav"
	}
	// Parallel subtests share a source (same rate, channels, bits): each
	// writes its own temporary file and renames it into place, so an
	// encoder reading the source never sees one half written.
	f, err := os.CreateTemp(dir, "src-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(append(h, data...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// snr compares got with ref over their common length (all channels), in dB,
// and returns the max abs difference.
func snr(t *testing.T, got, ref *Clip) (db, maxAbs float64) {
	t.Helper()
	if got.SampleRate != ref.SampleRate || len(got.Channels) != len(ref.Channels) {
		t.Fatalf("%d Hz × %d channels, the reference %d Hz × %d", got.SampleRate, len(got.Channels), ref.SampleRate, len(ref.Channels))
	}
	n := min(got.Frames(), ref.Frames())
	if n < ref.Frames()*9/10 {
		t.Fatalf("%d frames, the reference %d", got.Frames(), ref.Frames())
	}
	var sig, noise float64
	for c := range ref.Channels {
		for i := 0; i < n; i++ {
			r, g := float64(ref.Channels[c][i]), float64(got.Channels[c][i])
			sig += r * r
			noise += (r - g) * (r - g)
			maxAbs = max(maxAbs, math.Abs(r-g))
		}
	}
	if noise == 0 {
		return math.Inf(1), 0
	}
	return 10 * math.Log10(sig/noise), maxAbs
}

// bestMatch returns the channel of src x correlates with most.
func bestMatch(x []float32, src *Clip) int {
	best, bv := -1, 0.0
	for s, y := range src.Channels {
		v := 0.0
		for i := 0; i < min(len(x), len(y)); i++ {
			v += float64(x[i]) * float64(y[i])
		}
		if v > bv {
			best, bv = s, v
		}
	}
	return best
}

func mustReadClip(t *testing.T, p string) *Clip {
	t.Helper()
	c, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FLAC at every rate, 1, 2 and 6 channels, every depth flac writes (8, 12,
// 16, 20, 24 and 32 bits; 32-bit stereo with a side channel past 32 bits),
// fixed block sizes from 192 to 65535 and the strongest settings (-8, and
// --lax with LPC order 32, 15-bit coefficients, partition order 15 and an
// exhaustive search), decoded bit for bit as flac -d does. (flac 1.4 writes
// no variable block size stream: flac_test.go builds those.)
func TestCorpusFLAC(t *testing.T) {
	needTools(t, "flac")
	dir := t.TempDir()
	type tc struct {
		rate, ch, bits int
		anti           bool
		opts           []string
	}
	var cases []tc
	for i, rate := range corpusRates {
		cases = append(cases, tc{rate: rate, ch: 1 + i%2, bits: 16})
	}
	cases = append(cases, tc{rate: 8000, ch: 6, bits: 16}, tc{rate: 48000, ch: 6, bits: 16}, tc{rate: 44100, ch: 2, bits: 24}, tc{rate: 16000, ch: 1, bits: 24}, tc{rate: 48000, ch: 6, bits: 24})
	for _, bits := range []int{8, 12, 20, 32} {
		cases = append(cases, tc{rate: 24000, ch: 1, bits: bits}, tc{rate: 48000, ch: 2, bits: bits}, tc{rate: 16000, ch: 6, bits: bits})
	}
	cases = append(cases,
		tc{rate: 48000, ch: 2, bits: 32, anti: true},
		tc{rate: 24000, ch: 2, bits: 32, anti: true, opts: []string{"--lax", "-l", "32", "-b", "65535"}},
		tc{rate: 96000, ch: 2, bits: 24}, tc{rate: 88200, ch: 1, bits: 16}, tc{rate: 192000, ch: 2, bits: 16},
		tc{rate: 7350, ch: 1, bits: 16}, tc{rate: 96001, ch: 1, bits: 16, opts: []string{"--lax"}},
	)
	for _, bs := range []string{"192", "200", "576", "1000", "4096"} {
		cases = append(cases, tc{rate: 24000, ch: 2, bits: 16, opts: []string{"-b", bs}})
	}
	for _, bits := range []int{16, 24, 32} {
		cases = append(cases, tc{rate: 48000, ch: 2, bits: bits, opts: []string{"--lax", "-b", "65535", "-l", "32", "-q", "15", "-r", "0,15", "-e", "-p"}})
	}
	cases = append(cases, tc{rate: 24000, ch: 2, bits: 16, opts: []string{"--lax", "-b", "16384"}}, tc{rate: 24000, ch: 1, bits: 16, opts: []string{"--lax", "-b", "65535", "-0"}}, tc{rate: 24000, ch: 6, bits: 20, opts: []string{"--lax", "-l", "32", "-b", "8192"}})
	for _, c := range cases {
		name := fmt.Sprintf("%d_%dch_%dbit", c.rate, c.ch, c.bits)
		if c.anti {
			name += "_anti"
		}
		if len(c.opts) > 0 {
			name += strings.ReplaceAll(strings.Join(c.opts, ""), ",", "_")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := corpusSourceOpts(t, t.TempDir(), c.rate, c.ch, c.bits, c.anti)
			f := filepath.Join(dir, name+".flac")
			args := append([]string{"-s", "-f", "-8", "--channel-map=none"}, c.opts...)
			run(t, "flac", append(args, src, "-o", f)...)
			ref := f + ".dec.wav"
			run(t, "flac", "-s", "-f", "-d", f, "-o", ref)
			got, want := mustReadClip(t, f), mustReadClip(t, ref)
			if got.Frames() != want.Frames() || got.Frames() != c.rate {
				t.Fatalf("%d frames, flac -d %d", got.Frames(), want.Frames())
			}
			for ch := range want.Channels {
				if !sameBits(got.Channels[ch], want.Channels[ch]) {
					t.Fatalf("channel %d differs from flac -d", ch)
				}
			}
			// The WAV source itself, exactly: the lossless round trip, and
			// the check that flac -d's WAV was read at its depth.
			in := mustReadClip(t, src)
			for ch := range in.Channels {
				if !sameBits(got.Channels[ch], in.Channels[ch]) {
					t.Fatalf("channel %d differs from the source", ch)
				}
			}
		})
	}
}

func TestCorpusVorbis(t *testing.T) {
	needTools(t, "ffmpeg", "oggenc", "oggdec")
	dir := t.TempDir()
	type tc struct {
		rate, ch int
		q        string
	}
	var cases []tc
	for i, rate := range corpusRates {
		cases = append(cases, tc{rate, 1 + i%2, []string{"0", "4", "8"}[i%3]})
	}
	cases = append(cases, tc{8000, 6, "2"}, tc{24000, 6, "4"}, tc{48000, 6, "6"})
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d_%dch_q%s", c.rate, c.ch, c.q), func(t *testing.T) {
			t.Parallel()
			src := corpusSource(t, dir, c.rate, c.ch, 16)
			f := strings.TrimSuffix(src, ".wav") + "_q" + c.q + ".ogg"
			run(t, "oggenc", "-Q", "-q", c.q, "-o", f, src)
			got := mustReadClip(t, f)
			if got.Frames() != c.rate {
				t.Fatalf("%d frames, encoded %d", got.Frames(), c.rate)
			}
			// Channels in the source's (WAV) order: oggenc maps WAV order to
			// Vorbis order, the decoder maps it back.
			src16 := mustReadClip(t, src)
			for ch := range got.Channels {
				if b := bestMatch(got.Channels[ch], src16); b != ch {
					t.Fatalf("channel %d is the source's channel %d", ch, b)
				}
			}
			// oggdec: 16-bit, the encoded length. (For more than two
			// channels it writes its own order, neither Vorbis's nor WAV's:
			// 5.1 comes out FL FR C BR BL... so it is compared up to stereo.)
			if c.ch <= 2 {
				ref := f + ".oggdec.wav"
				run(t, "oggdec", "-Q", "-o", ref, f)
				want := mustReadClip(t, ref)
				if got.Frames() != want.Frames() {
					t.Fatalf("%d frames, oggdec %d", got.Frames(), want.Frames())
				}
				if db, d := snr(t, got, want); db < 60 {
					t.Fatalf("SNR against oggdec %.1f dB (max abs %.2g)", db, d)
				}
			}
			// ffmpeg's float decoder (it may return the last block
			// whole: the common length is compared).
			ffref := f + ".ffmpeg.wav"
			run(t, "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", f, "-c:a", "pcm_f32le", ffref)
			if db, d := snr(t, got, mustReadClip(t, ffref)); db < 60 {
				t.Fatalf("SNR against ffmpeg %.1f dB (max abs %.2g)", db, d)
			}
		})
	}
}

// MP3 at every rate: MPEG-1 (32 to 48 kHz), MPEG-2 (16 to 24 kHz) and
// MPEG-2.5 (8 to 12 kHz), mono, joint and plain stereo, low and high
// constant bitrates and VBR, decoded by pp-offline's own decoder
// (audio/internal/mp3) and compared with LAME's decoder and with ffmpeg's
// float decoder: at least 60 dB SNR against both (LAME's output is 16-bit,
// so its rounding sets the figure there: 87 dB; ffmpeg's: about 120 dB),
// and the same length as ffmpeg's gapless decoding. At 24 kHz ffmpeg's
// long scale factor band 18 starts at line 330 where ISO/IEC 13818-3 table
// B.2 (and LAME, whose encoder wrote the file, and symphonia, the
// reference's decoder) has 332: ffmpeg's samples differ there (45 to 72 dB
// on these files) and only LAME's are held to 60 dB.
func TestCorpusMP3(t *testing.T) {
	needTools(t, "ffmpeg", "lame")
	dir := t.TempDir()
	type tc struct {
		rate int
		mode string
		enc  []string // lame's bitrate options
	}
	var cases []tc
	modes := []string{"m", "j", "s"}
	for i, rate := range corpusRates {
		lo, hi := "64", "192"
		switch {
		case rate < 16000:
			lo, hi = "16", "64"
		case rate < 32000:
			lo, hi = "32", "128"
		}
		cases = append(cases,
			tc{rate, modes[i%3], []string{"-b", lo}},
			tc{rate, modes[(i+1)%3], []string{"-b", hi}},
			tc{rate, modes[(i+2)%3], []string{"-V", fmt.Sprint(2 + i%5)}})
	}
	cases = append(cases,
		tc{22050, "m", []string{"-b", "32"}}, tc{22050, "s", []string{"-b", "32"}}, // go-mp3 got these wrong
		tc{8000, "m", []string{"-b", "8"}}, tc{11025, "j", []string{"-b", "8"}}, tc{48000, "s", []string{"-b", "320"}},
		tc{24000, "j", []string{"-b", "64"}}, tc{24000, "m", []string{"-b", "48"}}, tc{44100, "j", []string{"-b", "128"}},
		tc{44100, "j", []string{"-V", "0"}}, tc{16000, "m", []string{"-V", "9"}},
		tc{32000, "j", []string{"-b", "96", "-p"}}, tc{11025, "s", []string{"-V", "4", "-p"}}, // CRC-protected frames
		tc{44100, "s", []string{"-b", "160", "--nores"}}) // no bit reservoir
	for _, c := range cases {
		enc := strings.Join(c.enc, "")
		t.Run(fmt.Sprintf("%d_%s_%s", c.rate, c.mode, enc), func(t *testing.T) {
			t.Parallel()
			ch := 2
			if c.mode == "m" {
				ch = 1
			}
			src := corpusSource(t, dir, c.rate, ch, 16)
			f := strings.TrimSuffix(src, ".wav") + "_" + c.mode + enc + ".mp3"
			args := append([]string{"--silent", "-m", c.mode}, c.enc...)
			run(t, "lame", append(args, "--resample", fmt.Sprint(float64(c.rate)/1000), src, f)...)
			got := mustReadClip(t, f)
			if got.SampleRate != c.rate || len(got.Channels) != ch {
				t.Fatalf("%d Hz × %d channels", got.SampleRate, len(got.Channels))
			}
			ffref := f + ".ffmpeg.wav"
			run(t, "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", f, "-c:a", "pcm_f32le", ffref)
			ff := mustReadClip(t, ffref)
			if got.Frames() != ff.Frames() {
				t.Fatalf("%d frames, ffmpeg %d", got.Frames(), ff.Frames())
			}
			ffdb, ffd := snr(t, got, ff)
			ref := f + ".lame.wav"
			run(t, "lame", "--silent", "--decode", f, ref)
			want := mustReadClip(t, ref)
			g := got
			switch got.Frames() - want.Frames() {
			case 0: // both trimmed by the LAME tag
			case mp3Decoder:
				// A first frame too small for the LAME tag (low bitrates):
				// LAME wrote none, so there is nothing to trim by; ffmpeg
				// and pp-offline keep every sample, lame --decode still
				// drops its decoder delay.
				g = &Clip{SampleRate: got.SampleRate}
				for ch := range got.Channels {
					g.Channels = append(g.Channels, got.Channels[ch][mp3Decoder:])
				}
			default:
				t.Fatalf("%d frames, lame --decode %d", got.Frames(), want.Frames())
			}
			db, d := snr(t, g, want)
			t.Logf("SNR against lame --decode %.1f dB (max abs %.2g), against ffmpeg %.1f dB (max abs %.2g)", db, d, ffdb, ffd)
			if db < 60 {
				t.Errorf("SNR against lame --decode %.1f dB (max abs %.2g)", db, d)
			}
			if ffdb < 60 && c.rate != 24000 {
				t.Errorf("SNR against ffmpeg %.1f dB (max abs %.2g)", ffdb, ffd)
			}
		})
	}
}

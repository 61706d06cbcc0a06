//go:build unix

package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSniffContainers(t *testing.T) {
	for _, tc := range []struct {
		head []byte
		want kind
	}{
		{[]byte("FORM\x00\x00\x00\x10AIFF"), kindAIFF},
		{[]byte("FORM\x00\x00\x00\x10AIFC"), kindAIFF},
		{[]byte("\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00"), kindMP4},
		{[]byte("\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00"), kindMP4},
		{[]byte("\x00\x00\x00\x08wide\x00\x00\x00\x00mdat"), kindMP4},
		{[]byte("\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01"), kindMatroska},
		{[]byte{0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC}, kindADTS},
		{[]byte{0xFF, 0xF9, 0x50, 0x80, 0x02, 0x1F, 0xFC}, kindADTS},
		{[]byte{0xFF, 0xF1, 0x3C, 0x80, 0x02, 0x1F, 0xFC}, kindUnknown}, // sampling index 15
		{[]byte{0xFF, 0xFD, 0x90, 0x00}, kindMPEGOther},                 // layer II
		{[]byte{0xFF, 0xFF, 0x90, 0x00}, kindMPEGOther},                 // layer I
		{[]byte("caff\x00\x01\x00\x00"), kindCAF},
		{[]byte(".snd\x00\x00\x00\x18"), kindAU},
		{[]byte("\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9\x00\xaa\x00\x62\xce\x6c"), kindASF},
		{oggPage("OpusHead\x01\x01"), kindOpus},
	} {
		if got := sniff(tc.head); got != tc.want {
			t.Errorf("%q: kind %d, want %d", tc.head, got, tc.want)
		}
	}
}

// TestFFmpegFormats: files ffmpeg makes in formats with no native decoder
// decode through the fallback with their rate and channels, near the
// source signal (ALAC, lossless, exactly).
func TestFFmpegFormats(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	const frames, rate = 24000, 48000
	src := writeSourceWAV(t, dir, 2, frames, rate)
	srcClip, err := Read(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file   string
		args   []string
		kind   kind
		minSNR float64 // against the source; +Inf: identical
	}{
		{"alac.m4a", []string{"-c:a", "alac"}, kindMP4, 1e9},
		{"aac.m4a", []string{"-c:a", "aac", "-b:a", "192k"}, kindMP4, 8},
		{"aac.mov", []string{"-c:a", "aac", "-b:a", "192k"}, kindMP4, 8},
		{"aac.aac", []string{"-c:a", "aac", "-b:a", "192k", "-f", "adts"}, kindADTS, -1e9}, // no edit list: encoder delay stays
		{"mp2.mp2", []string{"-c:a", "mp2", "-b:a", "256k"}, kindMPEGOther, -1e9},          // decoder delay stays
		{"opus.webm", []string{"-c:a", "libopus", "-b:a", "128k"}, kindMatroska, 10},
		{"opus.opus", []string{"-c:a", "libopus", "-b:a", "128k"}, kindOpus, 10},
		{"flac.mkv", []string{"-c:a", "flac"}, kindMatroska, 1e9},
		{"pcm.caf", []string{"-c:a", "pcm_s16le"}, kindCAF, 1e9},
		{"pcm.au", []string{"-c:a", "pcm_s16be"}, kindAU, 1e9},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(dir, tc.file)
			ffmpegRun(t, append(append([]string{"-i", src}, tc.args...), p)...)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if k := sniff(b[:min(len(b), sniffLen)]); k != tc.kind {
				t.Fatalf("sniffed as %d, want %d", k, tc.kind)
			}
			c, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			if c.SampleRate != rate || len(c.Channels) != 2 {
				t.Fatalf("%d Hz × %d channels, want %d × 2", c.SampleRate, len(c.Channels), rate)
			}
			// ffmpeg's own decoding, de-interleaved the same way.
			checkExact(t, c, ffmpegDecodeRef(t, p), 2)
			if d := c.Frames() - frames; d < 0 || d > 2048 {
				t.Fatalf("%d frames for %d", c.Frames(), frames)
			}
			for ch := 0; ch < 2; ch++ {
				snr := snrAgainst(srcClip.Channels[ch], c.Channels[ch])
				if tc.minSNR >= 1e9 && !sameBits(c.Channels[ch][:frames], srcClip.Channels[ch]) {
					t.Fatalf("channel %d: lossless format differs from the source", ch)
				}
				if snr < tc.minSNR {
					t.Fatalf("channel %d: SNR %.1f dB against the source, want ≥ %.0f", ch, snr, tc.minSNR)
				}
			}
			// In memory (ffmpeg reads stdin): the same samples.
			m, err := Decode(b, p)
			if tc.kind != kindMP4 || err == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkExact(t, m, interleave(c), 2)
			}
		})
	}
}

func interleave(c *Clip) []float32 {
	var out []float32
	for i := 0; i < c.Frames(); i++ {
		for _, ch := range c.Channels {
			out = append(out, ch[i])
		}
	}
	return out
}

// TestFFmpegSharedFormatsEqualNative: WAV and FLAC forced through the
// fallback give exactly the native decoders' samples (ffmpeg only decodes;
// rate and channels are kept).
func TestFFmpegSharedFormatsEqualNative(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	src := writeSourceWAV(t, dir, 2, 10000, 44100)
	fl := filepath.Join(dir, "s.flac")
	ffmpegRun(t, "-i", src, fl)
	f24 := filepath.Join(dir, "s24.flac")
	ffmpegRun(t, "-i", src, "-af", "volume=0.7", "-c:a", "flac", "-sample_fmt", "s32", f24)
	for _, p := range []string{src, fl, f24, fixtures + "flac_44k_s24_stereo.flac", fixtures + "ulaw_8k.wav"} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			native, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			via, err := decodeFFmpeg(f, st.Size(), p, "test", decodeOpts{})
			if err != nil {
				t.Fatal(err)
			}
			if via.SampleRate != native.SampleRate {
				t.Fatalf("rate %d, native %d", via.SampleRate, native.SampleRate)
			}
			checkExact(t, via, interleave(native), len(native.Channels))
			first, err := decodeFFmpeg(f, st.Size(), p, "test", decodeOpts{firstOnly: true})
			if err != nil || !sameBits(first.Channels[0], native.Channels[0]) {
				t.Fatalf("firstOnly: %v, or channel 0 differs", err)
			}
		})
	}
}

// fakeFFmpeg puts a script named ffmpeg first on PATH.
func fakeFFmpeg(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	return dir
}

// floatWAVHeader is the header of a streamed 32-bit float WAV, written by
// the fake as printf octal escapes.
func floatWAVHeader(channels, rate int) string {
	h := riff(ck("fmt ", fmtChunk(tagFloat, channels, rate, 32)))
	h = append(h, "data\xff\xff\xff\xff"...)
	var s strings.Builder
	for _, c := range h {
		s.WriteString("\\" + strconv.FormatInt(int64(c), 8))
	}
	return s.String()
}

var mp2Head = append([]byte{0xFF, 0xFD, 0x90, 0x00}, make([]byte, 400)...)

func TestFFmpegBounded(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	old := ffmpegTimeout
	ffmpegTimeout = 500 * time.Millisecond
	t.Cleanup(func() { ffmpegTimeout = old })
	in := filepath.Join(t.TempDir(), "in.mp2")
	if err := os.WriteFile(in, mp2Head, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("hangs", func(t *testing.T) {
		// A child that keeps stdout open must be killed with the script.
		dir := fakeFFmpeg(t, "sleep 60 &\necho $! > \"$(dirname \"$0\")/child\"\nsleep 60\n")
		start := time.Now()
		_, err := Read(in)
		oneLineErr(t, err, in+": ffmpeg did not finish decoding MPEG audio layer I/II (MP1/MP2) within 500ms (killed)")
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("returned after %v", d)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr != nil {
			t.Fatalf("child pid %q", b)
		}
		for i := 0; syscall.Kill(pid, 0) == nil; i++ {
			if i == 100 {
				t.Fatalf("child %d still runs", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("floods stdout", func(t *testing.T) {
		fakeFFmpeg(t, "printf '"+floatWAVHeader(1, 24000)+"'\nexec cat /dev/zero\n")
		_, err := ReadLimits(in, Limits{MaxSamples: 100000})
		oneLineErr(t, err, in+": decodes to more than")
	})
	t.Run("floods stderr then fails", func(t *testing.T) {
		fakeFFmpeg(t, "echo 'first: Invalid data found when processing input' >&2\nhead -c 10000000 /dev/zero | tr '\\0' x >&2\nexit 1\n")
		_, err := Read(in)
		oneLineErr(t, err, in+": ffmpeg could not decode it as MPEG audio layer I/II (MP1/MP2): first: Invalid data found when processing input")
	})
	t.Run("multi-line error", func(t *testing.T) {
		fakeFFmpeg(t, "printf '\\n[mp2 @ 0x1] file:/dev/fd/3: bad header\\nsecond line\\n' >&2\nexit 1\n")
		_, err := Read(in)
		oneLineErr(t, err, in+": ffmpeg could not decode it as MPEG audio layer I/II (MP1/MP2): [mp2 @ 0x1] "+in+": bad header")
	})
	t.Run("garbage output", func(t *testing.T) {
		fakeFFmpeg(t, "echo hello\n")
		_, err := Read(in)
		oneLineErr(t, err, in+": unexpected output of ffmpeg decoding MPEG audio layer I/II (MP1/MP2): no WAV header")
	})
	t.Run("no samples", func(t *testing.T) {
		fakeFFmpeg(t, "printf '"+floatWAVHeader(2, 24000)+"'\n")
		_, err := Read(in)
		oneLineErr(t, err, in+": MPEG audio layer I/II (MP1/MP2) stream has no audio samples")
	})
	t.Run("samples", func(t *testing.T) {
		// Two frames of stereo: 0.5, -0.25, 1, 0 (and a partial frame,
		// dropped).
		var s strings.Builder
		for _, v := range []float32{0.5, -0.25, 1, 0, 0.125} {
			for _, c := range binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) {
				s.WriteString("\\" + strconv.FormatInt(int64(c), 8))
			}
		}
		fakeFFmpeg(t, "printf '"+floatWAVHeader(2, 32000)+s.String()+"'\n")
		c, err := Read(in)
		if err != nil {
			t.Fatal(err)
		}
		if c.SampleRate != 32000 || !sameBits(c.Channels[0], []float32{0.5, 1}) || !sameBits(c.Channels[1], []float32{-0.25, 0}) {
			t.Fatalf("%d Hz %v", c.SampleRate, c.Channels)
		}
	})
}

func TestFFmpegMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		data []byte
		name string
		want string
	}{
		{mp2Head, "in.mp2", "in.mp2: MPEG audio layer I/II (MP1/MP2) is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i in.mp2 -c:a pcm_f32le out.wav"},
		{[]byte("\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00"), "my song.m4a", "my song.m4a: MP4/M4A/MOV (AAC, ALAC) is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i 'my song.m4a' -c:a pcm_f32le out.wav"},
		{[]byte("\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01"), "-x.webm", "-x.webm: Matroska/WebM is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i './-x.webm' -c:a pcm_f32le out.wav"},
		{oggPage("OpusHead\x01\x01"), "a.opus", "a.opus: Ogg Opus is not read natively and ffmpeg is not on PATH"},
		{[]byte{0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC}, "a.aac", "a.aac: AAC (ADTS) is not read natively"},
	} {
		_, err := Decode(tc.data, tc.name)
		oneLineErr(t, err, tc.want)
	}
}

// TestFFmpegRealErrors: a file ffmpeg cannot read gives ffmpeg's reason in
// one line, naming the file.
func TestFFmpegRealErrors(t *testing.T) {
	needFFmpeg(t)
	p := filepath.Join(t.TempDir(), "bad.m4a")
	if err := os.WriteFile(p, append([]byte("\x00\x00\x00\x20ftypM4A "), bytes.Repeat([]byte{0x55}, 500)...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(p)
	oneLineErr(t, err, p+": ffmpeg could not decode it as MP4/M4A/MOV (AAC, ALAC): ")
}

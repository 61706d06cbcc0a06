package audio

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needFFmpeg skips the test when ffmpeg is not on PATH (install it with
// apt-get install ffmpeg).
func needFFmpeg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not on PATH")
	}
}

// ffmpegRun runs ffmpeg with args and fails the test on an error.
func ffmpegRun(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// testSignal makes frames of a deterministic test signal per channel: two
// tones, a chirp and pseudo-random noise, loud enough to reach full scale
// (ADPCM's clipping and step adaptation both get exercised).
func testSignal(channels, frames, rate int) [][]float32 {
	out := make([][]float32, channels)
	seed := uint32(12345)
	for c := range out {
		out[c] = make([]float32, frames)
		for i := range out[c] {
			tt := float64(i) / float64(rate)
			seed = seed*1664525 + 1013904223
			noise := float64(int32(seed)) / (1 << 31)
			v := 0.5*math.Sin(2*math.Pi*(220+110*float64(c))*tt) + 0.3*math.Sin(2*math.Pi*(1000+3000*tt)*tt) + 0.2*noise
			if i > frames*3/4 {
				v *= 2.5 // clipped loud part
			}
			out[c][i] = float32(max(-1, min(1, v)))
		}
	}
	return out
}

// writeSourceWAV writes the test signal as a 16-bit WAV for ffmpeg to
// encode, and returns its path.
func writeSourceWAV(t *testing.T, dir string, channels, frames, rate int) string {
	t.Helper()
	sig := testSignal(channels, frames, rate)
	var s []int16
	for i := 0; i < frames; i++ {
		for c := 0; c < channels; c++ {
			s = append(s, int16(math.Round(float64(sig[c][i])*32767)))
		}
	}
	p := filepath.Join(dir, "source.wav")
	if err := os.WriteFile(p, riff(ck("fmt ", fmtChunk(1, channels, rate, 16)), ck("data", i16s(s...))), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ffmpegDecodeRef decodes file with ffmpeg to interleaved float32 at its
// own rate and channel count (ffmpeg's reference decoding).
func ffmpegDecodeRef(t *testing.T, file string) []float32 {
	t.Helper()
	raw := file + ".f32"
	ffmpegRun(t, "-i", file, "-map", "0:a:0", "-f", "f32le", "-c:a", "pcm_f32le", raw)
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// checkExact fails unless clip holds exactly the interleaved samples ref.
func checkExact(t *testing.T, clip *Clip, ref []float32, channels int) {
	t.Helper()
	if len(clip.Channels) != channels {
		t.Fatalf("%d channels, want %d", len(clip.Channels), channels)
	}
	if clip.Frames()*channels != len(ref) {
		t.Fatalf("%d frames, ffmpeg %d", clip.Frames(), len(ref)/channels)
	}
	for c := range clip.Channels {
		for i, v := range clip.Channels[c] {
			if math.Float32bits(v) != math.Float32bits(ref[i*channels+c]) {
				t.Fatalf("channel %d sample %d = %v, ffmpeg %v", c, i, v, ref[i*channels+c])
			}
		}
	}
}

// snrAgainst is the signal-to-noise ratio of got against want over their common
// length.
func snrAgainst(want, got []float32) float64 {
	var sig, noise float64
	for i := range min(len(want), len(got)) {
		d := float64(got[i]) - float64(want[i])
		sig += float64(want[i]) * float64(want[i])
		noise += d * d
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// oneLineErr fails unless err is a one-line error starting with prefix.
func oneLineErr(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q…", prefix)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || strings.Contains(msg, "\n") {
		t.Fatalf("error %q, want one line starting %q", msg, prefix)
	}
}

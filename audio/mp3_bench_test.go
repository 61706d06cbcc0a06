package audio

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchMP3 is 30 s of 44.1 kHz 16-bit stereo (tones and noise) encoded by
// lame at 128 kbit/s joint stereo.
func benchMP3(b *testing.B) []byte {
	b.Helper()
	if _, err := exec.LookPath("lame"); err != nil {
		b.Skip("lame not installed")
	}
	dir, raw := benchRaw(b, 44100, 30)
	f := filepath.Join(dir, "bench.mp3")
	if out, err := exec.Command("lame", "--silent", "-r", "-s", "44.1", "--bitwidth", "16", "--little-endian", "-m", "j", "-b", "128", raw, f).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecodeMP3 decodes 30 s of 44.1 kHz stereo at 128 kbit/s to
// float32; audio-s/s is seconds of audio decoded per second. (Against
// github.com/hajimehoshi/go-mp3, the decoder audio/internal/mp3 replaced,
// on this file on a 2-core AMD EPYC under load, the two run alternately:
// 60-81 audio-s/s here, 19-24 there, to 16-bit samples.)
func BenchmarkDecodeMP3(b *testing.B) {
	data := benchMP3(b)
	b.SetBytes(int64(len(data)))
	var secs float64
	for b.Loop() {
		c, err := Decode(data, "bench.mp3")
		if err != nil {
			b.Fatal(err)
		}
		secs += float64(c.Frames()) / float64(c.SampleRate)
	}
	b.ReportMetric(secs/b.Elapsed().Seconds(), "audio-s/s")
}

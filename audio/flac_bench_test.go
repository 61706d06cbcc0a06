package audio

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchFLAC is 60 s of 48 kHz 16-bit stereo (tones and noise) encoded by
// flac at its default level.
func benchFLAC(b *testing.B) []byte {
	b.Helper()
	if _, err := exec.LookPath("flac"); err != nil {
		b.Skip("flac not installed")
	}
	dir, raw := benchRaw(b, 48000, 60)
	f := filepath.Join(dir, "bench.flac")
	if out, err := exec.Command("flac", "-s", "-f", "--force-raw-format", "--endian=little", "--sign=signed", "--channels=2", "--bps=16", "--sample-rate=48000", raw, "-o", f).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecodeFLAC decodes 60 s of 48 kHz stereo to float32. (Against
// github.com/mewkiz/flac, the decoder this one replaced, on this file on a
// 2-core AMD EPYC: 115 ms here, 270 ms there, to int32 samples only.)
func BenchmarkDecodeFLAC(b *testing.B) {
	data := benchFLAC(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data, "bench.flac"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRaw writes secs seconds of 16-bit little-endian stereo at rate
// (tones and a little noise) as a raw file for an encoder to read, and
// returns its folder and path.
func benchRaw(b *testing.B, rate, secs int) (dir, raw string) {
	b.Helper()
	pcm := make([]byte, 0, rate*secs*4)
	seed := uint32(1)
	for i := range rate * secs {
		tt := float64(i) / float64(rate)
		for c := range 2 {
			seed = seed*1664525 + 1013904223
			v := 0.3*math.Sin(2*math.Pi*float64(220+110*c)*tt) + 0.2*math.Sin(2*math.Pi*float64(1700+300*c)*tt*(1+0.1*math.Sin(tt))) + 0.02*(float64(seed>>8)/(1<<24)-0.5)
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(v*32767))))
		}
	}
	dir = b.TempDir()
	raw = filepath.Join(dir, "bench.raw")
	if err := os.WriteFile(raw, pcm, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, raw
}

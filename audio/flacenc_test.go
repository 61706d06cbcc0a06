package audio

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// flacEncCases are signals that exercise both subframe kinds: silence,
// a tone (FIXED wins), white noise at full scale (VERBATIM wins), clipping,
// NaN, and lengths around the block size.
func flacEncCases() map[string][][]float32 {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func(n int, f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	tone := func(i int) float32 { return float32(0.6 * math.Sin(float64(i)*0.05)) }
	noise := func(int) float32 { return float32(r.Float64()*2 - 1) }
	return map[string][][]float32{
		"empty":         {{}},
		"one sample":    {{0.5}},
		"two samples":   {{0.5, -0.5}},
		"silence":       {gen(5000, func(int) float32 { return 0 })},
		"tone":          {gen(flacBlockSize*3+17, tone)},
		"noise":         {gen(flacBlockSize+1, noise)},
		"exact block":   {gen(flacBlockSize, tone)},
		"short block":   {gen(200, tone)},
		"clipping, NaN": {gen(3000, func(i int) float32 { return [4]float32{2, -2, float32(math.NaN()), 1}[i%4] })},
		"stereo":        {gen(9000, tone), gen(9000, noise)},
		"extremes":      {gen(4100, func(i int) float32 { return float32(1 - 2*(i%2)) })},
	}
}

// Our decoder reads our FLAC back exactly as the 16-bit WAV of the same
// samples, and STREAMINFO's MD5 is the samples'.
func TestFLACEncoderRoundTrip(t *testing.T) {
	for name, chans := range flacEncCases() {
		t.Run(name, func(t *testing.T) {
			var f bytes.Buffer
			if err := EncodeFLAC16(&f, chans, 24000); err != nil {
				t.Fatal(err)
			}
			clip, err := DecodeReaderAt(bytes.NewReader(f.Bytes()), int64(f.Len()), "x.flac")
			if len(chans[0]) == 0 {
				if err == nil && clip.Frames() != 0 {
					t.Fatalf("empty stream decoded to %d frames", clip.Frames())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if clip.SampleRate != 24000 || len(clip.Channels) != len(chans) {
				t.Fatalf("rate %d, %d channels", clip.SampleRate, len(clip.Channels))
			}
			var sum bytes.Buffer
			for c, ch := range chans {
				var w bytes.Buffer
				if err := EncodePCM16(&w, ch, 24000); err != nil {
					t.Fatal(err)
				}
				ref, err := DecodeReaderAt(bytes.NewReader(w.Bytes()), int64(w.Len()), "x.wav")
				if err != nil {
					t.Fatal(err)
				}
				got, want := clip.Channels[c], ref.Channels[0]
				if len(got) != len(want) {
					t.Fatalf("channel %d: %d frames, want %d", c, len(got), len(want))
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("channel %d sample %d: %v, the WAV has %v", c, i, got[i], want[i])
					}
				}
			}
			for i := range chans[0] {
				for _, ch := range chans {
					sum.Write(binary.LittleEndian.AppendUint16(nil, uint16(pcm16(ch[i]))))
				}
			}
			if md := md5.Sum(sum.Bytes()); !bytes.Equal(f.Bytes()[26:42], md[:]) {
				t.Fatalf("STREAMINFO MD5 %x, samples %x", f.Bytes()[26:42], md)
			}
		})
	}
}

// The reference tool accepts our streams: `flac -t` checks every frame's
// CRCs and the MD5, and `flac -d` gives the WAV's samples.
func TestFLACEncoderAgainstFlacTool(t *testing.T) {
	if _, err := exec.LookPath("flac"); err != nil {
		t.Skip("flac not installed (apt-get install flac)")
	}
	dir := t.TempDir()
	for name, chans := range flacEncCases() {
		if len(chans[0]) == 0 {
			continue
		}
		p := filepath.Join(dir, "x.flac")
		var f bytes.Buffer
		if err := EncodeFLAC16(&f, chans, 24000); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, f.Bytes(), 0o644)
		if out, err := exec.Command("flac", "-t", "-s", p).CombinedOutput(); err != nil {
			t.Fatalf("%s: flac -t: %v\n%s", name, err, out)
		}
		raw := filepath.Join(dir, "x.raw")
		if out, err := exec.Command("flac", "-d", "-s", "-f", "--force-raw-format", "--endian=little", "--sign=signed", "-o", raw, p).CombinedOutput(); err != nil {
			t.Fatalf("%s: flac -d: %v\n%s", name, err, out)
		}
		got, _ := os.ReadFile(raw)
		var want []byte
		for i := range chans[0] {
			for _, ch := range chans {
				want = binary.LittleEndian.AppendUint16(want, uint16(pcm16(ch[i])))
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: flac -d gives other samples (%d bytes, want %d)", name, len(got), len(want))
		}
	}
	// Other rates take the other header codes.
	for _, rate := range []int{8000, 44100, 12345, 96000, 100000, 655350} {
		var f bytes.Buffer
		if err := EncodeFLAC16(&f, [][]float32{make([]float32, 1000)}, rate); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "r.flac")
		os.WriteFile(p, f.Bytes(), 0o644)
		if out, err := exec.Command("flac", "-t", "-s", p).CombinedOutput(); err != nil {
			t.Fatalf("rate %d: flac -t: %v\n%s", rate, err, out)
		}
		clip, err := DecodeReaderAt(bytes.NewReader(f.Bytes()), int64(f.Len()), "r.flac")
		if err != nil || clip.SampleRate != rate {
			t.Fatalf("rate %d: decoded %v, %v", rate, clip, err)
		}
	}
}

// Frame numbers past 127 take the multi-byte coding, shortest form.
func TestFLACEncoderFrameNumbers(t *testing.T) {
	for v, size := range map[uint64]int{0: 1, 0x7F: 1, 0x80: 2, 0x7FF: 2, 0x800: 3, 0xFFFF: 3, 0x10000: 4, 1<<21 - 1: 4, 1 << 21: 5, 1<<31 - 1: 6, 1<<36 - 1: 7} {
		var w flacEncBits
		w.putCodedNumber(v)
		b := w.b
		if len(b) != size {
			t.Errorf("%#x: %d bytes %x, want %d", v, len(b), b, size)
			continue
		}
		// Decode as UTF-8 extended to 7 bytes: the first byte's leading
		// ones count the bytes, the others carry 6 bits each.
		extra := bits.LeadingZeros8(^b[0])
		got := uint64(b[0])
		if extra > 0 {
			got = uint64(b[0]) & (0x7F >> extra)
		}
		for _, c := range b[1:] {
			if c&0xC0 != 0x80 {
				t.Fatalf("%#x: continuation byte %#x", v, c)
			}
			got = got<<6 | uint64(c&0x3F)
		}
		if got != v || (size > 1 && extra != size) {
			t.Errorf("%#x: coded %x reads %#x", v, b, got)
		}
	}
}

// Every rate is written with a code (or the bits after the header) the
// decoder reads back to the same rate.
func TestEncodeFLACRates(t *testing.T) {
	for _, rate := range []int{8000, 11025, 16000, 22050, 24000, 44100, 48000, 88200, 96000, 176400, 192000, 7350, 96001, 44000} {
		var f bytes.Buffer
		if err := EncodeFLAC16(&f, [][]float32{make([]float32, 5000)}, rate); err != nil {
			t.Fatal(err)
		}
		clip, err := DecodeReaderAt(bytes.NewReader(f.Bytes()), int64(f.Len()), "x.flac")
		if err != nil || clip.SampleRate != rate {
			t.Fatalf("%d Hz: read back at %v Hz, %v", rate, clip, err)
		}
	}
}

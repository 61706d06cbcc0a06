package mp3

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

// Files made by lame from a signal of sharp attacks (noise bursts and
// clicks over a tone), so that the encoder switches to short blocks,
// decoded frame by frame here and compared with ffmpeg's float decoder and
// with lame --decode. This is where short blocks, their reordering and
// window switching get checked against independent decoders; the other
// block kinds too (TestCorpusMP3 in package audio covers every rate).

func needLame(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tool := range []string{"lame", "ffmpeg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// transients writes 2 s of 16-bit PCM at rate Hz, ch channels, as a WAV.
func transients(t *testing.T, dir string, rate, ch int) string {
	t.Helper()
	seed := uint32(7)
	var pcm []byte
	for i := range 2 * rate {
		tt := float64(i) / float64(rate)
		for c := range ch {
			seed = seed*1664525 + 1013904223
			noise := float64(seed>>8)/(1<<24) - 0.5
			v := 0.1 * math.Sin(2*math.Pi*float64(300+200*c)*tt)
			// A burst every 0.25 s (0.2 s in channel 1), decaying fast.
			period := 0.25 - 0.05*float64(c)
			age := math.Mod(tt, period)
			v += 0.8 * noise * math.Exp(-age*60)
			if age < 1.0/float64(rate) {
				v += 0.5 // a click
			}
			q := int16(max(min(math.Round(v*32767), 32767), -32768))
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(q))
		}
	}
	h := []byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00")
	h = binary.LittleEndian.AppendUint16(h, uint16(ch))
	h = binary.LittleEndian.AppendUint32(h, uint32(rate))
	h = binary.LittleEndian.AppendUint32(h, uint32(rate*ch*2))
	h = binary.LittleEndian.AppendUint16(h, uint16(ch*2))
	h = binary.LittleEndian.AppendUint16(h, 16)
	h = append(h, "data"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(pcm)))
	binary.LittleEndian.PutUint32(h[4:], uint32(len(h)-8+len(pcm)))
	p := filepath.Join(dir, fmt.Sprintf("tr_%d_%d.wav", rate, ch))
	if err := os.WriteFile(p, append(h, pcm...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeFile decodes an MP3 made by lame (an Info/Xing frame first, with
// the LAME tag) and trims it as ffmpeg does. It returns interleaved samples
// and the decoder (for its block counts).
func decodeFile(t *testing.T, data []byte) ([]float32, int, *Decoder) {
	t.Helper()
	if string(data[:3]) == "ID3" {
		n := int(data[6])<<21 | int(data[7])<<14 | int(data[8])<<7 | int(data[9])
		data = data[10+n:]
	}
	first, err := ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data[:first.FrameBytes]), "LAME")
	if i < 0 {
		t.Fatal("no LAME tag")
	}
	delay := int(data[i+21])<<4 | int(data[i+22])>>4
	padding := int(data[i+22]&15)<<8 | int(data[i+23])
	d := NewDecoder()
	nch := first.Channels()
	pcm := [2][]float32{make([]float32, 1152), make([]float32, 1152)}
	var out []float32
	frames := 0
	for len(data) >= 4 {
		h, err := ParseHeader(data)
		if err != nil || len(data) < h.FrameBytes {
			break
		}
		if _, err := d.Decode(data, pcm); err != nil {
			t.Fatalf("frame %d: %v", frames, err)
		}
		for i := range h.Samples {
			for c := range nch {
				out = append(out, pcm[c][i])
			}
		}
		data = data[h.FrameBytes:]
		frames++
	}
	start := first.Samples + delay + 529
	end := len(out)/nch - (padding - 529)
	return out[start*nch : end*nch], nch, d
}

func TestTransientFiles(t *testing.T) {
	needLame(t)
	dir := t.TempDir()
	for _, c := range []struct {
		rate int
		mode string
		enc  []string
	}{
		{44100, "j", []string{"-b", "128"}},
		{44100, "s", []string{"-V", "2"}},
		{48000, "m", []string{"-b", "96"}},
		{32000, "j", []string{"-b", "64"}},
		{22050, "j", []string{"-b", "64"}},
		{24000, "m", []string{"-b", "64"}},
		{16000, "s", []string{"-V", "5"}},
		{11025, "j", []string{"-b", "64"}},
		{12000, "m", []string{"-b", "32"}},
		{8000, "j", []string{"-b", "24"}},
	} {
		name := fmt.Sprintf("%d_%s_%s", c.rate, c.mode, strings.Join(c.enc, ""))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ch := 2
			if c.mode == "m" {
				ch = 1
			}
			src := transients(t, dir, c.rate, ch)
			f := filepath.Join(dir, name+".mp3")
			args := append([]string{"--silent", "-m", c.mode, "--resample", fmt.Sprint(float64(c.rate) / 1000)}, c.enc...)
			if out, err := exec.Command("lame", append(args, src, f)...).CombinedOutput(); err != nil {
				t.Fatalf("lame: %v: %s", err, out)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, nch, d := decodeFile(t, data)
			if d.blocks[2] == 0 {
				t.Errorf("no short blocks (block counts %v)", d.blocks)
			}
			ff := filepath.Join(dir, name+".f32")
			if out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", f, "-f", "f32le", "-c:a", "pcm_f32le", ff).CombinedOutput(); err != nil {
				t.Fatalf("ffmpeg: %v: %s", err, out)
			}
			raw, err := os.ReadFile(ff)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(raw)/4)
			for i := range want {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			if len(got) != len(want) {
				t.Fatalf("%d samples, ffmpeg %d", len(got)/nch, len(want)/nch)
			}
			ffdb := snrDB(got, want)
			lm := filepath.Join(dir, name+".s16")
			if out, err := exec.Command("lame", "--silent", "--decode", "-t", f, lm).CombinedOutput(); err != nil {
				t.Fatalf("lame --decode: %v: %s", err, out)
			}
			raw, err = os.ReadFile(lm)
			if err != nil {
				t.Fatal(err)
			}
			lw := make([]float32, len(raw)/2)
			for i := range lw {
				lw[i] = float32(int16(binary.LittleEndian.Uint16(raw[2*i:]))) / 32768
			}
			n := min(len(lw), len(got))
			ldb := snrDB(got[:n], lw[:n])
			t.Logf("blocks %v; SNR against ffmpeg %.1f dB, against lame --decode %.1f dB", d.blocks, ffdb, ldb)
			if ldb < 60 || (ffdb < 60 && c.rate != 24000) {
				t.Errorf("SNR against ffmpeg %.1f dB, against lame --decode %.1f dB", ffdb, ldb)
			}
		})
	}
}

func snrDB(got, want []float32) float64 {
	var sig, noise float64
	for i := range want {
		r, g := float64(want[i]), float64(got[i])
		sig += r * r
		noise += (r - g) * (r - g)
	}
	return 10 * math.Log10(sig/noise)
}

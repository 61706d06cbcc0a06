package e2e

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/voices"
)

// writeFLAC re-encodes a 16-bit mono WAV as FLAC with verbatim subframes
// (a few lines of the format, RFC 9639: STREAMINFO, then frames of 4096
// samples with their CRC-8 header and CRC-16 footer), so the test needs no
// encoder and no large committed file. The decoder itself is checked
// against flac's and ffmpeg's decoding of their files in package audio.
func writeFLAC(t *testing.T, wav, out string) {
	t.Helper()
	c, err := audio.Read(wav)
	if err != nil {
		t.Fatal(err)
	}
	x := c.Channels[0]
	const block = 4096
	var buf bytes.Buffer
	buf.WriteString("fLaC")
	si := make([]byte, 4+34)
	si[0], si[3] = 0x80, 34 // last block, STREAMINFO, 34 bytes
	binary.BigEndian.PutUint16(si[4:], block)
	binary.BigEndian.PutUint16(si[6:], block)
	// rate (20 bits), channels−1 (3), bits−1 (5), total samples (36)
	v := uint64(c.SampleRate)<<44 | 15<<36 | uint64(len(x)) // channels−1 = 0
	binary.BigEndian.PutUint64(si[14:], v)
	buf.Write(si)
	for s, n := 0, 0; s < len(x); s, n = s+block, n+1 {
		k := min(block, len(x)-s)
		fr := []byte{0xFF, 0xF8, 0x70, 0x08} // fixed blocks; size in 16 bits; rate from STREAMINFO; mono; 16-bit
		if n < 128 {
			fr = append(fr, byte(n))
		} else {
			fr = append(fr, 0xC0|byte(n>>6), 0x80|byte(n&0x3F)) // the frame number, UTF-8 coded
		}
		fr = binary.BigEndian.AppendUint16(fr, uint16(k-1))
		fr = append(fr, flacCRC8(fr), 0x02) // header CRC; a VERBATIM subframe
		for _, y := range x[s : s+k] {
			fr = binary.BigEndian.AppendUint16(fr, uint16(int16(y*32768)))
		}
		fr = binary.BigEndian.AppendUint16(fr, flacCRC16(fr))
		buf.Write(fr)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The FLAC holds exactly the WAV's samples.
	back, err := audio.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.SampleRate != c.SampleRate || len(back.Channels[0]) != len(x) {
		t.Fatalf("FLAC copy: %d Hz, %d samples", back.SampleRate, len(back.Channels[0]))
	}
	for i := range x {
		if back.Channels[0][i] != x[i] {
			t.Fatalf("FLAC copy differs at sample %d", i)
		}
	}
}

// A FLAC copy of the fixture input (named .wav too: detection is by
// content), with a FLAC copy of the voice prompt, gives the fixture's
// transcript exactly.
func TestFLACInputGivesFixtureTranscript(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "input.flac")
	writeFLAC(t, tiny+"input.wav", in)
	disguised := filepath.Join(dir, "input-flac.wav")
	data, _ := os.ReadFile(in)
	os.WriteFile(disguised, data, 0o644)
	voiceDir := filepath.Join(dir, "voices")
	os.Mkdir(voiceDir, 0o755)
	writeFLAC(t, tiny+"voices/TINYF0.wav", filepath.Join(voiceDir, "TINYF0.flac"))
	want, err := os.ReadFile(tiny + "expected/run_wav/output.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{in, disguised} {
		out := t.TempDir()
		args := setFlag(tinyArgs(out, "--greedy", "-q"), "--input-wav", input)
		args = setFlag(args, "--voice-prompt", "TINYF0.flac")
		args = setFlag(args, "--voice-prompt-dir", voiceDir)
		_, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got, _ := os.ReadFile(filepath.Join(out, "out.json"))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: transcript differs:\n got %s\nwant %s", filepath.Base(input), got, want)
		}
	}
}

// `voice` takes a FLAC voice sample and writes the same embeddings and cache
// as from the WAV it was made from (the .pt bytes differ: zip timestamps).
func TestVoiceCommandReadsFLAC(t *testing.T) {
	dir := t.TempDir()
	flacPath := filepath.Join(dir, "v.flac")
	writeFLAC(t, tiny+"voices/TINYF0.wav", flacPath)
	model := []string{"--config", tiny + "config.json", "--moshi-weight", tiny + "model.safetensors",
		"--mimi-weight", tiny + "mimi.safetensors", "--tokenizer", tiny + "tokenizer.model", "--device", "cpu", "-q"}
	var pts [2]*voices.Prompt
	for i, in := range []string{tiny + "voices/TINYF0.wav", flacPath} {
		out := filepath.Join(dir, []string{"W.pt", "F.pt"}[i])
		_, stderr, code := run(t, append([]string{"voice", "--input-wav", in, "--output", out}, model...)...)
		if code != 0 {
			t.Fatalf("voice %s: exit %d: %s", in, code, stderr)
		}
		p, err := voices.LoadPT(out)
		if err != nil {
			t.Fatal(err)
		}
		pts[i] = p
	}
	w, f := pts[0], pts[1]
	if len(w.Embeddings) == 0 || len(w.Embeddings) != len(f.Embeddings) || !slices.EqualFunc(w.Cache, f.Cache, slices.Equal) {
		t.Fatal("the FLAC voice sample gave another voice prompt than its WAV")
	}
	for i := range w.Embeddings {
		if !slices.Equal(w.Embeddings[i], f.Embeddings[i]) {
			t.Fatalf("embedding %d differs", i)
		}
	}
}

// flacCRC8 is FLAC's header CRC (polynomial x^8 + x^2 + x + 1).
func flacCRC8(b []byte) byte {
	var c byte
	for _, x := range b {
		c ^= x
		for i := 0; i < 8; i++ {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// flacCRC16 is FLAC's frame CRC (polynomial x^16 + x^15 + x^2 + 1).
func flacCRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c ^= uint16(x) << 8
		for i := 0; i < 8; i++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x8005
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// writeSilentFLAC writes n samples of mono 16-bit silence at rate as FLAC
// with CONSTANT subframes: hours of audio in a few hundred KB, the shape of
// a decompression bomb.
func writeSilentFLAC(t *testing.T, path string, rate, n int) {
	t.Helper()
	const block = 4096
	var buf bytes.Buffer
	buf.WriteString("fLaC")
	si := make([]byte, 4+34)
	si[0], si[3] = 0x80, 34
	binary.BigEndian.PutUint16(si[4:], block)
	binary.BigEndian.PutUint16(si[6:], block)
	binary.BigEndian.PutUint64(si[14:], uint64(rate)<<44|15<<36|uint64(n))
	buf.Write(si)
	for s, f := 0, 0; s < n; s, f = s+block, f+1 {
		k := min(block, n-s)
		fr := []byte{0xFF, 0xF8, 0x70, 0x08}
		// The frame number, UTF-8 coded (up to 2^21 frames here).
		switch {
		case f < 1<<7:
			fr = append(fr, byte(f))
		case f < 1<<11:
			fr = append(fr, 0xC0|byte(f>>6), 0x80|byte(f&0x3F))
		case f < 1<<16:
			fr = append(fr, 0xE0|byte(f>>12), 0x80|byte(f>>6&0x3F), 0x80|byte(f&0x3F))
		default:
			fr = append(fr, 0xF0|byte(f>>18), 0x80|byte(f>>12&0x3F), 0x80|byte(f>>6&0x3F), 0x80|byte(f&0x3F))
		}
		fr = binary.BigEndian.AppendUint16(fr, uint16(k-1))
		fr = append(fr, flacCRC8(fr), 0x00, 0x00, 0x00) // header CRC; a CONSTANT subframe of 0
		fr = binary.BigEndian.AppendUint16(fr, flacCRC16(fr))
		buf.Write(fr)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A 3-hour input (a 1 MB FLAC of silence at 48 kHz) under a 4 GiB
// address-space ceiling is refused before it is decoded, in one line that
// says how long the job can take: the decoders' limit comes from the job's
// memory, not from the file.
func TestLongInputRefusedFromItsHeader(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "long.flac")
	writeSilentFLAC(t, in, 48000, 3*3600*48000)
	out := t.TempDir()
	args := setFlag(tinyArgs(out), "--input-wav", in)
	start := time.Now()
	stderr, code := runLimitedEnv(t, nil, args...)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.Contains(last, "long.flac: decodes to 3 h 0 min at 48000 Hz, more than") || !strings.Contains(last, "this job can hold") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %v", d)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("outputs left: %v", ents)
	}
	t.Log(last)
}

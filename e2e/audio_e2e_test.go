package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mewkiz/flac"
	"github.com/mewkiz/flac/frame"
	"github.com/mewkiz/flac/meta"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/voices"
)

// writeFLAC re-encodes a 16-bit mono WAV as FLAC (mewkiz/flac's encoder, with
// its fixed-predictor analysis), so the test needs no ffmpeg and no large
// committed file. The decoder itself is checked against ffmpeg's decoding of
// ffmpeg-made FLAC in package audio.
func writeFLAC(t *testing.T, wav, out string) {
	t.Helper()
	c, err := audio.Read(wav)
	if err != nil {
		t.Fatal(err)
	}
	x := c.Channels[0]
	info := &meta.StreamInfo{BlockSizeMin: 4096, BlockSizeMax: 4096, SampleRate: uint32(c.SampleRate), NChannels: 1, BitsPerSample: 16, NSamples: uint64(len(x))}
	var buf bytes.Buffer
	enc, err := flac.NewEncoder(&buf, info)
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < len(x); s += 4096 {
		n := min(4096, len(x)-s)
		samples := make([]int32, n)
		for i := range samples {
			samples[i] = int32(x[s+i] * 32768)
		}
		f := &frame.Frame{
			Header:    frame.Header{HasFixedBlockSize: true, BlockSize: uint16(n), SampleRate: uint32(c.SampleRate), Channels: frame.ChannelsMono, BitsPerSample: 16},
			Subframes: []*frame.Subframe{{SubHeader: frame.SubHeader{Pred: frame.PredVerbatim}, Samples: samples, NSamples: n}},
		}
		if err := enc.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
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

package audio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// readSafetensorsF32 reads one F32 tensor from a safetensors file (8-byte
// little-endian header length, JSON header, raw data).
func readSafetensorsF32(t *testing.T, path, key string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	var info struct {
		Dtype       string   `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr[key], &info); err != nil {
		t.Fatal(err)
	}
	if info.Dtype != "F32" {
		t.Fatalf("%s: dtype %s", key, info.Dtype)
	}
	data := raw[8+n+uint64(info.DataOffsets[0]) : 8+n+uint64(info.DataOffsets[1])]
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// The reference's output.wav is sphn.write_wav(pcm): re-encoding the exact
// float array it was given must reproduce the file byte for byte.
func TestEncodePCM16MatchesReference(t *testing.T) {
	pcm := readSafetensorsF32(t, "../testdata/tiny/expected/run_pt/output_pcm.safetensors", "pcm")
	if len(pcm) != 73200 {
		t.Fatalf("pcm has %d samples", len(pcm))
	}
	want, err := os.ReadFile("../testdata/tiny/expected/run_pt/output.wav")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := EncodePCM16(&buf, pcm, 24000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		got := buf.Bytes()
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("differs from output.wav at byte %d (len %d vs %d)", i, len(got), len(want))
			}
		}
		t.Fatalf("length %d, want %d", len(got), len(want))
	}
}

func TestPCM16Conversion(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want int16
	}{
		{0, 0}, {1, 32767}, {-1, -32767}, {2, 32767}, {-7, -32767},
		{0.5, 16383},   // 16383.5 truncated
		{-0.5, -16383}, // toward zero, not floor
		{1.0 / 32767, 1}, {0.99999, 32766},
		{float32(math.Inf(1)), 32767}, {float32(math.Inf(-1)), -32767},
		{float32(math.NaN()), 0},
	} {
		if got := pcm16(tc.x); got != tc.want {
			t.Errorf("pcm16(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

func TestEncodePCM16Header(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodePCM16(&buf, []float32{0.25, -1}, 16000); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("RIFF\x28\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00data\x04\x00\x00\x00"), i16s(8191, -32767)...)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got % x\nwant % x", buf.Bytes(), want)
	}
	c, err := Decode(buf.Bytes(), "enc.wav")
	if err != nil {
		t.Fatal(err)
	}
	if c.SampleRate != 16000 || !sameBits(c.Channels[0], []float32{8191.0 / 32768, -32767.0 / 32768}) {
		t.Errorf("decoded %+v", c)
	}
	if err := EncodePCM16(&buf, nil, 0); err == nil {
		t.Error("rate 0 accepted")
	}
}

func TestEncodeFloat32Lossless(t *testing.T) {
	x := []float32{0, 1e-38, -0.123456789, 3.5, float32(math.Inf(1)), math.Float32frombits(0x7fc00001), float32(math.Copysign(0, -1))}
	var buf bytes.Buffer
	if err := EncodeFloat32(&buf, x, 24000); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) != 58+4*len(x) || string(b[0:4]) != "RIFF" || binary.LittleEndian.Uint32(b[4:]) != uint32(len(b)-8) {
		t.Fatalf("bad header % x", b[:58])
	}
	if tag := binary.LittleEndian.Uint16(b[20:]); tag != 3 {
		t.Errorf("format tag %d", tag)
	}
	c, err := Decode(b, "f.wav")
	if err != nil {
		t.Fatal(err)
	}
	if c.SampleRate != 24000 || len(c.Channels) != 1 || !sameBits(c.Channels[0], x) {
		t.Errorf("round trip: %+v", c)
	}
}

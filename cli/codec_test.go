package cli

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/weights"
)

const (
	tinyConfig = "testdata/tiny/config.json"
	tinyMimi   = "testdata/tiny/mimi.safetensors"
)

func runCodecCmd(t *testing.T, args ...string) error {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &errOut
	return app.Run(append([]string{"pp-offline", "codec"}, args...))
}

func readTensor(t *testing.T, path, name string) *weights.Tensor {
	t.Helper()
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	x, err := f.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Encode the tiny input, decode the codes: the codes are the reference's and
// the WAV is the reference's decoded pcm_out as 16-bit PCM.
func TestCodecEncodeDecode(t *testing.T) {
	dir := t.TempDir()
	codes := filepath.Join(dir, "codes.safetensors")
	wav := filepath.Join(dir, "out.wav")
	if err := runCodecCmd(t, "encode", "--config", tinyConfig, "--mimi-weight", tinyMimi,
		"--input-wav", "testdata/tiny/input.wav", "--output", codes); err != nil {
		t.Fatal(err)
	}
	got := readTensor(t, codes, "codes")
	want := readTensor(t, "testdata/tiny/expected/mimi/mimi_encode.safetensors", "codes")
	if got.DType != weights.I64 || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("codes %s %v differ from the reference's %s %v", got.DType, got.Shape, want.DType, want.Shape)
	}

	if err := runCodecCmd(t, "decode", "--config", tinyConfig, "--mimi-weight", tinyMimi,
		"--codes", codes, "--output-wav", wav); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(wav)
	if err != nil {
		t.Fatal(err)
	}
	ref := readTensor(t, "testdata/tiny/expected/mimi/mimi_decode.safetensors", "pcm_out").Float32s()
	var hdr bytes.Buffer
	if err := audio.EncodePCM16(&hdr, make([]float32, len(ref)), 24000); err != nil {
		t.Fatal(err)
	}
	if len(data) != 44+2*len(ref) || !bytes.Equal(data[:44], hdr.Bytes()[:44]) {
		t.Fatalf("WAV: %d bytes, header %x; want %d bytes, header %x", len(data), data[:min(44, len(data))], 44+2*len(ref), hdr.Bytes()[:44])
	}
	var sig, noise float64
	diff := 0
	for i, r := range ref {
		s := int16(binary.LittleEndian.Uint16(data[44+2*i:]))
		w := int16(float32(max(-1, min(1, r)) * 32767))
		if d := int(s) - int(w); d != 0 {
			if d < -1 || d > 1 {
				t.Fatalf("sample %d: %d, reference %d", i, s, w)
			}
			diff++
		}
		x := float64(s) / 32767
		sig += float64(r) * float64(r)
		noise += (x - float64(r)) * (x - float64(r))
	}
	snr := 10 * math.Log10(sig/noise)
	t.Logf("decoded WAV: %d of %d samples off by one LSB from the reference, SNR %.1f dB vs pcm_out", diff, len(ref), snr)
	if snr < 60 || diff > len(ref)/100 {
		t.Fatalf("decoded WAV: SNR %.1f dB, %d samples differ", snr, diff)
	}
}

// An empty WAV is refused as the main command refuses it (one line naming
// the file, no codes written); zero frames of codes decode to an empty WAV.
func TestCodecEmpty(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "empty.wav")
	var b bytes.Buffer
	if err := audio.EncodePCM16(&b, nil, 24000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	codes := filepath.Join(dir, "codes.safetensors")
	wav := filepath.Join(dir, "out.wav")
	err := runCodecCmd(t, "encode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--input-wav", in, "--output", codes)
	if err == nil || !strings.Contains(err.Error(), "empty.wav: no audio samples") {
		t.Fatalf("empty encode: %v", err)
	}
	if _, err := os.Stat(codes); err == nil {
		t.Fatal("codes written for an empty input")
	}
	if err := weights.WriteFile(codes, []*weights.Tensor{weights.Int64Tensor("codes", []int{1, 8, 0}, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := runCodecCmd(t, "decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", codes, "--output-wav", wav); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(wav); err != nil || st.Size() != 44 {
		t.Fatalf("empty decode: %v, %v", st, err)
	}
}

// Errors are one line naming the file, and no output file is left behind.
func TestCodecErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.safetensors")
	if err := weights.WriteFile(bad, []*weights.Tensor{weights.Int64Tensor("codes", []int{1, 8, 1}, []int64{0, 1, 2, 3, 4, 5, 6, 2048})}, nil); err != nil {
		t.Fatal(err)
	}
	shape := filepath.Join(dir, "shape.safetensors")
	if err := weights.WriteFile(shape, []*weights.Tensor{weights.Int64Tensor("codes", []int{1, 4, 1}, []int64{0, 1, 2, 3})}, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"encode", "--config", tinyConfig, "--input-wav", "testdata/tiny/input.wav", "--output", out}, "--mimi-weight"},
		{[]string{"encode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--output", out}, "--input-wav"},
		{[]string{"encode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--input-wav", "testdata/tiny/nope.wav", "--output", out}, "nope.wav"},
		{[]string{"encode", "--config", tinyConfig, "--mimi-weight", "testdata/tiny/nope.safetensors", "--input-wav", "testdata/tiny/input.wav", "--output", out}, "nope.safetensors"},
		{[]string{"encode", "--config", "testdata/tiny/nope.json", "--mimi-weight", tinyMimi, "--input-wav", "testdata/tiny/input.wav", "--output", out}, "nope.json"},
		// The real Mimi's shapes do not fit the tiny checkpoint.
		{[]string{"encode", "--mimi-weight", tinyMimi, "--input-wav", "testdata/tiny/input.wav", "--output", out}, "mimi.safetensors"},
		{[]string{"encode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--input-wav", "testdata/tiny/input.wav", "--output", filepath.Join(dir, "no/such/dir/x")}, filepath.FromSlash("no/such/dir/x")},
		{[]string{"decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", bad, "--output-wav", out}, "bad.safetensors: code 2048"},
		{[]string{"decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", shape, "--output-wav", out}, "shape.safetensors"},
		{[]string{"decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", tinyMimi, "--output-wav", out}, "no tensor \"codes\""},
		{[]string{"decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", filepath.Join(dir, "none"), "--output-wav", out}, "none"},
		{[]string{"decode", "--config", tinyConfig, "--mimi-weight", tinyMimi, "--codes", "testdata/tiny/expected/mimi/mimi_decode.safetensors", "--output-wav", filepath.Join(dir, "no/such/dir/x.wav")}, filepath.FromSlash("no/such/dir/x.wav")},
	}
	for _, c := range cases {
		err := runCodecCmd(t, c.args...)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: error %q does not name %q on one line", c.args, msg, c.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); n != "bad.safetensors" && n != "shape.safetensors" {
			t.Errorf("left behind: %s", n)
		}
	}
}

package weights

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func image(t *testing.T, header string, body int) []byte {
	t.Helper()
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(make([]byte, body))
	return b.Bytes()
}

func TestOpenFixtureMapsInFileDtype(t *testing.T) {
	f, err := Open("../../testdata/tiny/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Names()) != 151 {
		t.Fatalf("%d tensors, want 151", len(f.Names()))
	}
	w, err := f.Get("text_emb.weight", 1001, 64)
	if err != nil {
		t.Fatal(err)
	}
	if w.DType != BF16 || len(w.Data) != 1001*64*2 {
		t.Fatalf("dtype %s, %d bytes", w.DType, len(w.Data))
	}
	// The view aliases the mapping: widening is exact (bf16 bits << 16).
	u := w.Uint16s()
	fl := w.Float32s()
	for i := 0; i < 100; i++ {
		if got := uint32(u[i]) << 16; got != mathBits(fl[i]) {
			t.Fatalf("element %d not widened exactly", i)
		}
	}
}

func TestErrorsNameTheProblem(t *testing.T) {
	good := `{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"tiny", []byte{1, 2, 3}, "not a safetensors file"},
		{"truncated", image(t, good, 8), "truncated"},
		{"lying offsets", image(t, `{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, 16), "needs 16"},
		{"overlap", image(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), "overlap"},
		{"bad json", image(t, `{"a":`, 0), "bad safetensors header"},
		{"not json", image(t, `hello`, 0), "not a safetensors file"},
		{"huge header", append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, make([]byte, 16)...), "header length"},
		{"dtype", image(t, `{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}`, 8), "unsupported dtype"},
		{"gap", image(t, `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "invalid safetensors file"},
	}
	for _, c := range cases {
		_, err := FromBytes(c.name+".safetensors", c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.name+".safetensors: ") {
			t.Errorf("%s: got %v, want an error naming the file and %q", c.name, err, c.want)
		}
	}
	f, err := FromBytes("ok.safetensors", image(t, good, 16))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get("missing"); err == nil || !strings.Contains(err.Error(), `missing tensor "missing"`) {
		t.Errorf("missing tensor: %v", err)
	}
	if _, err := f.Get("a", 4); err == nil || !strings.Contains(err.Error(), `"a" has shape [2 2], the config expects [4]`) {
		t.Errorf("shape mismatch: %v", err)
	}
}

func TestOpenFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "nope.safetensors")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(dir, "cut.safetensors")
	data, _ := os.ReadFile("../../testdata/tiny/mimi.safetensors")
	os.WriteFile(p, data[:len(data)/2], 0o644)
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: %v", err)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "codes.safetensors")
	codes := Int64Tensor("codes", []int{1, 2, 3}, []int64{1, -2, 3, 2047, 0, 5})
	x := Float32Tensor("x", []int{2}, []float32{1.5, -0.25})
	if err := WriteFile(p, []*Tensor{codes, x}, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _ := f.Get("codes", 1, 2, 3)
	if got := c.Int64s(); got[1] != -2 || got[3] != 2047 {
		t.Fatalf("codes %v", got)
	}
	xx, _ := f.Get("x", 2)
	if got := xx.Float32s(); got[0] != 1.5 || got[1] != -0.25 {
		t.Fatalf("x %v", got)
	}
	if f.Metadata["k"] != "v" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	st, _ := os.Stat(p)
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o644 { // Windows has no mode bits
		t.Fatalf("mode %v", st.Mode())
	}
}

func TestHalfToFloat(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125}, {0x7bff, 65504},
		{0x0001, 5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		if got := HalfToFloat(tc.h); got != tc.want {
			t.Errorf("half 0x%04x = %v, want %v", tc.h, got, tc.want)
		}
	}
	if v := HalfToFloat(0x7e00); v == v {
		t.Error("NaN not NaN")
	}
	if v := HalfToFloat(0x8000); math.Float32bits(v) != 0x80000000 {
		t.Error("-0 lost its sign")
	}
}

func TestRandomDeterministicAndScaled(t *testing.T) {
	specs := []Spec{{"a", BF16, []int{300, 1000}, 0.02}, {"n", BF16, []int{7}, 0}, {"f", F32, []int{5, 3}, 0.5}}
	a, b := Random(specs, 1), Random(specs, 1)
	c := Random(specs, 2)
	ta, _ := a.Get("a", 300, 1000)
	tb, _ := b.Get("a")
	tc, _ := c.Get("a")
	if !bytes.Equal(ta.Data, tb.Data) || bytes.Equal(ta.Data, tc.Data) {
		t.Fatal("Random is not a function of the seed")
	}
	for _, v := range ta.Float32s() {
		if m := float32(math.Abs(float64(v))); m < 0.015625 || m >= 0.03125 {
			t.Fatalf("value %g outside [2^-6, 2^-5)", v)
		}
	}
	tn, _ := a.Get("n")
	for _, v := range tn.Float32s() {
		if v != 1 {
			t.Fatalf("norm scale %g", v)
		}
	}
	tf, _ := a.Get("f")
	for _, v := range tf.Float32s() {
		if m := math.Abs(float64(v)); m < 0.5 || m >= 1 {
			t.Fatalf("f32 value %g", v)
		}
	}
}

// A mapped file truncated in place is reported by CheckIntact (before a read
// past its end faults); one replaced by a new file is not (the mapping keeps
// the old inode).
func TestCheckIntact(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../testdata/tiny/mimi.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "m.safetensors")
	os.WriteFile(p, src, 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.CheckIntact(); err != nil {
		t.Fatal(err)
	}
	repl := filepath.Join(dir, "new")
	os.WriteFile(repl, src[:100], 0o644)
	os.Rename(repl, p) // replaced: the mapping still holds the old file
	if err := f.CheckIntact(); err != nil {
		t.Fatalf("replaced file: %v", err)
	}
	g, err := Open(p)
	if err == nil {
		g.Close()
	}
	os.WriteFile(p, src, 0o644)
	h, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if runtime.GOOS == "windows" {
		return // Windows refuses to truncate a mapped file (ERROR_USER_MAPPED_FILE): nothing to detect
	}
	if err := os.Truncate(p, 1000); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckIntact(); err == nil || !strings.Contains(err.Error(), "shrank") || !strings.HasPrefix(err.Error(), p) {
		t.Fatalf("truncated file: %v", err)
	}
}

// WriteRandom streams exactly the file Write(Random) makes, across chunk
// boundaries (a tensor over 4 MiB spans two chunks).
func TestWriteRandomEqualsRandom(t *testing.T) {
	specs := []Spec{{"a", BF16, []int{3, 1 << 20}, 0.02}, {"n", BF16, []int{7}, 0}, {"f", F32, []int{5, 3}, 0.5}, {"b", BF16, []int{1000}, 0.1}}
	f := Random(specs, 3)
	var ts []*Tensor
	for _, n := range f.Names() {
		tt, _ := f.Get(n)
		ts = append(ts, tt)
	}
	meta := map[string]string{"k": "v"}
	var want, got bytes.Buffer
	if err := Write(&want, ts, meta); err != nil {
		t.Fatal(err)
	}
	if err := WriteRandom(&got, specs, 3, meta); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Fatalf("WriteRandom wrote %d bytes unlike Write(Random)'s %d", got.Len(), want.Len())
	}
	var other bytes.Buffer
	if err := WriteRandom(&other, specs, 4, meta); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.Bytes(), got.Bytes()) {
		t.Fatal("WriteRandom ignores its seed")
	}
}

// RandomMapped holds the same bytes as Random (outside the heap where it
// can), and Close releases its mapping.
func TestRandomMappedIsRandom(t *testing.T) {
	specs := []Spec{{"a", BF16, []int{300, 1000}, 0.02}, {"n", BF16, []int{7}, 0}, {"f", F32, []int{5, 3}, 0.5}}
	a, m := Random(specs, 3), RandomMapped(specs, 3)
	for _, name := range []string{"a", "n", "f"} {
		ta, _ := a.Get(name)
		tm, _ := m.Get(name)
		if !bytes.Equal(ta.Data, tm.Data) {
			t.Fatalf("tensor %s differs between Random and RandomMapped", name)
		}
	}
	mapped := m.mapped // false where RandomMapped falls back to the heap (Windows)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if mapped && m.data != nil {
		t.Fatal("Close kept RandomMapped's mapping")
	}
}

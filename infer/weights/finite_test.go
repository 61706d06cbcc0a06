package weights

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// floatTensor builds a tensor of dtype dt (BF16, F16, F32, F64) from v.
func floatTensor(name string, dt DType, shape []int, v []float32) *Tensor {
	w := dt.Size()
	b := make([]byte, w*len(v))
	for i, x := range v {
		switch dt {
		case BF16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
		case F16:
			binary.LittleEndian.PutUint16(b[2*i:], FloatToHalf(x))
		case F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		case F64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(x)))
		}
	}
	return &Tensor{Name: name, DType: dt, Shape: shape, Data: b}
}

func finiteValues(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		// Large and tiny magnitudes too (f16's largest finite is 65504).
		v[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(rng.IntN(8)-4)))
	}
	return v
}

// A generated checkpoint with one NaN or infinite float weight is refused
// by CheckFinite with one line naming the file, the tensor and the
// element, at every position (word-aligned or in a tail, first or last)
// and in every float dtype; finite values pass, extremes included.
func TestCheckFiniteFloats(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, dt := range []DType{BF16, F16, F32, F64} {
		for _, cols := range []int{1, 3, 8, 13} {
			rows := 5
			n := rows * cols
			good := finiteValues(rng, n)
			max := float32(65504)
			if dt != F16 {
				max = math.MaxFloat32
				if dt == BF16 {
					max = math.Float32frombits(0x7F7F0000)
				}
			}
			good[n-1] = -max
			ok := floatTensor("ok", dt, []int{rows, cols}, good)
			if err := ok.CheckFinite(); err != nil {
				t.Fatalf("%s finite: %v", dt, err)
			}
			for _, at := range []int{0, 1, n / 2, n - 1} {
				for _, bad := range []float32{nan, inf, -inf} {
					v := append([]float32(nil), good...)
					v[at] = bad
					if at > 0 {
						v[n-1] = bad // a later bad value does not hide the first
					}
					var buf bytes.Buffer
					tens := []*Tensor{ok, floatTensor("layers.0.w", dt, []int{rows, cols}, v)}
					if err := Write(&buf, tens, nil); err != nil {
						t.Fatal(err)
					}
					f, err := FromBytes("model.safetensors", buf.Bytes())
					if err != nil {
						t.Fatal(err)
					}
					want := fmt.Sprintf("model.safetensors: tensor %q: element %d (row %d, column %d) is %s: the checkpoint is corrupt",
						"layers.0.w", at, at/cols, at%cols, describeFloat(F32, binary.LittleEndian.AppendUint32(nil, math.Float32bits(bad))))
					if err := f.CheckFinite(); err == nil || err.Error() != want {
						t.Errorf("%s %dx%d, %v at %d: %v, want %q", dt, rows, cols, bad, at, err, want)
					}
					if err := f.CheckFinite("ok"); err != nil {
						t.Errorf("only the good tensor: %v", err)
					}
				}
			}
		}
	}
}

// The scan tests 64-byte rounds of words at once: a NaN or infinity in
// any lane of any word of the first, a middle or the last round (or the
// tail after them) is found at its own index, and the largest finite
// values, whose exponents are all ones but the lowest bit, pass.
func TestCheckFiniteEveryLane(t *testing.T) {
	for _, dt := range []DType{BF16, F16, F32, F64} {
		n := 3*64/dt.Size() + 3
		v := make([]float32, n)
		for i := range v {
			v[i] = -65504 // f16's largest finite: exponent 11110
			if dt != F16 && i%2 == 1 {
				v[i] = math.Float32frombits(0x7F7F0000) // bf16's largest finite: exponent 11111110
			}
		}
		if err := floatTensor("w", dt, []int{n}, v).CheckFinite(); err != nil {
			t.Fatalf("%s, all finite: %v", dt, err)
		}
		for at := range n {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
				w := append([]float32(nil), v...)
				w[at] = bad
				want := fmt.Sprintf("tensor \"w\": element %d is ", at)
				if err := floatTensor("w", dt, []int{n}, w).CheckFinite(); err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s, %v at %d: %v", dt, bad, at, err)
				}
			}
		}
	}
}

// A tensor above scanChunk is scanned in parallel chunks; the first bad
// element is reported whichever chunk finishes first.
func TestCheckFiniteLarge(t *testing.T) {
	n := 3*scanChunk/4 + 1000 // F32: 3 chunks and a part
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i % 97)
	}
	for _, at := range []int{scanChunk/4 + 5, n - 1} {
		w := append([]float32(nil), v...)
		w[at] = float32(math.NaN())
		w[n-1] = float32(math.Inf(-1))
		tens := floatTensor("big", F32, []int{n}, w)
		want := fmt.Sprintf("tensor \"big\": element %d is ", at)
		if err := tens.CheckFinite(); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("NaN at %d: %v", at, err)
		}
	}
	if err := floatTensor("big", F32, []int{n}, v).CheckFinite(); err != nil {
		t.Error(err)
	}
}

// Q8_0 and Q4_K tensors: every block's scales are checked (d; d and
// dmin), through a written file.
func TestCheckFiniteQuantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rows, cols := 4, 300 // a partial last block in both formats
	src := Float32Tensor("w", []int{rows, cols}, finiteValues(rng, rows*cols))
	for _, dt := range []DType{Q8_0, Q4_K} {
		qb, err := QuantizeTensor(src, dt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := (&Tensor{Name: "w", DType: dt, Shape: []int{rows, cols}, Data: qb}).CheckFinite(); err != nil {
			t.Fatalf("%s finite: %v", dt, err)
		}
		perRow := int(dt.RowBytes(cols)) / dt.BlockBytes()
		scales := []string{"d"}
		if dt == Q4_K {
			scales = append(scales, "dmin")
		}
		for si, sname := range scales {
			for _, blk := range []int{0, perRow + 1, rows*perRow - 1} {
				for _, h := range []uint16{0x7E00, 0x7C00, 0xFC00} {
					b := append([]byte(nil), qb...)
					binary.LittleEndian.PutUint16(b[blk*dt.BlockBytes()+2*si:], h)
					var buf bytes.Buffer
					q := &Tensor{Name: "lm.w", DType: dt, Shape: []int{rows, cols}, Data: b}
					if err := Write(&buf, []*Tensor{q}, nil); err != nil {
						t.Fatal(err)
					}
					f, err := FromBytes("q.safetensors", buf.Bytes())
					if err != nil {
						t.Fatal(err)
					}
					want := fmt.Sprintf("q.safetensors: tensor \"lm.w\": %s block %d (row %d) has scale %s %s: the checkpoint is corrupt",
						strings.ToLower(string(dt)), blk, blk/perRow, sname, describeFloat(F16, binary.LittleEndian.AppendUint16(nil, h)))
					if err := f.CheckFinite(); err == nil || err.Error() != want {
						t.Errorf("%s %s=%#x in block %d: %v, want %q", dt, sname, h, blk, err, want)
					}
				}
			}
		}
	}
}

// Integer tensors hold no NaN: their bytes are not read as floats.
func TestCheckFiniteIntegers(t *testing.T) {
	all := make([]int64, 16)
	for i := range all {
		all[i] = -1 // every bit set
	}
	if err := Int64Tensor("codes", []int{16}, all).CheckFinite(); err != nil {
		t.Error(err)
	}
}

// BenchmarkCheckFinite scans a 512 MiB BF16 checkpoint mapped from a file
// (page-cached after the first pass): the bytes per second are the cost of
// the full scan CheckFinite does.
func BenchmarkCheckFinite(b *testing.B) {
	const n = 256 << 20 // BF16 elements
	path := filepath.Join(b.TempDir(), "big.safetensors")
	data := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(0x3F80+i%64))
	}
	if err := WriteFile(path, []*Tensor{{Name: "w", DType: BF16, Shape: []int{n / 4096, 4096}, Data: data}}, nil); err != nil {
		b.Fatal(err)
	}
	data = nil
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	defer os.Remove(path)
	b.SetBytes(2 * n)
	b.ResetTimer()
	for b.Loop() {
		if err := f.CheckFinite(); err != nil {
			b.Fatal(err)
		}
	}
}

package weights

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Write serialises tensors as a safetensors image (header padded with spaces
// to 8 bytes, tensors in the given order).
func Write(w io.Writer, tensors []*Tensor, metadata map[string]string) error {
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	off := 0
	for _, t := range tensors {
		if len(t.Data) != t.Numel()*t.DType.Size() {
			return fmt.Errorf("tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": []int{off, off + len(t.Data)}}
		off += len(t.Data)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes tensors to path atomically (temporary file + rename).
func WriteFile(path string, tensors []*Tensor, metadata map[string]string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, tensors, metadata); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// CreateTemp makes 0600 files; outputs are ordinary files.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	}
	return nil
}

// Int64Tensor builds an I64 tensor from values.
func Int64Tensor(name string, shape []int, v []int64) *Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return &Tensor{Name: name, DType: I64, Shape: shape, Data: b}
}

// Float32Tensor builds an F32 tensor from values.
func Float32Tensor(name string, shape []int, v []float32) *Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &Tensor{Name: name, DType: F32, Shape: shape, Data: b}
}

// Spec names a tensor to synthesise.
type Spec struct {
	Name  string
	DType DType
	Shape []int
	Std   float32 // values are uniform in [−√3·Std, √3·Std]; 0 gives 1 (norm scales)
}

// Random builds an in-memory file of random tensors (benchmarks: real shapes
// without real checkpoints). Deterministic for a seed.
func Random(specs []Spec, seed uint64) *File {
	total := 0
	for _, s := range specs {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		total += n * s.DType.Size()
	}
	data := make([]byte, total)
	f := &File{Path: "random", data: data, tensors: map[string]*Tensor{}}
	x := seed*0x9E3779B97F4A7C15 + 1
	off := 0
	for _, s := range specs {
		t := &Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape}
		n := t.Numel()
		t.Data = data[off : off+n*s.DType.Size()]
		off += len(t.Data)
		amp := s.Std * 1.7320508
		for i := 0; i < n; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v := float32(1)
			if s.Std != 0 {
				v = (float32(x>>40)/float32(1<<24)*2 - 1) * amp
			}
			switch s.DType {
			case BF16:
				binary.LittleEndian.PutUint16(t.Data[2*i:], uint16(math.Float32bits(v)>>16))
			case F32:
				binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
			case I64:
				binary.LittleEndian.PutUint64(t.Data[8*i:], x%2048)
			}
		}
		f.tensors[s.Name] = t
		f.names = append(f.names, s.Name)
	}
	return f
}

package weights

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"io"
	"math"
	"runtime"
	"sync"
)

// Write serialises tensors as a safetensors image (header padded with spaces
// to 8 bytes, tensors in the given order). Quantized tensors are written as
// quantfile.go describes (U8 blocks, their format and logical shape in the
// metadata).
func Write(w io.Writer, tensors []*Tensor, metadata map[string]string) error {
	hs := make([]Header, len(tensors))
	meta := map[string]string{}
	for k, v := range metadata {
		meta[k] = v
	}
	for i, t := range tensors {
		if int64(len(t.Data)) != t.Bytes() {
			return fmt.Errorf("tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		hs[i] = Header{Name: t.Name, DType: t.DType, Shape: t.Shape}
		if t.DType.Quantized() {
			h, k, v := QuantizedHeader(t.Name, t.DType, t.Shape)
			hs[i] = h
			meta[k] = v
			meta[MetaFormat] = QuantFormat
		}
	}
	return WriteStream(w, hs, meta, func(i int, w io.Writer) error {
		_, err := w.Write(tensors[i].Data)
		return err
	})
}

// WriteFile writes tensors to path atomically (temporary file + rename).
func WriteFile(path string, tensors []*Tensor, metadata map[string]string) error {
	var b bytes.Buffer
	if err := Write(&b, tensors, metadata); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fileio.WriteAtomic(path, b.Bytes())
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
	Std   float32 // magnitude scale of the values; 0 gives exactly 1 (norm scales)
}

// Random builds an in-memory file of random tensors (benchmarks: real shapes
// without real checkpoints). Float values have a random sign and mantissa and
// a magnitude in [Std, 2·Std); integer tensors hold values in [0, 2048).
// The bulk is filled in parallel, chunk by chunk with per-chunk seeds, so
// the content depends on the seed only. Memory: the sum of the tensor sizes.
func Random(specs []Spec, seed uint64) *File {
	size := 0
	offs := make([]int, len(specs))
	for i, s := range specs {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		offs[i] = size
		size += n * s.DType.Size()
	}
	data := make([]byte, size)
	f := &File{Path: "random", data: data, tensors: map[string]*Tensor{}}
	type job struct {
		b    []byte
		spec *Spec
		seed uint64
	}
	jobs := make(chan job, 64)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				fillRandom(j.b, j.spec, j.seed)
			}
		}()
	}
	n := uint64(0)
	for i := range specs {
		s := &specs[i]
		t := &Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape}
		t.Data = data[offs[i] : offs[i]+t.Numel()*s.DType.Size()]
		f.tensors[s.Name] = t
		f.names = append(f.names, s.Name)
		const chunk = 1 << 22 // a multiple of every element size
		for b := t.Data; len(b) > 0; {
			c := min(len(b), chunk)
			n++
			jobs <- job{b[:c], s, seed*0x9E3779B97F4A7C15 + n*0xBF58476D1CE4E5B9}
			b = b[c:]
		}
	}
	close(jobs)
	wg.Wait()
	return f
}

func fillRandom(b []byte, s *Spec, seed uint64) {
	x := seed | 1
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	// Exponent bits of Std (values in [2^e, 2^(e+1)) with e = floor(log2 Std)).
	e32 := math.Float32bits(s.Std) & 0x7f800000
	one := s.Std == 0
	switch s.DType {
	case BF16:
		hi := uint64(e32>>16) * 0x0001000100010001
		for i := 0; i+8 <= len(b); i += 8 {
			v := next()&0x807F807F807F807F | hi
			if one {
				v = 0x3F803F803F803F80
			}
			binary.LittleEndian.PutUint64(b[i:], v)
		}
		for i := len(b) &^ 7; i+2 <= len(b); i += 2 {
			v := uint16(next())&0x807F | uint16(e32>>16)
			if one {
				v = 0x3F80
			}
			binary.LittleEndian.PutUint16(b[i:], v)
		}
	case F32:
		for i := 0; i+4 <= len(b); i += 4 {
			v := uint32(next())&0x807FFFFF | e32
			if one {
				v = 0x3F800000
			}
			binary.LittleEndian.PutUint32(b[i:], v)
		}
	case I64:
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], next()%2048)
		}
	}
}

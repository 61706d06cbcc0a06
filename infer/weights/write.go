package weights

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/pp-offline/pp-offline/internal/fileio"
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
	return random(specs, seed, false)
}

// RandomMapped is Random in one anonymous mapping outside Go's heap, advised
// for huge pages like a mapped checkpoint (anonBytes), so that a benchmark on
// random weights reads them from the same kind of pages as a real run (on
// Linux a checkpoint's mapping is held in 2 MiB folios, the heap in 4 KiB
// pages, and the batch tiles read the latter ~10 % slower: docs/PERFORMANCE.md).
// The caller must Close the file (it unmaps the memory) and not before its
// tensors are done with. Where no such mapping can be made it is Random.
func RandomMapped(specs []Spec, seed uint64) *File {
	return random(specs, seed, true)
}

func random(specs []Spec, seed uint64, mapped bool) *File {
	size := 0
	offs := make([]int, len(specs))
	for i, s := range specs {
		offs[i] = size
		size += specBytes(&s)
	}
	var data []byte
	if mapped {
		data, mapped = anonBytes(size)
	} else {
		data = make([]byte, size)
	}
	f := &File{Path: "random", data: data, mapped: mapped, tensors: map[string]*Tensor{}}
	g := newRandomFiller(seed)
	for i := range specs {
		s := &specs[i]
		t := &Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape}
		t.Data = data[offs[i] : offs[i]+specBytes(s)]
		f.tensors[s.Name] = t
		f.names = append(f.names, s.Name)
		g.fill(t.Data, s)
	}
	g.wait()
	g.close()
	return f
}

// WriteRandom streams the safetensors image of Random(specs, seed) — the
// same bytes — to w, one tensor in memory at a time (a 7B-shape model
// without 16 GB of RAM).
func WriteRandom(w io.Writer, specs []Spec, seed uint64, metadata map[string]string) error {
	hs := make([]Header, len(specs))
	largest := 0
	for i, s := range specs {
		hs[i] = Header{Name: s.Name, DType: s.DType, Shape: s.Shape}
		largest = max(largest, specBytes(&s))
	}
	buf := make([]byte, largest)
	g := newRandomFiller(seed)
	defer g.close()
	return WriteStream(w, hs, metadata, func(i int, w io.Writer) error {
		b := buf[:specBytes(&specs[i])]
		g.fill(b, &specs[i])
		g.wait()
		_, err := w.Write(b)
		return err
	})
}

func specBytes(s *Spec) int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n * s.DType.Size()
}

// randomFiller fills tensors chunk by chunk on GOMAXPROCS goroutines, each
// chunk from its own seed: the n-th chunk of the whole sequence of tensors
// gets seed·φ + n·c, so the content depends on the seed and the order of
// the tensors only.
type randomFiller struct {
	seed, n uint64
	jobs    chan randomJob
	wg      sync.WaitGroup // workers
	pending sync.WaitGroup // chunks queued and not filled
	closed  bool
}

type randomJob struct {
	b    []byte
	spec *Spec
	seed uint64
}

func newRandomFiller(seed uint64) *randomFiller {
	g := &randomFiller{seed: seed, jobs: make(chan randomJob, 64)}
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for j := range g.jobs {
				fillRandom(j.b, j.spec, j.seed)
				g.pending.Done()
			}
		}()
	}
	return g
}

// fill queues b, the data of the tensor s, in chunks.
func (g *randomFiller) fill(b []byte, s *Spec) {
	const chunk = 1 << 22 // a multiple of every element size
	for len(b) > 0 {
		c := min(len(b), chunk)
		g.n++
		g.pending.Add(1)
		g.jobs <- randomJob{b[:c], s, g.seed*0x9E3779B97F4A7C15 + g.n*0xBF58476D1CE4E5B9}
		b = b[c:]
	}
}

// wait returns when every queued chunk is filled.
func (g *randomFiller) wait() { g.pending.Wait() }

// close stops the workers (after wait).
func (g *randomFiller) close() {
	if !g.closed {
		g.closed = true
		close(g.jobs)
		g.wg.Wait()
	}
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

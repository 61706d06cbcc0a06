// Package weights opens safetensors model files by memory-mapping them. Tensors
// stay in the file's dtype (BF16, F16, F32, I64, …) and are converted where
// they are used; nothing is copied whole into RAM.
package weights

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/nlpodyssey/safetensors"
)

// DType is a tensor element type as safetensors names it.
type DType string

const (
	BF16 DType = "BF16"
	F16  DType = "F16"
	F32  DType = "F32"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	BOOL DType = "BOOL"
)

// Size is the byte width of one element.
func (d DType) Size() int {
	switch d {
	case BF16, F16, I16:
		return 2
	case F32, I32:
		return 4
	case F64, I64:
		return 8
	case I8, U8, BOOL:
		return 1
	}
	return 0
}

// Tensor is a view of one tensor of a mapped file (or of memory).
type Tensor struct {
	Name  string
	DType DType
	Shape []int  // the logical shape (a quantized tensor's too; its Data is blocks)
	Data  []byte // little-endian elements or blocks (Bytes() of them); aliases the mapping
}

// Numel is the number of elements (of the logical shape, for a quantized
// tensor).
func (t *Tensor) Numel() int {
	n := 1
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// File is an open, memory-mapped safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	data     []byte
	mapped   bool        // data is a mapping that Close unmaps (a file's, or RandomMapped's)
	opened   os.FileInfo // the file as mapped (CheckIntact)
	tensors  map[string]*Tensor
	names    []string
}

// Open maps path and parses its header. Errors name the file and the problem.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a safetensors file", path)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: not a safetensors file (only %d bytes)", path, size)
	}
	data, err := mapFile(fd, size)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot map file: %w", path, err)
	}
	f, err := parse(path, data)
	if err != nil {
		unmapFile(data)
		return nil, err
	}
	f.mapped, f.opened = true, st
	return f, nil
}

// FromBytes parses an in-memory safetensors image (tests, small files).
func FromBytes(name string, data []byte) (*File, error) { return parse(name, data) }

type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

func parse(path string, data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%s: not a safetensors file (only %d bytes)", path, len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n == 0 || n > 100_000_000 || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%s: not a safetensors file or truncated: header length %d, file has %d bytes", path, n, len(data))
	}
	hdr := data[8 : 8+n]
	trim := strings.TrimSpace(string(hdr))
	if !strings.HasPrefix(trim, "{") {
		return nil, fmt.Errorf("%s: not a safetensors file (header is not a JSON object)", path)
	}
	// Our own pass first, for messages that name the tensor.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("%s: bad safetensors header: %v", path, err)
	}
	body := int64(len(data)) - 8 - int64(n)
	f := &File{Path: path, data: data, tensors: map[string]*Tensor{}}
	type span struct {
		name       string
		start, end int64
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%s: bad __metadata__: %v", path, err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: bad header entry: %v", path, name, err)
		}
		dt := DType(e.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("%s: tensor %q: unsupported dtype %q", path, name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets must have 2 entries", path, name)
		}
		numel := int64(1)
		shape := make([]int, len(e.Shape))
		for i, s := range e.Shape {
			if s < 0 || (numel > 0 && s > math.MaxInt32) {
				return nil, fmt.Errorf("%s: tensor %q: bad shape %v", path, name, e.Shape)
			}
			numel *= s
			if numel > 1<<40 {
				return nil, fmt.Errorf("%s: tensor %q: shape %v too large", path, name, e.Shape)
			}
			shape[i] = int(s)
		}
		start, end := e.DataOffsets[0], e.DataOffsets[1]
		if start < 0 || end < start {
			return nil, fmt.Errorf("%s: tensor %q: bad data_offsets [%d, %d]", path, name, start, end)
		}
		if end-start != numel*int64(dt.Size()) {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] hold %d bytes, shape %v of %s needs %d", path, name, start, end, end-start, e.Shape, dt, numel*int64(dt.Size()))
		}
		if end > body {
			return nil, fmt.Errorf("%s: truncated file: tensor %q ends at byte %d of the data section, which has %d bytes", path, name, end, body)
		}
		base := 8 + int64(n)
		f.tensors[name] = &Tensor{Name: name, DType: dt, Shape: shape, Data: data[base+start : base+end : base+end]}
		spans = append(spans, span{name, start, end})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return nil, fmt.Errorf("%s: header lies about offsets: tensors %q and %q overlap", path, spans[i-1].name, spans[i].name)
		}
	}
	// The reference reader's own validation (contiguity, exact size).
	if _, _, err := safetensors.ReadMetadata(data); err != nil {
		return nil, fmt.Errorf("%s: invalid safetensors file: %v", path, err)
	}
	for _, s := range spans {
		f.names = append(f.names, s.name)
	}
	if err := f.applyQuantMetadata(); err != nil {
		return nil, err
	}
	return f, nil
}

// Close unmaps the file. Tensors obtained from it must not be used afterwards.
func (f *File) Close() error {
	if f == nil || !f.mapped || f.data == nil {
		return nil
	}
	err := unmapFile(f.data)
	f.data = nil
	return err
}

// Names lists the tensors in file order.
func (f *File) Names() []string { return f.names }

// Has reports whether the file holds a tensor called name.
func (f *File) Has(name string) bool { _, ok := f.tensors[name]; return ok }

// Get returns the tensor called name. When shape is given, the tensor's shape
// must equal it; the error names the tensor, the expected and the found shape.
func (f *File) Get(name string, shape ...int) (*Tensor, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor %q", filepath.Base(f.Path), name)
	}
	if shape != nil && !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, the config expects %v", filepath.Base(f.Path), name, t.Shape, shape)
	}
	return t, nil
}

// Float32s converts any float tensor to a new float32 slice.
func (t *Tensor) Float32s() []float32 {
	n := t.Numel()
	out := make([]float32, n)
	d := t.Data
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16)
		}
	case F16:
		for i := range out {
			out[i] = HalfToFloat(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	default:
		for i, v := range t.Int64s() {
			out[i] = float32(v)
		}
	}
	return out
}

// Int64s converts any integer or bool tensor to a new int64 slice.
func (t *Tensor) Int64s() []int64 {
	n := t.Numel()
	out := make([]int64, n)
	d := t.Data
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(d[i]))
		}
	case U8, BOOL:
		for i := range out {
			out[i] = int64(d[i])
		}
	default:
		for i, v := range t.Float32s() {
			out[i] = int64(v)
		}
	}
	return out
}

// Uint16s views a 2-byte tensor's elements without copying when the data is
// aligned (always for files whose header is padded to 8 bytes), else copies.
func (t *Tensor) Uint16s() []uint16 {
	n := len(t.Data) / 2
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&t.Data[0])), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(t.Data[2*i:])
	}
	return out
}

// F32View views an F32 tensor without copying when aligned, else copies.
func (t *Tensor) F32View() []float32 {
	n := len(t.Data) / 4
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n)
	}
	return t.Float32s()
}

// HalfToFloat widens an IEEE binary16 value exactly.
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: value = mant * 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

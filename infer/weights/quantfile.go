package weights

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// A quantized checkpoint is a plain safetensors file: each quantized tensor
// is a U8 tensor of shape [rows, RowBytes(cols)] holding its blocks, and
// __metadata__ says what it is, so that every safetensors reader can open
// the file and pp-offline maps the blocks directly (no conversion at load):
//
//	"pp_offline.format"        QuantFormat ("pp-offline-quant/1")
//	"pp_offline.quant"         the format the tool was asked for (q8_0, q4_k)
//	"pp_offline.source_sha256" sha256 of the checkpoint it was made from
//	"pp_offline.tool_version"  the pp-offline version that wrote it
//	"pp_offline.tensor.<name>" {"dtype":"Q8_0","shape":[rows,cols]} per
//	                           quantized tensor: its block format and its
//	                           logical shape (what the model declares)
//
// Tensors without such an entry are ordinary (embeddings, norms, and what
// the tool left in the source dtype).
const (
	QuantFormat       = "pp-offline-quant/1"
	MetaFormat        = "pp_offline.format"
	MetaQuant         = "pp_offline.quant"
	MetaSourceSHA256  = "pp_offline.source_sha256"
	MetaToolVersion   = "pp_offline.tool_version"
	MetaTensorPrefix  = "pp_offline.tensor."
	maxQuantDimension = 1 << 31
)

type quantEntry struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// QuantEntry is the metadata value describing a quantized tensor.
func QuantEntry(dt DType, shape []int) string {
	b, _ := json.Marshal(quantEntry{DType: string(dt), Shape: shape})
	return string(b)
}

// Bytes is the tensor's storage size (its Data length for a valid tensor).
func (t *Tensor) Bytes() int64 { return t.DType.StorageBytes(t.Shape) }

// applyQuantMetadata turns the U8 tensors that __metadata__ names into
// quantized tensors of their logical shape (Data stays the mapped blocks).
func (f *File) applyQuantMetadata() error {
	base := filepath.Base(f.Path)
	var names []string
	for k := range f.Metadata {
		if strings.HasPrefix(k, MetaTensorPrefix) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if v := f.Metadata[MetaFormat]; v != QuantFormat {
		return fmt.Errorf("%s: quantized tensors in metadata but %s is %q, want %q", base, MetaFormat, v, QuantFormat)
	}
	for _, k := range names {
		name := strings.TrimPrefix(k, MetaTensorPrefix)
		t, ok := f.tensors[name]
		if !ok {
			return fmt.Errorf("%s: metadata describes tensor %q, which the file does not hold", base, name)
		}
		var e quantEntry
		if err := json.Unmarshal([]byte(f.Metadata[k]), &e); err != nil {
			return fmt.Errorf("%s: tensor %q: bad quantization metadata %q: %v", base, name, f.Metadata[k], err)
		}
		dt := DType(e.DType)
		if !dt.Quantized() {
			return fmt.Errorf("%s: tensor %q: unknown quantized format %q", base, name, e.DType)
		}
		if len(e.Shape) == 0 || len(e.Shape) > 8 {
			return fmt.Errorf("%s: tensor %q: bad logical shape %v", base, name, e.Shape)
		}
		numel := int64(1)
		for _, s := range e.Shape {
			if s <= 0 || s >= maxQuantDimension {
				return fmt.Errorf("%s: tensor %q: bad logical shape %v", base, name, e.Shape)
			}
			numel *= int64(s)
			if numel > 1<<40 {
				return fmt.Errorf("%s: tensor %q: logical shape %v too large", base, name, e.Shape)
			}
		}
		if t.DType != U8 {
			return fmt.Errorf("%s: tensor %q: a quantized tensor is stored as U8, not %s", base, name, t.DType)
		}
		if want := dt.StorageBytes(e.Shape); int64(len(t.Data)) != want {
			return fmt.Errorf("%s: tensor %q: %d bytes of blocks, %s %v needs %d", base, name, len(t.Data), dt, e.Shape, want)
		}
		t.DType, t.Shape = dt, append([]int(nil), e.Shape...)
	}
	return nil
}

// Header is one tensor as a streamed file stores it: name, stored dtype
// and shape (a quantized tensor: U8 [rows, RowBytes(cols)], see
// QuantizedHeader).
type Header struct {
	Name  string
	DType DType
	Shape []int
}

// Bytes is the header's data size.
func (h Header) Bytes() int64 { return h.DType.StorageBytes(h.Shape) }

// QuantizedHeader is the stored form of a quantized tensor of logical
// shape (its last dimension is the row), with its metadata entry.
func QuantizedHeader(name string, dt DType, shape []int) (Header, string, string) {
	rows := 1
	for _, s := range shape[:len(shape)-1] {
		rows *= s
	}
	rb := dt.RowBytes(shape[len(shape)-1])
	return Header{Name: name, DType: U8, Shape: []int{rows, int(rb)}}, MetaTensorPrefix + name, QuantEntry(dt, shape)
}

// WriteStream writes a safetensors image tensor by tensor: the header
// (tensors in the given order), then data(i, w) for each tensor i, which
// must write exactly hs[i].Bytes() bytes. Nothing is held beyond what data
// holds, so a large file needs no more memory than one tensor.
func WriteStream(w io.Writer, hs []Header, metadata map[string]string, data func(i int, w io.Writer) error) error {
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for _, h := range hs {
		n := h.Bytes()
		hdr[h.Name] = map[string]any{"dtype": h.DType, "shape": h.Shape, "data_offsets": []int64{off, off + n}}
		off += n
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
	for i, h := range hs {
		cw := &countWriter{w: w}
		if err := data(i, cw); err != nil {
			return err
		}
		if cw.n != h.Bytes() {
			return fmt.Errorf("tensor %q: wrote %d bytes, the header says %d", h.Name, cw.n, h.Bytes())
		}
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// QuantizeTensor quantizes a float tensor (BF16, F16, F32; its last
// dimension is the row) into a new buffer of dt blocks, reusing buf when it
// is large enough.
func QuantizeTensor(t *Tensor, dt DType, buf []byte) ([]byte, error) {
	return QuantizeTensorPar(t, dt, buf, func(n int, f func(int)) {
		for i := range n {
			f(i)
		}
	})
}

// quantizeRows quantizes rows [r0, r1) of t (rows of cols) into out.
func quantizeRows(t *Tensor, dt DType, r0, r1, cols int, out []byte) {
	rb, es := int(dt.RowBytes(cols)), t.DType.Size()
	row := make([]float32, cols)
	for r := r0; r < r1; r++ {
		src := t.Data[r*cols*es : (r+1)*cols*es]
		for j := range row {
			switch t.DType {
			case BF16:
				row[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*j:])) << 16)
			case F16:
				row[j] = HalfToFloat(binary.LittleEndian.Uint16(src[2*j:]))
			case F32:
				row[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
			}
		}
		QuantizeRow(dt, out[(r-r0)*rb:(r-r0+1)*rb], row)
	}
}

// quantizable checks that t is a float tensor of rows × cols (its last
// dimension) with its data, and dt a block format.
func quantizable(t *Tensor, dt DType) (rows, cols int, err error) {
	switch {
	case !dt.Quantized():
		return 0, 0, fmt.Errorf("tensor %q: %s is not a block format", t.Name, dt)
	case t.DType != BF16 && t.DType != F16 && t.DType != F32:
		return 0, 0, fmt.Errorf("tensor %q: cannot quantize %s", t.Name, t.DType)
	case len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] <= 0:
		return 0, 0, fmt.Errorf("tensor %q: cannot quantize shape %v", t.Name, t.Shape)
	case int64(len(t.Data)) != t.Bytes():
		return 0, 0, fmt.Errorf("tensor %q: %d bytes for %s %v", t.Name, len(t.Data), t.DType, t.Shape)
	}
	cols = t.Shape[len(t.Shape)-1]
	return t.Numel() / cols, cols, nil
}

// QuantizeTensorPar is QuantizeTensor with the rows split into tasks of 64
// for par (ops.Parallel); the bytes do not depend on the split.
func QuantizeTensorPar(t *Tensor, dt DType, buf []byte, par func(n int, f func(i int))) ([]byte, error) {
	rows, cols, err := quantizable(t, dt)
	if err != nil {
		return nil, err
	}
	size := dt.StorageBytes(t.Shape)
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	rb := int(dt.RowBytes(cols))
	const chunk = 64
	par((rows+chunk-1)/chunk, func(c int) {
		r0, r1 := c*chunk, min((c+1)*chunk, rows)
		quantizeRows(t, dt, r0, r1, cols, buf[r0*rb:r1*rb])
	})
	return buf, nil
}

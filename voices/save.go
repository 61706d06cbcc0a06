package voices

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"hash/crc32"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// SavePT writes p as a `.pt` file that torch.load (and so the reference's
// load_voice_prompt_embeddings) reads: embeddings as float32 [N,1,1,dim],
// cache as int64 [1,17,cols], in torch's zip layout with the file stem as the
// top folder. The file is written to a temporary file in the same directory
// and renamed into place, so a reader never sees a partial file.
func SavePT(path string, p *Prompt) error {
	base := filepath.Base(path)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	var buf bytes.Buffer
	if err := EncodePT(&buf, stem, p); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fileio.WriteAtomic(path, buf.Bytes())
}

// EncodePT writes p as a torch.save zip archive whose entries live under the
// folder stem/: data.pkl, byteorder, data/0 (embeddings), data/1 (cache),
// version.
func EncodePT(w io.Writer, stem string, p *Prompt) error {
	return encodePT(w, stem, p, true)
}

// encodePT can leave out the byteorder record (torch ≥ 2.1 writes it, the
// torch 1.13 that made the fixtures did not): without it the output is
// byte-identical to torch 1.13's torch.save.
func encodePT(w io.Writer, stem string, p *Prompt, byteorder bool) error {
	if err := validate(p); err != nil {
		return err
	}
	if stem == "" || strings.ContainsAny(stem, "/\\") {
		return fmt.Errorf("invalid archive folder name %q", stem)
	}
	n, dim := len(p.Embeddings), len(p.Embeddings[0])
	cols := len(p.Cache[0])

	emb := make([]byte, 0, 4*n*dim)
	for _, row := range p.Embeddings {
		for _, v := range row {
			emb = binary.LittleEndian.AppendUint32(emb, math.Float32bits(v))
		}
	}
	cache := make([]byte, 0, 8*NumStreams*cols)
	for _, row := range p.Cache {
		for _, v := range row {
			cache = binary.LittleEndian.AppendUint64(cache, uint64(v))
		}
	}

	zw := &torchZip{w: w}
	zw.record(stem+"/data.pkl", promptPickle(n, dim, cols))
	if byteorder {
		zw.record(stem+"/byteorder", []byte("little"))
	}
	zw.record(stem+"/data/0", emb)
	zw.record(stem+"/data/1", cache)
	zw.record(stem+"/version", []byte("3\n"))
	return zw.finish()
}

func validate(p *Prompt) error {
	if p == nil || len(p.Embeddings) == 0 {
		return errors.New("voice prompt has no embeddings")
	}
	dim := len(p.Embeddings[0])
	if dim == 0 {
		return errors.New("voice prompt embeddings have dimension 0")
	}
	for i, r := range p.Embeddings {
		if len(r) != dim {
			return fmt.Errorf("embedding row %d has %d values, row 0 has %d", i, len(r), dim)
		}
	}
	if len(p.Cache) != NumStreams {
		return fmt.Errorf("cache has %d rows, want %d", len(p.Cache), NumStreams)
	}
	cols := len(p.Cache[0])
	if cols == 0 {
		return errors.New("cache has no columns")
	}
	for i, r := range p.Cache {
		if len(r) != cols {
			return fmt.Errorf("cache row %d has %d columns, row 0 has %d", i, len(r), cols)
		}
	}
	return nil
}

// ---- pickle (protocol 2), as Python's pickler writes torch.save's dict ----

type pickler struct {
	b    []byte
	memo int
}

func (p *pickler) put() {
	if p.memo < 256 {
		p.b = append(p.b, 'q', byte(p.memo))
	} else {
		p.b = append(p.b, 'r')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(p.memo))
	}
	p.memo++
}

func (p *pickler) get(i int) {
	if i < 256 {
		p.b = append(p.b, 'h', byte(i))
	} else {
		p.b = append(p.b, 'j')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(i))
	}
}

// str writes a memoised BINUNICODE and returns its memo index.
func (p *pickler) str(s string) int {
	p.b = append(p.b, 'X')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
	p.put()
	return p.memo - 1
}

func (p *pickler) global(module, name string) int {
	p.b = append(p.b, 'c')
	p.b = append(p.b, module+"\n"+name+"\n"...)
	p.put()
	return p.memo - 1
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v <= 0xff:
		p.b = append(p.b, 'K', byte(v))
	case v >= 0 && v <= 0xffff:
		p.b = append(p.b, 'M')
		p.b = binary.LittleEndian.AppendUint16(p.b, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.b = append(p.b, 'J')
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(v)))
	default: // LONG1, two's complement little-endian, shortest form
		var enc []byte
		for x := v; ; x >>= 8 {
			enc = append(enc, byte(x))
			if (x >= -128 && x <= 127) && (x < 0) == (byte(x)&0x80 != 0) {
				break
			}
		}
		p.b = append(p.b, 0x8a, byte(len(enc)))
		p.b = append(p.b, enc...)
	}
}

// ints writes a memoised tuple of ints (TUPLE1-3 for short ones, as
// protocol 2 does).
func (p *pickler) ints(v []int64) {
	if len(v) == 0 {
		p.b = append(p.b, ')')
		return
	}
	if len(v) > 3 {
		p.b = append(p.b, '(')
	}
	for _, x := range v {
		p.int(x)
	}
	if len(v) > 3 {
		p.b = append(p.b, 't')
	} else {
		p.b = append(p.b, 0x84+byte(len(v))) // TUPLE1 0x85, TUPLE2 0x86, TUPLE3 0x87
	}
	p.put()
}

// promptPickle is data.pkl for {"embeddings": float32 [n,1,1,dim] in storage
// "0", "cache": int64 [1,17,cols] in storage "1"}, opcode for opcode what
// torch.save writes for it.
func promptPickle(n, dim, cols int) []byte {
	p := &pickler{}
	p.b = append(p.b, 0x80, 2, '}') // PROTO 2, EMPTY_DICT
	p.put()
	p.b = append(p.b, '(') // MARK for SETITEMS
	memo := map[string]int{}
	tensor := func(key string, class string, storageKey string, numel int64, shape, stride []int64) {
		p.str(key)
		if i, ok := memo["rebuild"]; ok {
			p.get(i)
		} else {
			memo["rebuild"] = p.global("torch._utils", "_rebuild_tensor_v2")
		}
		p.b = append(p.b, '(', '(') // MARK args, MARK persistent id
		if i, ok := memo["storage"]; ok {
			p.get(i)
		} else {
			memo["storage"] = p.str("storage")
		}
		p.global("torch", class)
		p.str(storageKey)
		if i, ok := memo["cpu"]; ok {
			p.get(i)
		} else {
			memo["cpu"] = p.str("cpu")
		}
		p.int(numel)
		p.b = append(p.b, 't') // persistent id tuple
		p.put()
		p.b = append(p.b, 'Q') // BINPERSID
		p.int(0)               // storage offset
		p.ints(shape)
		p.ints(stride)
		p.b = append(p.b, 0x89) // NEWFALSE: requires_grad
		if i, ok := memo["od"]; ok {
			p.get(i)
		} else {
			memo["od"] = p.global("collections", "OrderedDict")
		}
		p.b = append(p.b, ')', 'R') // OrderedDict(): backward hooks
		p.put()
		p.b = append(p.b, 't') // args tuple
		p.put()
		p.b = append(p.b, 'R') // _rebuild_tensor_v2(*args)
		p.put()
	}
	d := int64(dim)
	tensor("embeddings", "FloatStorage", "0", int64(n)*d, []int64{int64(n), 1, 1, d}, []int64{d, d, d, 1})
	c := int64(cols)
	tensor("cache", "LongStorage", "1", NumStreams*c, []int64{1, NumStreams, c}, []int64{NumStreams * c, c, 1})
	p.b = append(p.b, 'u', '.') // SETITEMS, STOP
	return p.b
}

// ---- zip, laid out as torch's PyTorchStreamWriter (miniz) does ----
//
// Stored (uncompressed) records; each local header carries an "FB" extra
// field of 'Z' padding so that the data starts on a 64-byte boundary; sizes
// and CRC follow in a data descriptor (flags 0x0808); version fields, times
// and dates are 0; the central directory is followed by a zip64 end record,
// a zip64 locator and the classic end record.

type torchZip struct {
	w       io.Writer
	off     int64
	err     error
	entries []zipEntry
}

type zipEntry struct {
	name   string
	crc    uint32
	size   uint32
	offset uint32
}

func (z *torchZip) write(b []byte) {
	if z.err != nil {
		return
	}
	n, err := z.w.Write(b)
	z.off += int64(n)
	z.err = err
}

func (z *torchZip) record(name string, data []byte) {
	if z.err == nil && (int64(len(data)) >= math.MaxUint32 || z.off >= math.MaxUint32) {
		z.err = errors.New("voice prompt too large for a zip32 archive")
	}
	if z.err != nil {
		return
	}
	le := binary.LittleEndian
	start := z.off + 30 + int64(len(name)) + 4
	pad := (64 - start%64) % 64
	extra := append([]byte{'F', 'B', byte(pad), byte(pad >> 8)}, bytes.Repeat([]byte{'Z'}, int(pad))...)
	crc := crc32.ChecksumIEEE(data)
	z.entries = append(z.entries, zipEntry{name: name, crc: crc, size: uint32(len(data)), offset: uint32(z.off)})

	h := make([]byte, 0, 30+len(name)+len(extra))
	h = le.AppendUint32(h, 0x04034b50)
	h = le.AppendUint16(h, 0)      // version needed
	h = le.AppendUint16(h, 0x0808) // data descriptor, UTF-8
	h = le.AppendUint16(h, 0)      // stored
	h = le.AppendUint32(h, 0)      // time, date
	h = le.AppendUint32(h, 0)      // CRC (in the descriptor)
	h = le.AppendUint64(h, 0)      // sizes (in the descriptor)
	h = le.AppendUint16(h, uint16(len(name)))
	h = le.AppendUint16(h, uint16(len(extra)))
	h = append(h, name...)
	h = append(h, extra...)
	z.write(h)
	z.write(data)
	d := le.AppendUint32(nil, 0x08074b50)
	d = le.AppendUint32(d, crc)
	d = le.AppendUint32(d, uint32(len(data)))
	d = le.AppendUint32(d, uint32(len(data)))
	z.write(d)
}

func (z *torchZip) finish() error {
	if z.err != nil {
		return z.err
	}
	le := binary.LittleEndian
	cdStart := z.off
	for _, e := range z.entries {
		c := le.AppendUint32(nil, 0x02014b50)
		c = le.AppendUint16(c, 0)      // version made by
		c = le.AppendUint16(c, 0)      // version needed
		c = le.AppendUint16(c, 0x0808) // flags
		c = le.AppendUint16(c, 0)      // stored
		c = le.AppendUint32(c, 0)      // time, date
		c = le.AppendUint32(c, e.crc)
		c = le.AppendUint32(c, e.size)
		c = le.AppendUint32(c, e.size)
		c = le.AppendUint16(c, uint16(len(e.name)))
		c = le.AppendUint16(c, 0) // extra
		c = le.AppendUint16(c, 0) // comment
		c = le.AppendUint16(c, 0) // disk
		c = le.AppendUint16(c, 0) // internal attributes
		c = le.AppendUint32(c, 0) // external attributes
		c = le.AppendUint32(c, e.offset)
		c = append(c, e.name...)
		z.write(c)
	}
	cdSize := z.off - cdStart
	n := uint64(len(z.entries))
	eocd64 := z.off
	e := le.AppendUint32(nil, 0x06064b50)
	e = le.AppendUint64(e, 44)     // size of the rest of this record
	e = le.AppendUint16(e, 0x031e) // version made by (miniz)
	e = le.AppendUint16(e, 0x002d) // version needed: 4.5 (zip64)
	e = le.AppendUint32(e, 0)      // this disk
	e = le.AppendUint32(e, 0)      // disk with the central directory
	e = le.AppendUint64(e, n)
	e = le.AppendUint64(e, n)
	e = le.AppendUint64(e, uint64(cdSize))
	e = le.AppendUint64(e, uint64(cdStart))
	e = le.AppendUint32(e, 0x07064b50) // zip64 locator
	e = le.AppendUint32(e, 0)
	e = le.AppendUint64(e, uint64(eocd64))
	e = le.AppendUint32(e, 1)
	e = le.AppendUint32(e, 0x06054b50) // end of central directory
	e = le.AppendUint16(e, 0)
	e = le.AppendUint16(e, 0)
	e = le.AppendUint16(e, uint16(n))
	e = le.AppendUint16(e, uint16(n))
	e = le.AppendUint32(e, uint32(cdSize))
	e = le.AppendUint32(e, uint32(cdStart))
	e = le.AppendUint16(e, 0) // comment length
	z.write(e)
	return z.err
}

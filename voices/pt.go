// Package voices loads and saves PersonaPlex voice prompts: the `.pt` files of
// precomputed voice-prompt embeddings that the reference writes with
// torch.save and reads with torch.load (LMGen.load_voice_prompt_embeddings),
// and the lookup of a voice prompt by name in a voice directory (offline.py).
//
// A `.pt` file is a zip archive (torch ≥ 1.6 format) whose entries share one
// top folder (torch.save uses the file stem): `data.pkl`, a pickle (protocol
// 2) of {"embeddings": float tensor [N,1,1,dim], "cache": int64 tensor
// [1,17,max_delay+3]}, and one raw little-endian storage file per tensor under
// `data/<key>`.
//
// Loading never executes anything: the pickle is first scanned opcode by
// opcode (every length checked against the data, only known opcodes, every
// global named checked against an allow-list), then unpickled with gopickle
// whose FindClass and PersistentLoad only know tensor rebuilding
// (torch._utils._rebuild_tensor_v2 / _rebuild_parameter), the torch storage
// classes and collections.OrderedDict. Anything else (os.system,
// builtins.eval, …) is refused with an error.
//
// Loading never inflates more than it uses: every entry's directory sizes
// are checked against the file (compressed data inside it, a stored entry's
// two sizes equal, a deflated one within deflate's ratio); the pickle is
// read up to its declared size, at most 16 MiB; a storage entry must
// declare at least the storage's size, and only the bytes the used views
// reach are inflated (at most 1 GiB), so a small file cannot make it
// inflate or allocate a gigabyte (a storage entry read to its end has its
// CRC checked; bytes past what the views need are not read).
package voices

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"io"
	"math"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// NumStreams is the number of LM token streams in a PersonaPlex cache (text,
// 8 agent audio codebooks, 8 user audio codebooks).
const NumStreams = 17

// Prompt is a saved voice prompt.
type Prompt struct {
	// Embeddings holds one row of the model dimension per voice-prompt step
	// (the [N,1,1,dim] tensor), widened to float32.
	Embeddings [][]float32
	// Cache is the LMGen token ring cache after the voice prompt: NumStreams
	// rows of max_delay+3 columns (the [1,17,cols] tensor).
	Cache [][]int64
}

// Limits that keep a hostile file from making us allocate or inflate
// unbounded memory (variables so that tests can lower them): the pickle
// entry is read up to maxPickleBytes; of a storage entry only the bytes the
// tensor views need are inflated, at most maxStorageBytes.
var (
	maxPickleBytes  int64 = 16 << 20
	maxStorageBytes int64 = 1 << 30
)

// maxDeflateRatio bounds how much a deflate stream can inflate: deflate's
// best is 258 bytes from 2 bits (≈ 1032:1); an entry whose zip directory
// declares more than this times its compressed size (plus a little for
// tiny entries) is refused as a lie before it is read.
const maxDeflateRatio = 1100

// Limits bound what a voice prompt may hold, checked against the shapes a
// file declares before anything is allocated for them. The zero value is
// the package's own bounds only.
type Limits struct {
	MaxRows int  // embedding rows (voice-prompt steps); 0: MaxRows
	Dim     int  // the model dimension the rows must have; 0: any
	Finite  bool // refuse NaN and infinite embeddings (a run needs them finite; the format carries any float)
}

// MaxRows bounds the embedding rows of any voice prompt: far above the
// model's context (3000 steps), far below what a hostile file can declare.
const MaxRows = 1 << 16

// RunRowsFloor is the fewest voice-prompt steps a run may take whatever
// its model's context (4096 steps: 5.5 minutes); RunRows is the bound.
const RunRowsFloor = 4096

// RunRows is the most voice-prompt steps a run of a model of this context
// takes: the bound a voice file is loaded under and `voice` writes within.
func RunRows(context int) int { return max(context, RunRowsFloor) }

// LoadPT reads a voice prompt `.pt` file written by the reference (or by
// SavePT). Tensors saved from a GPU (location "cuda:0") load as well.
func LoadPT(path string) (*Prompt, error) { return LoadPTLimits(path, Limits{}) }

// LoadPTLimits is LoadPT refusing, before allocating them, embeddings of
// more rows than l.MaxRows or of another width than l.Dim, and with
// l.Finite embeddings holding NaN or infinities.
func LoadPTLimits(path string, l Limits) (*Prompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a .pt file", path)
	}
	p, err := decodePT(f, st.Size(), l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DecodePT is LoadPT for a file held in memory; name is used in error
// messages.
func DecodePT(data []byte, name string) (*Prompt, error) {
	p, err := decodePT(bytes.NewReader(data), int64(len(data)), Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

func decodePT(r io.ReaderAt, size int64, l Limits) (p *Prompt, err error) {
	var magic [4]byte
	n, rerr := r.ReadAt(magic[:], 0)
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		// An I/O error (a bad sector, a lost network mount) is said as
		// such, not as a file of the wrong kind.
		return nil, fmt.Errorf("reading: %w", fileio.PathErr(rerr))
	}
	if n < 4 || string(magic[:]) != "PK\x03\x04" {
		if n >= 1 && magic[0] == 0x80 {
			return nil, errors.New("legacy (pre-1.6, non-zip) torch.save format is not supported; re-save it with torch ≥ 1.6")
		}
		return nil, errors.New("not a torch .pt file (not a zip archive)")
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a readable zip archive: %v", err)
	}
	if len(zr.File) == 0 {
		return nil, errors.New("empty zip archive")
	}
	// Like torch's reader, the archive's folder is that of its first entry.
	first := zr.File[0].Name
	slash := strings.IndexByte(first, '/')
	if slash <= 0 {
		return nil, fmt.Errorf("zip entry %q is not inside a top folder: not a torch.save archive", first)
	}
	prefix := first[:slash+1]
	entries := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		if rest, ok := strings.CutPrefix(f.Name, prefix); ok {
			entries[rest] = f
		}
	}
	pf, ok := entries["data.pkl"]
	if !ok {
		return nil, fmt.Errorf("missing %sdata.pkl: not a torch.save archive", prefix)
	}
	for _, f := range zr.File {
		if err := checkEntrySizes(f, size); err != nil {
			return nil, err
		}
	}
	if pf.UncompressedSize64 > uint64(maxPickleBytes) {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d allowed", pf.Name, pf.UncompressedSize64, maxPickleBytes)
	}
	pkl, err := readEntry(pf, int64(pf.UncompressedSize64), true)
	if err != nil {
		return nil, err
	}

	obj, storages, err := unpickle(pkl)
	if err != nil {
		return nil, fmt.Errorf("%sdata.pkl: %w", prefix, err)
	}
	// Every storage must be in the archive, as large as the pickle says;
	// its bytes are read only for the tensors used (toPrompt), and only
	// as many as their views need.
	for _, s := range storages {
		if err := s.find(entries, prefix); err != nil {
			return nil, err
		}
	}
	return toPrompt(obj, l)
}

// checkEntrySizes refuses a zip entry whose directory sizes cannot be true
// of a file of size bytes: compressed data past the end of the file, a
// stored entry whose two sizes differ, a deflated one declaring more than
// maxDeflateRatio times its compressed size.
func checkEntrySizes(f *zip.File, size int64) error {
	off, err := f.DataOffset()
	if err != nil {
		return fmt.Errorf("%s: %v", f.Name, err)
	}
	if off < 0 || off > size || f.CompressedSize64 > uint64(size-off) {
		return fmt.Errorf("%s: the zip directory declares %d compressed bytes at offset %d, past the end of the file (%d bytes)",
			f.Name, f.CompressedSize64, off, size)
	}
	switch f.Method {
	case zip.Store:
		if f.UncompressedSize64 != f.CompressedSize64 {
			return fmt.Errorf("%s: stored entry of %d bytes declares %d uncompressed bytes", f.Name, f.CompressedSize64, f.UncompressedSize64)
		}
	case zip.Deflate:
		if f.UncompressedSize64/maxDeflateRatio > f.CompressedSize64+1 {
			return fmt.Errorf("%s: %d compressed bytes cannot inflate to the %d the zip directory declares", f.Name, f.CompressedSize64, f.UncompressedSize64)
		}
	}
	return nil
}

// readEntry inflates the first n bytes of a zip entry, n at most its
// declared uncompressed size, growing the buffer as the bytes arrive (an
// entry that ends early costs what it held, not n). With whole (n is the
// declared size) it also reads to the end, where archive/zip checks the
// CRC and that the entry is no longer than declared; otherwise the rest of
// the entry is not inflated (and its CRC not checked).
func readEntry(f *zip.File, n int64, whole bool) ([]byte, error) {
	if n < 0 || uint64(n) > f.UncompressedSize64 {
		return nil, fmt.Errorf("%s holds %d bytes, %d are needed", f.Name, f.UncompressedSize64, n)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", f.Name, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(n, 1<<20)))
	got, err := io.CopyN(&buf, rc, n)
	if err != nil && err != io.EOF {
		return nil, entryError(f, err)
	}
	if got != n {
		return nil, fmt.Errorf("%s: %d bytes, the zip directory says %d", f.Name, got, f.UncompressedSize64)
	}
	if whole {
		var one [1]byte
		switch k, err := io.ReadFull(rc, one[:]); {
		case k > 0:
			return nil, entryError(f, zip.ErrFormat)
		case err != io.EOF:
			return nil, entryError(f, err)
		}
	}
	return buf.Bytes(), nil
}

// entryError words an error met while inflating f: archive/zip reports an
// entry longer than its directory size as ErrFormat.
func entryError(f *zip.File, err error) error {
	if errors.Is(err, zip.ErrFormat) {
		return fmt.Errorf("%s: holds more than the %d bytes the zip directory says", f.Name, f.UncompressedSize64)
	}
	return fmt.Errorf("%s: %v", f.Name, err)
}

// ---- torch types ----

type dtype struct {
	name string // torch dtype name
	size int    // bytes per element
}

var (
	f32  = dtype{"float32", 4}
	f64  = dtype{"float64", 8}
	f16  = dtype{"float16", 2}
	bf16 = dtype{"bfloat16", 2}
	i64  = dtype{"int64", 8}
	i32  = dtype{"int32", 4}
	i16  = dtype{"int16", 2}
	i8   = dtype{"int8", 1}
	u8   = dtype{"uint8", 1}
	boo  = dtype{"bool", 1}
)

// storageClasses are the torch.*Storage globals a tensor pickle may name.
var storageClasses = map[string]dtype{
	"FloatStorage":    f32,
	"DoubleStorage":   f64,
	"HalfStorage":     f16,
	"BFloat16Storage": bf16,
	"LongStorage":     i64,
	"IntStorage":      i32,
	"ShortStorage":    i16,
	"CharStorage":     i8,
	"ByteStorage":     u8,
	"BoolStorage":     boo,
}

type storageClass struct{ dt dtype }

type storage struct {
	dt       dtype
	key      string
	location string
	numel    int64
	entry    *zip.File // its data/<key> entry (find)
	data     []byte    // its first bytes, as many as the views used need (load)
}

// find checks that the storage's entry exists and declares at least the
// storage's size.
func (s *storage) find(entries map[string]*zip.File, prefix string) error {
	name := "data/" + s.key
	f, ok := entries[name]
	if !ok {
		return fmt.Errorf("missing %s%s (storage %q of the pickle)", prefix, name, s.key)
	}
	need := s.numel * int64(s.dt.size)
	if f.UncompressedSize64 < uint64(need) {
		return fmt.Errorf("%s%s holds %d bytes, the pickle declares %d × %s = %d bytes", prefix, name, f.UncompressedSize64, s.numel, s.dt.name, need)
	}
	s.entry = f
	return nil
}

// load reads the storage's first elems elements (the span a view needs,
// at most its size, checked when the view was built): at most
// maxStorageBytes, and never more of the entry than that. An entry holding
// exactly those bytes is read to its end, so its CRC is checked.
func (s *storage) load(elems int64) error {
	need := elems * int64(s.dt.size)
	if int64(len(s.data)) >= need {
		return nil
	}
	if need > maxStorageBytes {
		return fmt.Errorf("%s: a tensor needs %d bytes of it, more than the %d allowed", s.entry.Name, need, maxStorageBytes)
	}
	b, err := readEntry(s.entry, need, uint64(need) == s.entry.UncompressedSize64)
	if err != nil {
		return err
	}
	s.data = b
	return nil
}

type tensor struct {
	st     *storage
	offset int64
	shape  []int64
	stride []int64
	span   int64 // storage elements the view reaches: its last index + 1 (0 when empty)
}

func (t *tensor) String() string {
	return fmt.Sprintf("%s tensor %v", t.st.dt.name, t.shape)
}

// numel returns the number of elements of the view.
func (t *tensor) numel() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// forEach calls fn with the storage index of each element of the view, in
// row-major order.
func (t *tensor) forEach(fn func(i int, idx int64)) {
	n := int(t.numel())
	if n == 0 {
		return
	}
	pos := make([]int64, len(t.shape))
	idx := t.offset
	for i := 0; i < n; i++ {
		fn(i, idx)
		for d := len(t.shape) - 1; d >= 0; d-- {
			pos[d]++
			idx += t.stride[d]
			if pos[d] < t.shape[d] {
				break
			}
			idx -= t.stride[d] * t.shape[d]
			pos[d] = 0
		}
	}
}

// rebuildTensorV2 is torch._utils._rebuild_tensor_v2(storage, storage_offset,
// size, stride, requires_grad, backward_hooks[, metadata]).
type rebuildTensorV2 struct{}

func (rebuildTensorV2) Call(args ...any) (any, error) {
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 takes 6 or 7 arguments, got %d", len(args))
	}
	st, ok := args[0].(*storage)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: first argument is %T, not a storage", args[0])
	}
	off, err := smallInt(args[1], "storage offset")
	if err != nil {
		return nil, err
	}
	shape, err := intTuple(args[2], "size")
	if err != nil {
		return nil, err
	}
	stride, err := intTuple(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(shape) != len(stride) {
		return nil, fmt.Errorf("tensor size %v and stride %v differ in rank", shape, stride)
	}
	if len(shape) > 16 {
		return nil, fmt.Errorf("tensor of rank %d", len(shape))
	}
	t := &tensor{st: st, offset: off, shape: shape, stride: stride}
	// The view must lie inside the storage.
	n := int64(1)
	last := off
	for i, d := range shape {
		if d > 0 && n > math.MaxInt32/d {
			return nil, fmt.Errorf("tensor size %v is too large", shape)
		}
		n *= d
		if d > 0 {
			span := (d - 1) * stride[i] // both ≤ MaxInt32: no overflow
			if span > math.MaxInt32 {
				return nil, fmt.Errorf("tensor view (size %v, stride %v) is too large", shape, stride)
			}
			last += span
		}
	}
	if n > 0 {
		t.span = last + 1
	}
	if n > 0 && last >= st.numel {
		return nil, fmt.Errorf("tensor view (offset %d, size %v, stride %v) needs %d elements, storage %q has %d", off, shape, stride, last+1, st.key, st.numel)
	}
	if n > st.numel {
		// Only an expanded or overlapping view (stride 0, …) can have more elements than its
		// storage; a voice prompt never is one, and allowing it would let a
		// small file make us allocate gigabytes.
		return nil, fmt.Errorf("tensor view (size %v, stride %v) has %d elements, more than the %d of storage %q: expanded views are not supported", shape, stride, n, st.numel, st.key)
	}
	return t, nil
}

// rebuildParameter is torch._utils._rebuild_parameter(data, requires_grad,
// backward_hooks): a Parameter is its tensor here.
type rebuildParameter struct{}

func (rebuildParameter) Call(args ...any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("_rebuild_parameter takes 3 arguments, got %d", len(args))
	}
	t, ok := args[0].(*tensor)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter: %T is not a tensor", args[0])
	}
	return t, nil
}

func smallInt(v any, what string) (int64, error) {
	switch x := v.(type) {
	case int:
		if x < 0 || x > math.MaxInt32 {
			return 0, fmt.Errorf("%s %d out of range", what, x)
		}
		return int64(x), nil
	case *big.Int:
		return 0, fmt.Errorf("%s %v out of range", what, x)
	}
	return 0, fmt.Errorf("%s is %T, not an int", what, v)
}

func intTuple(v any, what string) ([]int64, error) {
	t, ok := v.(*types.Tuple)
	if !ok {
		return nil, fmt.Errorf("tensor %s is %T, not a tuple", what, v)
	}
	out := make([]int64, t.Len())
	for i := range out {
		x, err := smallInt(t.Get(i), "tensor "+what)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// allowedGlobal resolves the only globals a voice prompt pickle may name.
func allowedGlobal(module, name string) (any, error) {
	switch module + "." + name {
	case "torch._utils._rebuild_tensor_v2":
		return rebuildTensorV2{}, nil
	case "torch._utils._rebuild_parameter":
		return rebuildParameter{}, nil
	case "collections.OrderedDict":
		return &types.OrderedDictClass{}, nil
	}
	if module == "torch" {
		if dt, ok := storageClasses[name]; ok {
			return storageClass{dt}, nil
		}
	}
	return nil, fmt.Errorf("refusing to load global %s.%s: a voice prompt may only hold tensors and plain containers", printable(module), printable(name))
}

func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// unpickle scans then loads data.pkl; it returns the top object and the
// storages it refers to (their bytes not loaded yet).
func unpickle(pkl []byte) (obj any, storages []*storage, err error) {
	if err := scanPickle(pkl); err != nil {
		return nil, nil, err
	}
	byKey := map[string]*storage{}
	u := pickle.NewUnpickler(bytes.NewReader(pkl))
	u.FindClass = allowedGlobal
	u.PersistentLoad = func(pid any) (any, error) {
		t, ok := pid.(*types.Tuple)
		if !ok || t.Len() != 5 {
			return nil, fmt.Errorf("unsupported persistent id %v", describe(pid))
		}
		if tag, _ := t.Get(0).(string); tag != "storage" {
			return nil, fmt.Errorf("unsupported persistent id type %v", describe(t.Get(0)))
		}
		cls, ok := t.Get(1).(storageClass)
		if !ok {
			return nil, fmt.Errorf("persistent id names %v, not a torch storage class", describe(t.Get(1)))
		}
		key, ok1 := t.Get(2).(string)
		loc, ok2 := t.Get(3).(string)
		if !ok1 || !ok2 || key == "" || strings.ContainsAny(key, "/\\") {
			return nil, fmt.Errorf("bad storage key/location %v, %v", describe(t.Get(2)), describe(t.Get(3)))
		}
		numel, err := smallInt(t.Get(4), "storage size")
		if err != nil {
			return nil, err
		}
		// The location is only a device tag ("cpu", "cuda:0", "mps", …): the
		// bytes are the same, everything is loaded into host memory.
		if s, ok := byKey[key]; ok {
			if s.dt != cls.dt || s.numel != numel {
				return nil, fmt.Errorf("storage %q declared twice with different types", key)
			}
			return s, nil
		}
		s := &storage{dt: cls.dt, key: key, location: loc, numel: numel}
		byKey[key] = s
		storages = append(storages, s)
		return s, nil
	}
	defer func() {
		// Last line of defence: gopickle has a few unchecked paths (odd
		// DICT item counts, unhashable keys) that panic on hostile input.
		if r := recover(); r != nil {
			obj, storages, err = nil, nil, fmt.Errorf("malformed pickle (%v)", r)
		}
	}()
	obj, err = u.Load()
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(storages, func(i, j int) bool { return storages[i].key < storages[j].key })
	return obj, storages, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", printable(x))
	case nil:
		return "None"
	case *tensor:
		return x.String()
	}
	return fmt.Sprintf("%T", v)
}

// ---- from the unpickled object to a Prompt ----

func dictGet(obj any, key string) (any, bool, error) {
	switch d := obj.(type) {
	case *types.Dict:
		v, ok := d.Get(key)
		return v, ok, nil
	case *types.OrderedDict:
		v, ok := d.Get(key)
		return v, ok, nil
	}
	return nil, false, fmt.Errorf("data.pkl holds %s, not a dict", describe(obj))
}

func dictKeys(obj any) []string {
	var keys []string
	add := func(k any) { keys = append(keys, describe(k)) }
	switch d := obj.(type) {
	case *types.Dict:
		for _, e := range *d {
			add(e.Key)
		}
	case *types.OrderedDict:
		for e := d.List.Front(); e != nil; e = e.Next() {
			add(e.Value.(*types.OrderedDictEntry).Key)
		}
	}
	return keys
}

func toPrompt(obj any, l Limits) (*Prompt, error) {
	get := func(key string) (*tensor, error) {
		v, ok, err := dictGet(obj, key)
		if err != nil {
			return nil, err
		}
		if !ok {
			keys := dictKeys(obj)
			if len(keys) == 0 {
				return nil, fmt.Errorf("missing key %q (the dict is empty): not a voice prompt file", key)
			}
			return nil, fmt.Errorf("missing key %q (keys: %s): not a voice prompt file", key, strings.Join(keys, ", "))
		}
		t, ok := v.(*tensor)
		if !ok {
			return nil, fmt.Errorf("%q is %s, not a tensor", key, describe(v))
		}
		return t, nil
	}
	emb, err := get("embeddings")
	if err != nil {
		return nil, err
	}
	cache, err := get("cache")
	if err != nil {
		return nil, err
	}

	// embeddings: [N, 1, 1, dim], floating point.
	s := emb.shape
	if len(s) != 4 || s[1] != 1 || s[2] != 1 || s[0] < 1 || s[3] < 1 {
		return nil, fmt.Errorf("\"embeddings\" has shape %v, want [N, 1, 1, dim] with N, dim ≥ 1", s)
	}
	var conv func(b []byte, i int64) float32
	switch emb.st.dt {
	case f32:
		conv = func(b []byte, i int64) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	case bf16:
		conv = func(b []byte, i int64) float32 {
			return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case f16:
		conv = func(b []byte, i int64) float32 { return weights.HalfToFloat(binary.LittleEndian.Uint16(b[2*i:])) }
	case f64:
		conv = func(b []byte, i int64) float32 {
			return float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	default:
		return nil, fmt.Errorf("\"embeddings\" is %s, want a floating-point tensor", emb.st.dt.name)
	}
	maxRows := l.MaxRows
	if maxRows <= 0 || maxRows > MaxRows {
		maxRows = MaxRows
	}
	switch {
	case s[0] > int64(maxRows):
		why := "the model's context or " + strconv.Itoa(RunRowsFloor) + " steps, whichever is more"
		if maxRows == MaxRows {
			why = "any voice prompt's bound"
		}
		return nil, fmt.Errorf("\"embeddings\" has %d rows (voice-prompt steps), more than the %d allowed (%s): make it from a shorter recording", s[0], maxRows, why)
	case l.Dim > 0 && s[3] != int64(l.Dim):
		return nil, fmt.Errorf("voice embeddings have dimension %d, the model's dim is %d", s[3], l.Dim)
	case s[3] > 1<<16:
		return nil, fmt.Errorf("\"embeddings\" rows of %d values: no model is that wide", s[3])
	}
	if err := emb.st.load(emb.span); err != nil {
		return nil, err
	}
	n, dim := int(s[0]), int(s[3])
	flat := make([]float32, n*dim)
	emb.forEach(func(i int, idx int64) { flat[i] = conv(emb.st.data, idx) })
	for i, v := range flat {
		if l.Finite && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
			return nil, fmt.Errorf("\"embeddings\" row %d holds %v: not a usable voice prompt", i/dim, v)
		}
	}
	p := &Prompt{Embeddings: make([][]float32, n)}
	for r := range p.Embeddings {
		p.Embeddings[r] = flat[r*dim : (r+1)*dim : (r+1)*dim]
	}

	// cache: [1, 17, cols], integer.
	s = cache.shape
	if len(s) != 3 || s[0] != 1 || s[1] != NumStreams || s[2] < 1 {
		return nil, fmt.Errorf("\"cache\" has shape %v, want [1, %d, cols] with cols ≥ 1", s, NumStreams)
	}
	var iconv func(b []byte, i int64) int64
	switch cache.st.dt {
	case i64:
		iconv = func(b []byte, i int64) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	case i32:
		iconv = func(b []byte, i int64) int64 { return int64(int32(binary.LittleEndian.Uint32(b[4*i:]))) }
	case i16:
		iconv = func(b []byte, i int64) int64 { return int64(int16(binary.LittleEndian.Uint16(b[2*i:]))) }
	case i8:
		iconv = func(b []byte, i int64) int64 { return int64(int8(b[i])) }
	case u8:
		iconv = func(b []byte, i int64) int64 { return int64(b[i]) }
	default:
		return nil, fmt.Errorf("\"cache\" is %s, want an integer (int64) tensor", cache.st.dt.name)
	}
	if err := cache.st.load(cache.span); err != nil {
		return nil, err
	}
	cols := int(s[2])
	cflat := make([]int64, NumStreams*cols)
	cache.forEach(func(i int, idx int64) { cflat[i] = iconv(cache.st.data, idx) })
	p.Cache = make([][]int64, NumStreams)
	for r := range p.Cache {
		p.Cache[r] = cflat[r*cols : (r+1)*cols : (r+1)*cols]
	}
	return p, nil
}

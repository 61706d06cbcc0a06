// Package backend is the seam between the models and the hardware: the
// models (infer/nn, infer/lm, Mimi's transformers) say *what* is computed as
// calls on a Backend; a backend decides *how* (infer/backend/cpu: the
// float32 kernels of infer/ops on the host; a device backend implements the
// same interface on its own memory). An offload plan decides *where* each
// weight lives (Weight.Host, Weight.Dev).
//
// Every op works on a batch of rows: a row is one position of one
// conversation, and a product over B rows reads each weight once for all of
// them. Each row is reduced in the same order as a product over that row
// alone, so a batched result is bit-identical to the unbatched one: that is
// the contract every backend keeps, and what makes B conversations in
// lockstep give exactly the outputs of B separate runs.
//
// Buffers (activations, KV rings) belong to the backend that made them. A
// Backend is used from one goroutine at a time.
package backend

import (
	"fmt"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Backend is what a compute backend implements. See docs/ARCHITECTURE.md
// ("Adding a backend") for the contract of each op.
type Backend interface {
	// Name is the backend's name ("cpu", …) and kernel, for logs.
	Name() string

	// NewActs allocates a zeroed rows × cols float32 activation buffer.
	NewActs(rows, cols int) Acts
	// NewRing allocates an empty KV ring for heads × dh keys and values of
	// capacity positions.
	NewRing(heads, dh, capacity int) *Ring
	// GrowRing gives r room for capacity positions, keeping what it holds.
	// It is only called while nothing has wrapped (End < old capacity).
	GrowRing(r *Ring, capacity int)
	// CopyRing makes dst hold src's positions and End. Its capacity is
	// src's, or dst's own where KeepsCapacity(dst, src) (a backend may do
	// either: attention reads the same positions from both), so that a
	// ring reused from an earlier conversation keeps its memory. From a
	// ReadOnly src, dst may share src's storage for src's positions.
	CopyRing(dst, src *Ring)
	// FillRing makes r look as if n positions of small deterministic keys
	// and values had been written (benchmarks of long contexts only).
	FillRing(r *Ring, n int)
	// NewRope prepares rotary embeddings for heads of size dh.
	NewRope(dh int, maxPeriod float64) *Rope

	// Upload copies host rows (row-major, dst.Rows·dst.Cols values) into dst.
	Upload(dst Acts, src []float32)
	// Download copies src into host memory (row-major).
	Download(dst []float32, src Acts)
	// Copy copies src into dst (same shape).
	Copy(dst, src Acts)

	// MatMul is dst[r] = w·x[r] for every row (F.linear without bias): float32
	// accumulation over the weight's dtype widened exactly.
	MatMul(dst, x Acts, w *Weight)
	// Norm writes norm(x[r]) into dst[r] (RMSNorm or LayerNorm, float32).
	Norm(dst, x Acts, n *Norm)
	// AddScaled is dst[r] += scale ⊙ src[r] (scale nil: dst[r] += src[r]).
	AddScaled(dst, src Acts, scale *Weight)
	// Gate is ActivationGating's middle: dst[r][j] = act(src[r][j]) ·
	// src[r][H+j] for j < H = dst.Cols (src has 2H columns; dst may be
	// src's first H columns).
	Gate(dst, src Acts, act Activation)
	// Activate applies act to x in place.
	Activate(x Acts, act Activation)
	// RoPE rotates every dh-wide head of x[r] (interleaved pairs) for
	// position pos[r], in place.
	RoPE(x Acts, r *Rope, pos []int)
	// Embed writes into dst[r] (added to it when accumulate) the sum, in
	// table order, of row ids[r·len(tables)+k] of tables[k]; ZeroToken
	// contributes an exact zero.
	Embed(dst Acts, tables []*Weight, ids []int, accumulate bool)
	// Attend runs self-attention for consecutive groups of rows, one group
	// per sequence: qkv[r] holds the row's query, key and value (heads·dh
	// columns each); the keys and values of a group's rows are written into
	// its ring, and each row attends over its ring with the reference's
	// ring mask (RingPosition) and a span of context positions (0:
	// unlimited). A sequence's rows are written and attended group rows at
	// a time, each row seeing the ring as after its group's writes, as if
	// each group were a call of its own: Stepwise (1) is the rows one by
	// one; Chunk (0) writes all of the sequence's rows first, as the
	// reference's forward of T positions does; Mimi's transformers pass 2,
	// the positions of one frame, to code several frames in one call.
	Attend(out, qkv Acts, seqs []Seq, context, group int)
}

// Attend's groups (any other positive group is that many rows).
const (
	Chunk    = 0 // every row of a sequence written first
	Stepwise = 1 // each row written just before its query
)

// GroupEnd is the ring's End that row i (of rows, written from end0)
// attends at with the given group (Attend).
func GroupEnd(end0, i, rows, group int) int {
	if group <= 0 {
		return end0 + rows
	}
	return end0 + min(rows, (i/group+1)*group)
}

// ZeroToken is the token whose embedding is an exact zero vector.
const ZeroToken = -1

// Activation names the element-wise activations the models use.
type Activation int

// The activations (of the reference's _get_activation).
const (
	SiLU Activation = iota
	GELU            // exact (erf) GELU
	ReLU
)

// ParseActivation maps a config's gating name to an Activation.
func ParseActivation(name string) (Activation, error) {
	switch name {
	case "silu":
		return SiLU, nil
	case "gelu":
		return GELU, nil
	case "relu":
		return ReLU, nil
	}
	return 0, fmt.Errorf("gating %q is not supported", name)
}

// Weight is one weight matrix [Rows, Cols] in its storage dtype (a float,
// or a block format of weights: each row is DType.RowBytes(Cols) bytes of
// blocks). Host is its bytes in host memory (the mapped checkpoint, or an offload packing):
// what the CPU computes from. Dev is the same bytes in a device's memory
// when a placement put them there (nil otherwise): what a device backend
// computes from. Vectors (norm scales, layer scales) are [1, n].
//
// A bound weight says where it lives; no backend looks placement up by
// name: on a device at Dev+DevOffset; in host memory only, its products
// run by the host's cores, when OnCPU (an offload plan's CPU unit: a
// device backend hands them to its CPU backend); else wherever the
// backend keeps weights (a device backend uploads it once).
type Weight struct {
	Name       string
	Rows, Cols int
	DType      weights.DType
	Host       []byte
	Dev        Buffer
	DevOffset  int64
	OnCPU      bool
}

// Bytes is the weight's storage size (blocks, for a quantized dtype).
func (w *Weight) Bytes() int64 { return int64(w.Rows) * w.DType.RowBytes(w.Cols) }

// Elems is the weight's element count: the multiply-adds of its product
// with one input row.
func (w *Weight) Elems() int64 { return int64(w.Rows) * int64(w.Cols) }

// RowSlice is rows [r0, r1) of w, sharing its bytes.
func (w Weight) RowSlice(r0, r1 int) Weight {
	rb := w.DType.RowBytes(w.Cols)
	out := w
	out.Rows = r1 - r0
	if w.Host != nil {
		out.Host = w.Host[int64(r0)*rb : int64(r1)*rb]
	}
	out.DevOffset = w.DevOffset + int64(r0)*rb
	return out
}

// NewWeight views tensor t as a [rows, cols] matrix (rows·cols must be its
// element count — of its logical shape —, its bytes its storage size; the
// dtype must be a float or a block format, whose rows must be the tensor's
// last dimension).
func NewWeight(t *weights.Tensor, rows, cols int) (Weight, error) {
	switch t.DType {
	case weights.BF16, weights.F16, weights.F32, weights.Q8_0, weights.Q4_K:
	default:
		return Weight{}, fmt.Errorf("tensor %q: dtype %s cannot be used as a weight", t.Name, t.DType)
	}
	if rows*cols != t.Numel() || int64(len(t.Data)) != t.Bytes() {
		return Weight{}, fmt.Errorf("tensor %q: %d elements in %d bytes cannot be a [%d, %d] weight", t.Name, t.Numel(), len(t.Data), rows, cols)
	}
	if t.DType.Quantized() && (len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] != cols) {
		return Weight{}, fmt.Errorf("tensor %q: %s %v cannot be a [%d, %d] weight (its blocks run along its last dimension)", t.Name, t.DType, t.Shape, rows, cols)
	}
	// The kernels read a weight in place as a slice of its elements. A
	// mapping starts on a page, so this is the tensor's offset in its file:
	// the safetensors library pads the header and orders the tensors so
	// that every one is aligned; a file whose header is not padded puts
	// them all at odd offsets, and weights are not copied out of their
	// mapping.
	if size := t.DType.Size(); (size == 2 || size == 4) && len(t.Data) > 0 &&
		uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%uintptr(size) != 0 {
		return Weight{}, fmt.Errorf("tensor %q (%s) does not start at a multiple of %d bytes in its file: the file's header is not padded "+
			"to align its tensors, and pp-offline reads weights in place; re-save the file with the safetensors library, which aligns them "+
			"(python -c \"from safetensors.torch import load_file, save_file; save_file(load_file('IN'), 'OUT')\")", t.Name, t.DType, size)
	}
	return Weight{Name: t.Name, Rows: rows, Cols: cols, DType: t.DType, Host: t.Data}, nil
}

// Buffer is a region of device memory (see offload.Device).
type Buffer interface {
	Len() int64
}

// Norm is create_norm_fn(norm, dim): RMSNorm (scale W) or LayerNorm
// (weight W, bias B), with its epsilon.
type Norm struct {
	RMS  bool
	Eps  float32
	W, B *Weight
}

// Acts is a view of float32 activations: rows [R0, R0+Rows) and columns
// [C0, C0+Cols) of a backend buffer. Views are values; making one allocates
// nothing.
type Acts struct {
	Buf                *ActBuf
	R0, Rows, C0, Cols int
}

// ActBuf is a backend's activation buffer of Rows × Cols float32.
type ActBuf struct {
	Rows, Cols int
	Data       any // the backend's storage
}

// Slice is rows [r0, r1) of the view.
func (a Acts) Slice(r0, r1 int) Acts {
	if r0 < 0 || r1 < r0 || r1 > a.Rows {
		panic(fmt.Sprintf("backend: rows [%d, %d) of a view of %d", r0, r1, a.Rows))
	}
	a.R0, a.Rows = a.R0+r0, r1-r0
	return a
}

// Columns is columns [c0, c1) of the view.
func (a Acts) Columns(c0, c1 int) Acts {
	if c0 < 0 || c1 < c0 || c1 > a.Cols {
		panic(fmt.Sprintf("backend: columns [%d, %d) of a view of %d", c0, c1, a.Cols))
	}
	a.C0, a.Cols = a.C0+c0, c1-c0
	return a
}

// Ring is one layer's KV cache for one sequence: RingKVCache. Position p is
// stored at slot p % Capacity; End is the number of positions written
// (end_offset). A backend may grow Capacity while nothing has wrapped.
type Ring struct {
	Heads, Dh int
	Capacity  int
	End       int
	Data      any // the backend's storage
	// ReadOnly marks a ring that is never written again (a snapshot's, kept
	// to be restored into many conversations): CopyRing may let dst read
	// src's positions in place instead of copying them (the CPU backend's
	// does, until dst overwrites one of their slots), so attention over the
	// shared positions reads them from one copy in memory for all the
	// conversations. Attending over a read-only ring is an error (the CPU
	// backend panics).
	ReadOnly bool
	// ElemBytes is the size of a stored key or value element: 4 for
	// float32 (0 means 4), 2 for the CPU backend's bf16 rings.
	ElemBytes int
}

// Reset forgets every position (RingKVCache.reset).
func (r *Ring) Reset() { r.End = 0 }

// Bytes is the ring's key and value storage.
func (r *Ring) Bytes() int64 {
	eb := int64(r.ElemBytes)
	if eb == 0 {
		eb = 4
	}
	return 2 * eb * int64(r.Heads) * int64(r.Dh) * int64(r.Capacity)
}

// KeepsCapacity reports whether CopyRing(dst, src) may leave dst at its own
// capacity: it is at least src's, for the same heads, and src has not
// wrapped (so src's positions sit in the slots of their own number in
// either ring, and neither ring is full).
func KeepsCapacity(dst, src *Ring) bool {
	return dst.Data != nil && dst.Heads == src.Heads && dst.Dh == src.Dh &&
		dst.Capacity >= src.Capacity && src.End < src.Capacity
}

// RingPosition is the position held by slot j of a ring of the given
// capacity after end positions were written, or −1 when it was never
// written. It is the reference's formula exactly, quirk included: the slot
// at end % capacity gets position end (delta ≤ 0, not < 0), so once the
// ring is full its oldest entry is masked as a "future" key and a query
// sees capacity − 1 past positions. The fixtures depend on it (the temporal
// ring, and the depformer's last step never attending to its first).
func RingPosition(end, capacity, j int) int {
	if j >= end {
		return -1
	}
	delta := j - end%capacity
	if delta <= 0 {
		return end + delta
	}
	return end + delta - capacity
}

// Visible reports whether a query at position q attends to a key at
// position k (k < 0: an empty slot) with a span of context (0: unlimited).
func Visible(q, k, context int) bool {
	d := q - k
	return k >= 0 && d >= 0 && (context <= 0 || d < context)
}

// Seq is a group of consecutive rows of one sequence in Attend: Rows rows
// whose keys and values go to Ring.
type Seq struct {
	Ring *Ring
	Rows int
}

// Rope is a backend's rotary-embedding table for heads of size Dh.
type Rope struct {
	Dh        int
	MaxPeriod float64
	Data      any
}

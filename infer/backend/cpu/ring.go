package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// kvElem is what a CPU ring stores for a key or value element: float32
// (the default, exact), or uint16, the bits of the value rounded to bf16
// by ops' RoundBF16 (Options.KVDType "bf16": half the memory and half the
// attention's reads; attention then computes over the exactly widened
// values, so its results are those of the float32 ring holding the
// rounded values).
type kvElem interface{ float32 | uint16 }

// ring is the storage of a CPU KV ring: [heads][capacity][dh] keys and
// values, so that one head's keys are contiguous for attention. While np >
// 0, slots [0, np) are not read from k and v but from pk and pv, the
// storage ([heads][pc][dh]) of a read-only ring that this one was copied
// from (CopyRing): the conversations restored from one prompt snapshot
// then read their common prompt positions from one copy in memory. A write
// to one of those slots (the ring wrapping) first copies them into k and v
// (unshare). A sharing ring never touches its own pages of those slots, so
// holding the snapshot's storage (even after the prompt cache evicted it)
// costs no more memory than the copy it replaces.
//
// pop[h] bounds head h's populated slots: those below it that are not
// shared have their pages in memory, and a write at or past it first has
// the next populateAhead bytes of the head's keys and values from its slot
// populated in one call (populate), not faulted in a page at a time.
// Shared slots are never populated.
type ring[E kvElem] struct {
	k, v   []E
	pk, pv []E
	pc, np int
	pop    []int32
}

// populateAhead is how many bytes of a head's keys (and of its values) a
// write past pop populates: 4 pages, ~1.3 µs a page in one call against
// ~10 µs a page faulted in one by one on the VMs measured, and at most
// that far ahead of the positions written (8 MiB a conversation at the
// 1.3B shape), so that memory still follows the positions held.
const populateAhead = 16 << 10

// populatePages is populate; a test watches the ranges through it.
var populatePages = populate

func newRingData[E kvElem](heads, n int) *ring[E] {
	return &ring[E]{k: make([]E, n), v: make([]E, n), pop: make([]int32, heads)}
}

// populateSlots populates head h's keys and values of slots [s0, s1) of a
// ring of capacity slots of dh elements.
func (d *ring[E]) populateSlots(h, capacity, dh, s0, s1 int) {
	if s1 <= s0 {
		return
	}
	var z E
	o, n := (h*capacity+s0)*dh, uintptr((s1-s0)*dh)*unsafe.Sizeof(z)
	populatePages(unsafe.Pointer(&d.k[o]), n)
	populatePages(unsafe.Pointer(&d.v[o]), n)
	d.pop[h] = int32(max(int(d.pop[h]), s1))
}

// ringData is a ring's storage, of either element type: what depends on
// the type is a method of ring[E], and every ring operation reaches it
// through dataOf (one check of the storage's type).
type ringData interface {
	shared() int
	unshare(r *backend.Ring)
	grown(r *backend.Ring, capacity int) ringData
	copyTo(dst, src *backend.Ring)
	fill(e *ops.Engine, r *backend.Ring)
	write(e *ops.Engine, r *backend.Ring, slot, hd int, k, v []float32)
	attend(e *ops.Engine, r *backend.Ring, hd int, q, out []float32, valid []int32, scores []float32)
	keysValues() (k, v []float32)
}

// dataOf is r's storage (a CPU ring's).
func dataOf(r *backend.Ring) ringData {
	d, ok := r.Data.(ringData)
	if !ok {
		panic(fmt.Sprintf("cpu: a ring of %T", r.Data))
	}
	return d
}

// kvOf is r's storage, which must hold E.
func kvOf[E kvElem](r *backend.Ring) *ring[E] {
	d, ok := r.Data.(*ring[E])
	if !ok {
		panic(fmt.Sprintf("cpu: a ring of %T", r.Data))
	}
	return d
}

// ringOf is the storage of a float32 ring.
func ringOf(r *backend.Ring) *ring[float32] { return kvOf[float32](r) }

// store writes float32 values into a ring's elements: as they are, or
// rounded to bf16 (ops' RoundBF16).
func store[E kvElem](e *ops.Engine, dst []E, src []float32) {
	switch d := any(dst).(type) {
	case []float32:
		copy(d, src)
	case []uint16:
		e.RoundBF16(d, src)
	}
}

// sharedSlots is how many slots r reads from a snapshot's storage.
func sharedSlots(r *backend.Ring) int { return dataOf(r).shared() }

func (d *ring[E]) shared() int { return d.np }

// unshare makes r hold its shared slots in its own storage (copying them,
// unless r holds no position any more: after Reset).
func unshare(r *backend.Ring) { dataOf(r).unshare(r) }

func (d *ring[E]) unshare(r *backend.Ring) {
	if d.np == 0 {
		return
	}
	if r.End > 0 {
		n, dh := d.np*r.Dh, r.Dh
		for h := 0; h < r.Heads; h++ {
			o, so := h*r.Capacity*dh, h*d.pc*dh
			copy(d.k[o:o+n], d.pk[so:so+n])
			copy(d.v[o:o+n], d.pv[so:so+n])
		}
	}
	d.pk, d.pv, d.pc, d.np = nil, nil, 0, 0
}

// NewRing implements backend.Backend: float32 storage, or bf16 with
// Options.KVDType "bf16".
func (c *CPU) NewRing(heads, dh, capacity int) *backend.Ring {
	n := heads * dh * capacity
	r := &backend.Ring{Heads: heads, Dh: dh, Capacity: capacity}
	if c.kvBF16 {
		r.Data, r.ElemBytes = newRingData[uint16](heads, n), 2
	} else {
		r.Data = newRingData[float32](heads, n)
	}
	return r
}

// GrowRing implements backend.Backend.
func (c *CPU) GrowRing(r *backend.Ring, capacity int) {
	if capacity <= r.Capacity {
		return
	}
	if r.End > r.Capacity {
		panic("cpu: GrowRing after the ring wrapped")
	}
	r.Data = dataOf(r).grown(r, capacity)
	r.Capacity = capacity
}

// grown is d's positions in storage of the new capacity (the shared slots
// still shared).
func (d *ring[E]) grown(r *backend.Ring, capacity int) ringData {
	nr := newRingData[E](r.Heads, r.Heads*r.Dh*capacity)
	nr.pk, nr.pv, nr.pc, nr.np = d.pk, d.pv, d.pc, d.np
	oc, dh := r.Capacity*r.Dh, r.Dh
	s0 := min(d.np, r.End) // the shared slots are not in d's storage
	lo := s0 * dh
	for h := 0; h < r.Heads; h++ {
		nr.populateSlots(h, capacity, dh, s0, r.End)
		copy(nr.k[h*capacity*dh+lo:], d.k[h*oc+lo:h*oc+r.End*dh])
		copy(nr.v[h*capacity*dh+lo:], d.v[h*oc+lo:h*oc+r.End*dh])
	}
	return nr
}

// CopyRing implements backend.Backend. From a read-only source that has
// not wrapped, dst shares src's storage for src's positions and copies
// nothing (into its own memory where KeepsCapacity, else a ring of src's
// capacity). dst takes src's element type.
func (c *CPU) CopyRing(dst, src *backend.Ring) {
	dataOf(src).copyTo(dst, src)
	dst.ElemBytes = src.ElemBytes
}

// copyTo is CopyRing from src, whose storage s is.
func (s *ring[E]) copyTo(dst, src *backend.Ring) {
	d, same := dst.Data.(*ring[E])
	keeps := same && backend.KeepsCapacity(dst, src)
	if src.ReadOnly && s.np == 0 && src.End > 0 && src.End < src.Capacity {
		if !keeps {
			d = newRingData[E](src.Heads, len(s.k))
			dst.Capacity, dst.Data = src.Capacity, d
		}
		d.pk, d.pv, d.pc, d.np = s.k, s.v, src.Capacity, src.End
		dst.Heads, dst.Dh, dst.End = src.Heads, src.Dh, src.End
		return
	}
	if keeps && dst.Capacity > src.Capacity {
		// Only the positions held, head by head, into the larger ring.
		n := src.End * src.Dh
		for h := 0; h < src.Heads; h++ {
			o, so := h*dst.Capacity*dst.Dh, h*src.Capacity*src.Dh
			copy(d.k[o:o+n], s.k[so:so+n])
			copy(d.v[o:o+n], s.v[so:so+n])
		}
		d.pk, d.pv, d.pc, d.np = s.pk, s.pv, s.pc, s.np
		dst.End = src.End
		return
	}
	if !same || dst.Capacity != src.Capacity || len(d.k) != len(s.k) {
		d = newRingData[E](src.Heads, len(s.k))
		dst.Capacity, dst.Data = src.Capacity, d
	}
	copy(d.k, s.k)
	copy(d.v, s.v)
	d.pk, d.pv, d.pc, d.np = s.pk, s.pv, s.pc, s.np
	dst.Heads, dst.Dh, dst.End = src.Heads, src.Dh, src.End
}

// FillRing implements backend.Backend (synthetic keys and values; a bf16
// ring holds them rounded).
func (c *CPU) FillRing(r *backend.Ring, n int) {
	dataOf(r).fill(c.e, r)
	r.End += n
}

// fill writes every slot's synthetic keys and values.
func (d *ring[E]) fill(e *ops.Engine, r *backend.Ring) {
	d.pk, d.pv, d.pc, d.np = nil, nil, 0, 0 // every slot is written
	for h := range d.pop {
		d.populateSlots(h, r.Capacity, r.Dh, 0, r.Capacity)
	}
	var kb, vb [1024]float32
	for j0 := 0; j0 < len(d.k); j0 += len(kb) {
		m := min(len(kb), len(d.k)-j0)
		for i := range m {
			j := j0 + i
			kb[i], vb[i] = float32(j%13-6)*0.01, float32(j%7-3)*0.01
		}
		store(e, d.k[j0:j0+m], kb[:m])
		store(e, d.v[j0:j0+m], vb[:m])
	}
}

// writeHead stores head hd of one position's keys k and values v into the
// ring's slot (never a shared one: Attend unshares first), rounded to bf16
// in a bf16 ring.
func writeHead(e *ops.Engine, r *backend.Ring, slot, hd int, k, v []float32) {
	dataOf(r).write(e, r, slot, hd, k, v)
}

func (d *ring[E]) write(e *ops.Engine, r *backend.Ring, slot, hd int, k, v []float32) {
	if slot < d.np {
		panic("cpu: a write into a ring's shared slot")
	}
	dh := r.Dh
	if slot >= int(d.pop[hd]) {
		var z E
		ahead := max(1, populateAhead/(dh*int(unsafe.Sizeof(z))))
		d.populateSlots(hd, r.Capacity, dh, slot, min(r.Capacity, slot+ahead))
	}
	o := (hd*r.Capacity + slot) * dh
	store(e, d.k[o:o+dh], k[hd*dh:(hd+1)*dh])
	store(e, d.v[o:o+dh], v[hd*dh:(hd+1)*dh])
}

// attendHead computes head hd of softmax(q·kᵀ/√d + mask)·v over the valid
// slots into out (q and out: all heads), with scores as scratch.
func attendHead(e *ops.Engine, r *backend.Ring, hd int, q, out []float32, valid []int32, scores []float32) {
	dataOf(r).attend(e, r, hd, q, out, valid, scores)
}

func (d *ring[E]) attend(e *ops.Engine, r *backend.Ring, hd int, q, out []float32, valid []int32, scores []float32) {
	dh := r.Dh
	scale := float32(1 / math.Sqrt(float64(dh)))
	qh := q[hd*dh : (hd+1)*dh]
	scores = scores[:len(valid)]
	// This head's keys and values: row slot at slot·dh; the shared slots
	// (a prefix of valid, which is in slot order) from the shared storage.
	kh := d.k[hd*r.Capacity*dh : (hd+1)*r.Capacity*dh]
	vh := d.v[hd*r.Capacity*dh : (hd+1)*r.Capacity*dh]
	ns := 0
	var pkh, pvh []E
	if d.np > 0 {
		ns, _ = slices.BinarySearch(valid, int32(d.np)) // the valid slots below np
		pkh, pvh = d.pk[hd*d.pc*dh:(hd+1)*d.pc*dh], d.pv[hd*d.pc*dh:(hd+1)*d.pc*dh]
		dotRows(e, scores[:ns], qh, pkh, dh, valid[:ns])
	}
	dotRows(e, scores[ns:], qh, kh, dh, valid[ns:])
	maxv := float32(math.Inf(-1))
	for i, v := range scores {
		v *= scale
		scores[i] = v
		maxv = max(maxv, v)
	}
	for i := range scores {
		scores[i] -= maxv
	}
	e.ExpTo(scores, scores) // float32(math.Exp(float64(v − max))), vectorized
	var sum float32
	for _, ex := range scores {
		sum += ex
	}
	oh := out[hd*dh : (hd+1)*dh]
	clear(oh)
	inv := 1 / sum
	for i := range scores {
		scores[i] *= inv // the weight each value row is added with
	}
	if ns > 0 {
		axpyRows(e, oh, scores[:ns], pvh, dh, valid[:ns]) // one Axpy per row, in order: the split keeps the bits
	}
	axpyRows(e, oh, scores[ns:], vh, dh, valid[ns:])
}

// wideRows is how many bf16 rows attention widens at a time into a
// float32 block (which stays in L1) before the row kernels read it.
const wideRows = 32

// wideIdx is the row indices 0, 1, … of a widened block.
var wideIdx = func() (ix [wideRows]int32) {
	for i := range ix {
		ix[i] = int32(i)
	}
	return
}()

// widePool holds the widened blocks (wideRows × dh float32s).
var widePool = sync.Pool{New: func() any { return new([]float32) }}

// dotRows is ops' DotRows over rows of mat (rows[i]·dh), bf16 ones widened
// exactly first: the same bits as DotRows over the widened matrix.
func dotRows[E kvElem](e *ops.Engine, dst, q []float32, mat []E, dh int, rows []int32) {
	switch m := any(mat).(type) {
	case []float32:
		e.DotRows(dst, q, m, dh, rows)
	case []uint16:
		widened(e, m, dh, rows, func(a, b int, w []float32) {
			e.DotRows(dst[a:b], q, w, dh, wideIdx[:b-a])
		})
	}
}

// axpyRows is ops' AxpyRows (one Axpy per row, in order) over rows of
// mat, bf16 ones widened exactly first.
func axpyRows[E kvElem](e *ops.Engine, dst, w []float32, mat []E, dh int, rows []int32) {
	switch m := any(mat).(type) {
	case []float32:
		e.AxpyRows(dst, w, m, dh, rows)
	case []uint16:
		widened(e, m, dh, rows, func(a, b int, x []float32) {
			e.AxpyRows(dst, w[a:b], x, dh, wideIdx[:b-a])
		})
	}
}

// widened calls f(a, b, w) for the blocks [a, b) of up to wideRows rows of
// mat, in order, with w the block's rows widened (row i at w[(i−a)·dh:]).
func widened(e *ops.Engine, mat []uint16, dh int, rows []int32, f func(a, b int, w []float32)) {
	wp := widePool.Get().(*[]float32)
	if len(*wp) < wideRows*dh {
		*wp = make([]float32, wideRows*dh)
	}
	for a := 0; a < len(rows); a += wideRows {
		b := min(a+wideRows, len(rows))
		widenRows(e, *wp, mat, dh, rows[a:b])
		f(a, b, (*wp)[:(b-a)*dh])
	}
	widePool.Put(wp)
}

// widenRows widens the bf16 rows of mat (rows[i]·dh, dh values each) into
// w[i·dh:], each run of consecutive rows in one call.
func widenRows(e *ops.Engine, w []float32, mat []uint16, dh int, rows []int32) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[i]+int32(j-i) {
			j++
		}
		s := int(rows[i]) * dh
		e.WidenBF16(w[i*dh:j*dh], mat[s:s+(j-i)*dh])
		i = j
	}
}

// KV returns the keys and values a CPU ring holds, [heads][capacity][dh]
// (inspection and tests): a bf16 ring's widened, in new slices.
func KV(r *backend.Ring) (k, v []float32) {
	unshare(r)
	return dataOf(r).keysValues()
}

func (d *ring[E]) keysValues() (k, v []float32) {
	switch dk := any(d.k).(type) {
	case []float32:
		return dk, any(d.v).([]float32)
	case []uint16:
		k, v = make([]float32, len(d.k)), make([]float32, len(d.v))
		e := ops.Default()
		e.WidenBF16(k, dk)
		e.WidenBF16(v, any(d.v).([]uint16))
	}
	return k, v
}

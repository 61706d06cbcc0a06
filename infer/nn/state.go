package nn

import (
	"math"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// KVRing is RingKVCache: keys and values of the last Capacity positions of
// one layer, written at slot position % capacity. Layout [heads][capacity][dh]
// (as the reference's [B, H, capacity, D]), so that one head's keys are
// contiguous for attention.
type KVRing struct {
	Capacity  int
	Heads, Dh int
	K, V      []float32
	End       int // end_offset: positions written so far
}

// NewKVRing allocates an empty ring.
func NewKVRing(capacity, heads, dh int) KVRing {
	n := capacity * heads * dh
	return KVRing{Capacity: capacity, Heads: heads, Dh: dh, K: make([]float32, n), V: make([]float32, n)}
}

// at is the offset of (head, slot) in K and V.
func (r *KVRing) at(head, slot int) int { return (head*r.Capacity + slot) * r.Dh }

// Reset forgets every position (end_offset = 0), as RingKVCache.reset.
func (r *KVRing) Reset() { r.End = 0 }

// write appends the keys and values (heads concatenated) of one position.
func (r *KVRing) write(k, v []float32) {
	slot := r.End % r.Capacity
	for h := 0; h < r.Heads; h++ {
		o := r.at(h, slot)
		copy(r.K[o:o+r.Dh], k[h*r.Dh:(h+1)*r.Dh])
		copy(r.V[o:o+r.Dh], v[h*r.Dh:(h+1)*r.Dh])
	}
	r.End++
}

// position of ring slot j, or -1 when never written. This is the
// reference's formula exactly, quirk included: the slot at end%capacity gets
// position end (delta <= 0, not < 0), so once the ring is full its oldest
// entry is masked as a "future" key and a query sees capacity−1 past
// positions. The fixtures depend on it (temporal ring, and the depformer's
// last step never attending to its first).
func (r *KVRing) position(j int) int {
	if j >= r.End {
		return -1
	}
	endIndex := r.End % r.Capacity
	delta := j - endIndex
	if delta <= 0 {
		return r.End + delta
	}
	return r.End + delta - r.Capacity
}

// TransformerState is the streaming state of one Transformer: its offset
// (steps since reset, the RoPE position and weights-per-step index) and one
// KV ring per layer. It can be reset, copied and inspected.
type TransformerState struct {
	Offset int
	Rings  []KVRing
	sc     scratch
}

type scratch struct {
	rows                       int
	h, q, att, o, ffa          []float32   // [rows * width]
	hR, qR, attR, oR, ffaR, gR [][]float32 // row views of the above (gR: gated hidden half)
	job                        attnJob
	headFn                     func(int) // job.head, bound once so that calls allocate nothing
}

// NewState allocates a fresh state (all rings empty).
func (t *Transformer) NewState() *TransformerState {
	D := t.Cfg.DModel
	c := t.Capacity()
	s := &TransformerState{Rings: make([]KVRing, len(t.Layers))}
	for i := range s.Rings {
		s.Rings[i] = NewKVRing(c, t.Cfg.NumHeads, D/t.Cfg.NumHeads)
	}
	s.sc.job = attnJob{t: t, valid: make([]int32, 0, c), scores: make([]float32, t.Cfg.NumHeads*c)}
	s.sc.headFn = s.sc.job.head
	return s
}

// Reset returns the state to a fresh one without reallocating.
func (s *TransformerState) Reset() {
	s.Offset = 0
	for i := range s.Rings {
		s.Rings[i].Reset()
	}
}

// CopyFrom makes s an exact copy of o (same transformer).
func (s *TransformerState) CopyFrom(o *TransformerState) {
	s.Offset = o.Offset
	for i := range s.Rings {
		copy(s.Rings[i].K, o.Rings[i].K)
		copy(s.Rings[i].V, o.Rings[i].V)
		s.Rings[i].End = o.Rings[i].End
	}
}

func (sc *scratch) ensure(rows, d, hidden int) {
	if sc.rows >= rows && len(sc.ffa) >= rows*2*hidden {
		return
	}
	sc.rows = rows
	sc.h = make([]float32, rows*d)
	sc.q = make([]float32, rows*3*d)
	sc.att = make([]float32, rows*d)
	sc.o = make([]float32, rows*d)
	sc.ffa = make([]float32, rows*2*hidden)
	views := func(buf []float32, w, n int) [][]float32 {
		r := make([][]float32, rows)
		for i := range r {
			r[i] = buf[i*w : i*w+n]
		}
		return r
	}
	sc.hR, sc.qR = views(sc.h, d, d), views(sc.q, 3*d, 3*d)
	sc.attR, sc.oR = views(sc.att, d, d), views(sc.o, d, d)
	sc.ffaR, sc.gR = views(sc.ffa, 2*hidden, 2*hidden), views(sc.ffa, 2*hidden, hidden)
}

// Forward runs T = len(xs) positions through the transformer in place, with
// the reference's semantics for a chunk of T: every layer first writes the T
// new keys/values into its ring, then each query attends to the ring with
// the causal/context mask. For T = 1 this is one streaming step.
func (t *Transformer) Forward(s *TransformerState, xs [][]float32) {
	t.forward(t, s, xs, false)
}

// ForwardSteps gives exactly what calling Forward once per row would give
// (each position sees the ring as it was after its own write), while doing
// the projections for all rows together: the prompt prefill.
func (t *Transformer) ForwardSteps(s *TransformerState, xs [][]float32) {
	t.forward(t, s, xs, true)
}

// forward computes the layers in order, each from the weights the source
// hands out for it (the transformer itself for Forward and ForwardSteps).
func (t *Transformer) forward(from LayerSource, s *TransformerState, xs [][]float32, stepwise bool) {
	T := len(xs)
	if T == 0 {
		return
	}
	D := t.Cfg.DModel
	s.sc.ensure(T, D, t.hidden)
	sc := &s.sc
	hR, qR, attR, oR := sc.hR[:T], sc.qR[:T], sc.attR[:T], sc.oR[:T]
	perStep := t.Cfg.WeightsPerStep > 0
	// matmul applies m (or its slice for each row's step) to every row:
	// one pass over the weights for all rows when they share them.
	matmul := func(m ops.Mat, rows int, dst, src [][]float32) {
		if !perStep {
			m.MatMul(dst, src)
			return
		}
		for i := range src {
			t.stepMat(m, s.Offset+i, rows).MatVec(dst[i], src[i])
		}
	}
	for li := range t.Layers {
		l := from.AcquireLayer(li)
		ring := &s.Rings[li]
		// Self-attention block.
		for i, x := range xs {
			l.norm1.Apply(hR[i], x)
		}
		matmul(l.InProj, 3*D, qR, hR)
		if t.rope != nil {
			for i, qkv := range qR {
				for hd := 0; hd < t.Cfg.NumHeads; hd++ {
					t.rope.Apply(qkv[hd*t.dHead:(hd+1)*t.dHead], s.Offset+i)
					t.rope.Apply(qkv[D+hd*t.dHead:D+(hd+1)*t.dHead], s.Offset+i)
				}
			}
		}
		if !stepwise {
			for _, qkv := range qR {
				ring.write(qkv[D:2*D], qkv[2*D:])
			}
		}
		for i, qkv := range qR {
			if stepwise {
				ring.write(qkv[D:2*D], qkv[2*D:])
			}
			t.attend(ring, sc, qkv[:D], attR[i], s.Offset+i)
		}
		matmul(l.OutProj, D, oR, attR)
		for i, x := range xs {
			ops.AddScaled(x, oR[i], l.scale1)
		}
		// Feed-forward block.
		for i, x := range xs {
			l.norm2.Apply(hR[i], x)
		}
		if l.gates == nil {
			aR := sc.gR[:T] // hidden-wide rows
			l.linear1.MatMul(aR, hR)
			for _, a := range aR {
				ops.GELU(a)
			}
			l.linear2.MatMul(oR, aR)
		} else {
			aR, gR := sc.ffaR[:T], sc.gR[:T]
			hid := t.hidden
			if perStep {
				for i := range xs {
					g := l.gates[s.Offset+i]
					g.in.MatVec(aR[i], hR[i])
				}
			} else {
				l.gates[0].in.MatMul(aR, hR)
			}
			for _, a := range aR {
				for j := 0; j < hid; j++ {
					a[j] = t.act(a[j]) * a[hid+j]
				}
			}
			if perStep {
				for i := range xs {
					l.gates[s.Offset+i].out.MatVec(oR[i], gR[i])
				}
			} else {
				l.gates[0].out.MatMul(oR, gR)
			}
		}
		for i, x := range xs {
			ops.AddScaled(x, oR[i], l.scale2)
		}
		from.ReleaseLayer(li)
	}
	s.Offset += T
}

func (t *Transformer) stepMat(m ops.Mat, step, rows int) ops.Mat {
	if t.Cfg.WeightsPerStep == 0 {
		return m
	}
	return m.RowSlice(step*rows, (step+1)*rows)
}

// attnJob is one query's attention, split by head (each head's output is
// computed by one thread in a fixed order, so results do not depend on the
// thread count).
type attnJob struct {
	t      *Transformer
	r      *KVRing
	q, out []float32
	valid  []int32   // ring slots the query attends to, in slot order
	scores []float32 // [heads][capacity]
}

// parallelAttention is the work (valid keys × d_model) above which heads are
// spread over the worker pool.
const parallelAttention = 1 << 16

// attend computes softmax(q·kᵀ/√d + mask)·v per head for a query at posQ.
func (t *Transformer) attend(r *KVRing, sc *scratch, q, out []float32, posQ int) {
	j := &sc.job
	j.r, j.q, j.out = r, q, out
	j.valid = j.valid[:0]
	for slot := 0; slot < r.Capacity; slot++ {
		pk := r.position(slot)
		delta := posQ - pk
		if pk < 0 || delta < 0 || (t.Cfg.Context > 0 && delta >= t.Cfg.Context) {
			continue
		}
		j.valid = append(j.valid, int32(slot))
	}
	if t.Cfg.NumHeads > 1 && len(j.valid)*t.Cfg.DModel >= parallelAttention {
		ops.Parallel(t.Cfg.NumHeads, sc.headFn)
		return
	}
	for hd := 0; hd < t.Cfg.NumHeads; hd++ {
		j.head(hd)
	}
}

func (j *attnJob) head(hd int) {
	t, r := j.t, j.r
	dh := t.dHead
	scale := float32(1 / math.Sqrt(float64(dh)))
	qh := j.q[hd*dh : (hd+1)*dh]
	scores := j.scores[hd*r.Capacity : hd*r.Capacity+len(j.valid)]
	maxv := float32(math.Inf(-1))
	for i, slot := range j.valid {
		o := r.at(hd, int(slot))
		v := ops.Dot(qh, r.K[o:o+dh]) * scale
		scores[i] = v
		maxv = max(maxv, v)
	}
	var sum float32
	for i, v := range scores {
		e := float32(math.Exp(float64(v - maxv)))
		scores[i] = e
		sum += e
	}
	oh := j.out[hd*dh : (hd+1)*dh]
	clear(oh)
	inv := 1 / sum
	for i, slot := range j.valid {
		o := r.at(hd, int(slot))
		ops.Axpy(oh, scores[i]*inv, r.V[o:o+dh])
	}
}

// FillSynthetic makes the state look as if n positions had been processed:
// every ring holds n (or its capacity's worth of) positions of small
// deterministic keys and values and the offset is n. For benchmarks of
// attention at long contexts without running n steps; not for generation.
func (s *TransformerState) FillSynthetic(n int) {
	s.Offset += n
	for i := range s.Rings {
		r := &s.Rings[i]
		for j := range r.K {
			r.K[j] = float32(j%13-6) * 0.01
			r.V[j] = float32(j%7-3) * 0.01
		}
		r.End += n
	}
}

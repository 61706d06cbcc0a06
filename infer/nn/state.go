package nn

import (
	"math"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// KVRing is RingKVCache: keys and values of the last Capacity positions of
// one layer, [capacity][D] each (heads concatenated), written at
// position % capacity.
type KVRing struct {
	Capacity int
	K, V     []float32
	End      int // end_offset: positions written so far
}

// Reset forgets every position (end_offset = 0), as RingKVCache.reset.
func (r *KVRing) Reset() { r.End = 0 }

func (r *KVRing) write(k, v []float32, d int) {
	slot := r.End % r.Capacity
	copy(r.K[slot*d:(slot+1)*d], k)
	copy(r.V[slot*d:(slot+1)*d], v)
	r.End++
}

// position of ring slot j, or -1 when never written.
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
	rows                    int
	h, q, k, v, att, o, ffa []float32 // [rows * width]
	scores                  []float32
}

// NewState allocates a fresh state (all rings empty).
func (t *Transformer) NewState() *TransformerState {
	D := t.Cfg.DModel
	c := t.Capacity()
	s := &TransformerState{Rings: make([]KVRing, len(t.Layers))}
	for i := range s.Rings {
		s.Rings[i] = KVRing{Capacity: c, K: make([]float32, c*D), V: make([]float32, c*D)}
	}
	s.sc.scores = make([]float32, c)
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
}

// Forward runs T = len(xs) positions through the transformer in place, with
// the reference's semantics for a chunk of T: every layer first writes the T
// new keys/values into its ring, then each query attends to the ring with
// the causal/context mask. For T = 1 this is one streaming step.
func (t *Transformer) Forward(s *TransformerState, xs [][]float32) {
	t.forward(s, xs, false)
}

// ForwardSteps gives exactly what calling Forward once per row would give
// (each position sees the ring as it was after its own write), while doing
// the projections for all rows together: the prompt prefill.
func (t *Transformer) ForwardSteps(s *TransformerState, xs [][]float32) {
	t.forward(s, xs, true)
}

func (t *Transformer) forward(s *TransformerState, xs [][]float32, stepwise bool) {
	T := len(xs)
	if T == 0 {
		return
	}
	D := t.Cfg.DModel
	s.sc.ensure(T, D, t.hidden)
	sc := &s.sc
	for li, l := range t.Layers {
		ring := &s.Rings[li]
		// Self-attention block.
		for i, x := range xs {
			h := sc.h[i*D : (i+1)*D]
			l.norm1.apply(h, x)
			step := s.Offset + i
			qkv := sc.q[i*3*D : (i+1)*3*D]
			t.stepMat(l.InProj, step, 3*D).MatVec(qkv, h)
			if t.rope != nil {
				for hd := 0; hd < t.Cfg.NumHeads; hd++ {
					t.rope.Apply(qkv[hd*t.dHead:(hd+1)*t.dHead], step)
					t.rope.Apply(qkv[D+hd*t.dHead:D+(hd+1)*t.dHead], step)
				}
			}
		}
		if !stepwise {
			for i := range xs {
				qkv := sc.q[i*3*D : (i+1)*3*D]
				ring.write(qkv[D:2*D], qkv[2*D:], D)
			}
		}
		for i := range xs {
			qkv := sc.q[i*3*D : (i+1)*3*D]
			if stepwise {
				ring.write(qkv[D:2*D], qkv[2*D:], D)
			}
			t.attend(ring, sc, qkv[:D], sc.att[i*D:(i+1)*D], s.Offset+i)
		}
		for i, x := range xs {
			o := sc.o[i*D : (i+1)*D]
			t.stepMat(l.OutProj, s.Offset+i, D).MatVec(o, sc.att[i*D:(i+1)*D])
			ops.AddScaled(x, o, l.scale1)
		}
		// Feed-forward block.
		for i, x := range xs {
			h := sc.h[i*D : (i+1)*D]
			l.norm2.apply(h, x)
			o := sc.o[i*D : (i+1)*D]
			if l.gates == nil {
				a := sc.ffa[i*t.hidden : (i+1)*t.hidden]
				l.linear1.MatVec(a, h)
				ops.GELU(a)
				l.linear2.MatVec(o, a)
			} else {
				g := l.gates[0]
				if t.Cfg.WeightsPerStep > 0 {
					g = l.gates[s.Offset+i]
				}
				a := sc.ffa[i*2*t.hidden : (i+1)*2*t.hidden]
				g.in.MatVec(a, h)
				hid := t.hidden
				for j := 0; j < hid; j++ {
					a[j] = t.act(a[j]) * a[hid+j]
				}
				g.out.MatVec(o, a[:hid])
			}
			ops.AddScaled(x, o, l.scale2)
		}
	}
	s.Offset += T
}

func (t *Transformer) stepMat(m ops.Mat, step, rows int) ops.Mat {
	if t.Cfg.WeightsPerStep == 0 {
		return m
	}
	return m.RowSlice(step*rows, (step+1)*rows)
}

// attend computes softmax(q·kᵀ/√d + mask)·v per head for a query at posQ.
func (t *Transformer) attend(r *KVRing, sc *scratch, q, out []float32, posQ int) {
	D := t.Cfg.DModel
	dh := t.dHead
	scale := float32(1 / math.Sqrt(float64(dh)))
	scores := sc.scores[:r.Capacity]
	for hd := 0; hd < t.Cfg.NumHeads; hd++ {
		qh := q[hd*dh : (hd+1)*dh]
		maxv := float32(math.Inf(-1))
		for j := 0; j < r.Capacity; j++ {
			pk := r.position(j)
			delta := posQ - pk
			if pk < 0 || delta < 0 || (t.Cfg.Context > 0 && delta >= t.Cfg.Context) {
				scores[j] = float32(math.Inf(-1))
				continue
			}
			v := ops.Dot(qh, r.K[j*D+hd*dh:j*D+(hd+1)*dh]) * scale
			scores[j] = v
			if v > maxv {
				maxv = v
			}
		}
		var sum float32
		for j, v := range scores {
			if math.IsInf(float64(v), -1) {
				scores[j] = 0
				continue
			}
			e := float32(math.Exp(float64(v - maxv)))
			scores[j] = e
			sum += e
		}
		oh := out[hd*dh : (hd+1)*dh]
		clear(oh)
		inv := 1 / sum
		for j, w := range scores {
			if w == 0 {
				continue
			}
			w *= inv
			vv := r.V[j*D+hd*dh : j*D+(hd+1)*dh]
			for d := range oh {
				oh[d] += w * vv[d]
			}
		}
	}
}

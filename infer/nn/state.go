package nn

import "github.com/pp-offline/pp-offline/infer/backend"

// TransformerState is the streaming state of one Transformer for one
// sequence (conversation): its offset (steps since reset, the RoPE
// position) and one KV ring per layer, in backend memory. It can be reset,
// copied and inspected.
type TransformerState struct {
	Offset int
	Rings  []*backend.Ring
}

// initialCapacity is the ring size a state starts with; rings grow (by
// doubling, up to the context) as the sequence needs them, so that a batch
// of short conversations does not hold B full-context caches.
const initialCapacity = 64

// NewState allocates a fresh state (all rings empty) on be.
func (t *Transformer) NewState(be backend.Backend) *TransformerState {
	c := min(t.MaxCapacity(), initialCapacity)
	if t.Cfg.Context <= 0 {
		c = t.MaxCapacity() // the depformer's ring is exactly dep_q (its mask depends on it)
	}
	s := &TransformerState{Rings: make([]*backend.Ring, t.Cfg.NumLayers)}
	for i := range s.Rings {
		s.Rings[i] = be.NewRing(t.Cfg.NumHeads, t.DHead, c)
	}
	return s
}

// Reset returns the state to a fresh one without reallocating.
func (s *TransformerState) Reset() {
	s.Offset = 0
	for _, r := range s.Rings {
		r.Reset()
	}
}

// CopyFrom makes s an exact copy of o (same transformer, same backend).
func (s *TransformerState) CopyFrom(be backend.Backend, o *TransformerState) {
	s.Offset = o.Offset
	for i, r := range s.Rings {
		be.CopyRing(r, o.Rings[i])
	}
}

// Bytes is the KV storage the state holds now.
func (s *TransformerState) Bytes() int64 {
	var n int64
	for _, r := range s.Rings {
		n += r.Bytes()
	}
	return n
}

// reserve grows every ring so that n more positions fit without wrapping
// (or to the context, after which the ring wraps as the reference's does).
// A ring below its full capacity is never allowed to fill up: the
// reference's mask treats a full ring's oldest slot as a future key, which
// must only happen where the reference's full-context ring is full.
func (t *Transformer) reserve(be backend.Backend, s *TransformerState, n int) {
	maxC := t.MaxCapacity()
	need := s.Offset + n
	for _, r := range s.Rings {
		if r.Capacity >= maxC || need < r.Capacity {
			continue
		}
		be.GrowRing(r, min(maxC, max(need+1, 2*r.Capacity)))
	}
}

// Reserve sizes every ring at once for n more positions (at most the
// context), where reserve would grow them by doubling as they come: a
// conversation whose length is known is then never grown, so its rings are
// not copied while it runs. A ring it grows gets a quarter more than the
// n + 1 slots needed (not the next power of two), so that the rings of a
// renewed generator (lm.Gen.Renew) also fit the job's next conversation
// when it is a little longer. It computes nothing: attention reads the
// same positions from a ring of any capacity that has not wrapped, so
// outputs do not depend on it.
func (t *Transformer) Reserve(be backend.Backend, s *TransformerState, n int) {
	if t.Cfg.Context <= 0 || n <= 0 {
		return
	}
	need := s.Offset + n + 1
	target := min(t.MaxCapacity(), need+need/4)
	for _, r := range s.Rings {
		if r.Capacity < min(t.MaxCapacity(), need) {
			be.GrowRing(r, target)
		}
	}
}

// FillSynthetic makes the state look as if n positions had been processed:
// every ring at its full capacity holds small deterministic keys and
// values, and the offset is n. For benchmarks of attention at long
// contexts without running n steps; not for generation.
func (t *Transformer) FillSynthetic(be backend.Backend, s *TransformerState, n int) {
	for _, r := range s.Rings {
		be.GrowRing(r, t.MaxCapacity())
		be.FillRing(r, n)
	}
	s.Offset += n
}

package lm

import (
	"fmt"
	"slices"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// Snapshot is a copy of a Gen's streaming state between two steps: the
// token cache and provided flags, the offset, the temporal transformer's
// state (offset and KV rings, copied in backend memory: device buffers on a
// GPU) and the last step's output. It is what the prompt phases leave, taken
// once and restored into every conversation that starts from the same
// prompts (the job's prompt cache).
//
// The random generator is not part of it: it is each conversation's own,
// seeded by its Reset. The prompt phases force every stream, so no step of
// theirs draws from it (a provided token is an argmax, ops.Sampler.Sample
// is never called), and a conversation restored from a snapshot of its
// prompts has its generator exactly where its own prompt phases would have
// left it. Nothing of the depformer is kept across steps (the engine resets
// its per-row states every step) and the codec's streams are the Session's,
// untouched by the prompt phases.
//
// A Snapshot is immutable once taken; it can be restored any number of
// times, into Gens of the same model on the same backend.
type Snapshot struct {
	m  *Model
	be backend.Backend

	offset   int
	cache    []int
	provided []bool
	ts       *nn.TransformerState
	out      []int
	ok       bool
}

// Snapshot runs any pending prefill and returns a copy of the Gen's state
// (its KV rings copied in backend memory). The Gen is unchanged and goes on.
func (g *Gen) Snapshot() *Snapshot {
	g.Flush()
	be := g.e.be
	s := &Snapshot{m: g.m, be: be, offset: g.offset, cache: slices.Clone(g.cache), provided: slices.Clone(g.provided),
		out: slices.Clone(g.out), ok: g.ok}
	s.ts = emptyStateLike(g.ts)
	s.ts.CopyFrom(be, g.ts)
	for _, r := range s.ts.Rings {
		r.ReadOnly = true // Restore's copies may read its positions in place
	}
	return s
}

// Restore makes the Gen continue exactly as the Gen the snapshot was taken
// from would have: Reset (its own generator reseeded from its own seed),
// then the snapshot's token cache, offset and transformer state. The Gen
// must be of the same model on the same backend (a programming error
// otherwise, as a conversation of another engine in Step is); its options
// are its own (they do not enter the prompt phases' state beyond the frame
// rate and StepwisePrompts, which the caller keys snapshots by).
func (g *Gen) Restore(s *Snapshot) {
	if s.m != g.m || s.be != g.e.be {
		panic("lm: Restore: a snapshot of another model or backend")
	}
	if len(s.cache) != len(g.cache) || len(s.ts.Rings) != len(g.ts.Rings) {
		panic(fmt.Sprintf("lm: Restore: a snapshot of %d cache cells and %d layers into a Gen of %d and %d",
			len(s.cache), len(s.ts.Rings), len(g.cache), len(g.ts.Rings)))
	}
	g.Reset()
	g.offset = s.offset
	copy(g.cache, s.cache)
	copy(g.provided, s.provided)
	copy(g.out, s.out)
	g.ok = s.ok
	g.ts.CopyFrom(g.e.be, s.ts)
}

// Offset is the LMGen offset of the snapshot's state.
func (s *Snapshot) Offset() int { return s.offset }

// Bytes is the memory the snapshot holds: its KV rings (in backend memory)
// and its token cache.
func (s *Snapshot) Bytes() int64 {
	return s.ts.Bytes() + int64(len(s.cache)+len(s.out))*8 + int64(len(s.provided))
}

// emptyStateLike is a transformer state with as many layers as ts and no
// storage: CopyFrom allocates each ring at its source's capacity (an empty
// Ring has capacity 0), so a snapshot holds no ring of the initial size
// that would be thrown away.
func emptyStateLike(ts *nn.TransformerState) *nn.TransformerState {
	s := &nn.TransformerState{Rings: make([]*backend.Ring, len(ts.Rings))}
	for i := range s.Rings {
		s.Rings[i] = &backend.Ring{}
	}
	return s
}

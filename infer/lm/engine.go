package lm

import (
	"context"
	"time"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// Engine computes LMGen steps on a backend: one conversation's, or B
// conversations' in lockstep, each weight read once per pass for all of
// them. A conversation's deferred prompt positions (its prefill) run in the
// same pass as its next real step, so conversations join a running batch
// at any point; one that finishes simply stops being passed to Step. Each
// conversation's outputs are bit-identical to a run of it alone: every op
// reduces each row in the same order whatever the batch (backend's
// contract), and sampling uses each conversation's own generator.
//
// The engine owns the activation scratch of a pass (shared by the batch)
// and the depformer's per-frame states (one per row). It is used from one
// goroutine.
type Engine struct {
	m  *Model
	be backend.Backend
	w  Weights

	tsc, dsc *nn.Scratch
	x        backend.Acts // the pass: every conversation's prefill rows, then its step row
	h        backend.Acts // out_norm of the step rows
	text     backend.Acts // text logits
	dx       backend.Acts // depformer rows
	audio    backend.Acts // depformer logits
	rows     int          // capacity of h, text, dx, audio
	dep      []*nn.TransformerState

	parts, depParts []nn.Part
	xrow            []int  // pass row of each transformer conversation's step
	heads           []*Gen // conversations that run the heads
	ids             []int
	tables          [1]*backend.Weight
	dec             []*Gen
	logits          [][]float32 // per head row: where its logits are downloaded

	one   [1]*Gen // a step of one conversation, without allocation
	oneIn [1]Input

	ctx       context.Context // SetContext
	stageSync bool            // SetStageTiming

	temporalBytes int64
}

// NewEngine prepares lockstep generation over m on be, with every weight
// taken from w (nil: the model's own mapped weights; an offload executor
// such as Placed goes here).
func NewEngine(m *Model, be backend.Backend, w Weights) *Engine {
	if w == nil {
		w = m.HostWeights()
	}
	return &Engine{m: m, be: be, w: w, tsc: m.Transformer.NewScratch(be), dsc: m.Dep.Tr.NewScratch(be),
		temporalBytes: m.TemporalBytes()}
}

// NewGen is a one-conversation engine's Gen on be with the model's own
// weights (tests, tools).
func NewGen(m *Model, be backend.Backend, opt GenOptions) *Gen {
	return NewEngine(m, be, nil).NewGen(opt)
}

// SetStageTiming makes each pass wait for the temporal transformer's work
// before timing it (Stats' TemporalTime, HeadsTime), on a backend whose ops
// run asynchronously (backend.Syncer): without it, TemporalTime is only
// the host's time to queue the work, and the device's time for it lands in
// HeadsTime, at the heads' first download. The wait costs one host
// synchronisation a pass (bench turns it on; jobs do not).
func (e *Engine) SetStageTiming(on bool) { e.stageSync = on }

// SetContext makes Step stop when ctx is cancelled: between the layers of
// a pass (a long prefill included), returning ctx.Err(). The conversations
// of a cancelled step are left in no usable state.
func (e *Engine) SetContext(ctx context.Context) {
	e.ctx = ctx
	cancelled := func() bool { return ctx.Err() != nil }
	e.tsc.Cancelled, e.dsc.Cancelled = cancelled, cancelled
}

// Backend is the backend the engine computes on.
func (e *Engine) Backend() backend.Backend { return e.be }

// Model is the model the engine runs.
func (e *Engine) Model() *Model { return e.m }

// Err is the first error of the engine's Weights.
func (e *Engine) Err() error { return e.w.Err() }

func (e *Engine) ensure(n, passRows int) {
	if e.x.Buf == nil || e.x.Rows < passRows {
		e.x = e.be.NewActs(max(passRows, 2*e.x.Rows), e.m.Cfg.Dim)
	}
	if n <= e.rows {
		return
	}
	c := &e.m.Cfg
	e.rows = max(n, 2*e.rows)
	e.h = e.be.NewActs(e.rows, c.Dim)
	e.text = e.be.NewActs(e.rows, e.m.TextLinear.Rows)
	e.dx = e.be.NewActs(e.rows, c.DepformerDim)
	e.audio = e.be.NewActs(e.rows, c.Card)
	for len(e.dep) < e.rows {
		e.dep = append(e.dep, e.m.Dep.Tr.NewState(e.be))
	}
	e.xrow = make([]int, e.rows)
	e.ids = make([]int, e.rows)
	e.depParts = make([]nn.Part, e.rows)
}

// Step runs one LMGen step for every conversation in lockstep:
// gens[i] is given ins[i]. Afterwards gens[i].Output() is what its step
// returned. A conversation appears at most once. The error is the
// context's (SetContext), when it was cancelled.
func (e *Engine) Step(gens []*Gen, ins []Input) error {
	if len(gens) != len(ins) {
		panic("lm: Step: one input per conversation")
	}
	dec := e.dec[:0]
	passRows := 0
	for i, g := range gens {
		if g.e != e {
			panic("lm: Step: a conversation of another engine")
		}
		if !g.begin(ins[i]) {
			continue
		}
		if g.deferred() {
			// Nothing sampled is kept: queue the position for the prefill.
			row := g.pending.row(g.npending)
			g.input(row)
			g.npending++
			g.finish()
			continue
		}
		dec = append(dec, g)
		passRows += g.npending + 1
	}
	e.dec = dec
	if len(dec) > 0 {
		e.pass(dec, passRows)
		if err := e.cancelled(); err != nil {
			clear(e.dec[:cap(e.dec)])
			return err
		}
		for _, g := range dec {
			g.finish()
		}
	}
	clear(e.dec[:cap(e.dec)])
	return nil
}

func (e *Engine) cancelled() error {
	if e.ctx == nil {
		return nil
	}
	return e.ctx.Err()
}

// input writes g's transformer input of this step into dst (one row): the
// embedding sum of its tokens, or the given embedding.
func (g *Gen) input(dst backend.Acts) {
	be := g.e.be
	if g.emb != nil {
		be.Upload(dst, g.emb)
	} else {
		be.Embed(dst, g.m.tables, g.ids, false)
	}
	if g.recording {
		x := make([]float32, g.m.Cfg.Dim)
		be.Download(x, dst)
		g.recorded = append(g.recorded, x)
	}
}

// pass is one forward pass: the prefill rows and step row of every
// conversation in dec through the temporal transformer, then the heads.
func (e *Engine) pass(dec []*Gen, passRows int) {
	e.ensure(len(dec), passRows)
	be, w := e.be, e.w
	x := e.x.Slice(0, passRows)
	parts := e.parts[:0]
	r, prefill := 0, 0
	for i, g := range dec {
		np := g.npending
		if np > 0 {
			be.Copy(x.Slice(r, r+np), g.pending.rows(np))
			prefill += np
		}
		g.input(x.Slice(r+np, r+np+1))
		e.xrow[i] = r + np
		parts = append(parts, nn.Part{State: g.ts, Rows: np + 1})
		g.stats.PrefillSteps = np
		g.npending = 0
		r += np + 1
	}
	e.parts = parts
	w.BeginPass()
	t0 := time.Now()
	e.m.Transformer.Forward(e.tsc, w, x, parts, backend.Stepwise)
	if s, ok := be.(backend.Syncer); e.stageSync && ok {
		s.Sync()
	}
	t1 := time.Now()
	if e.cancelled() != nil {
		w.EndPass()
		return
	}

	// The head: out_norm feeds the text head and the depformer; a
	// conversation that needs neither (all provided, Full off) skips it.
	heads := e.heads[:0]
	text, maxLast := false, -1
	for i, g := range dec {
		g.stats.Transformer = true
		g.stats.WeightBytes += e.temporalBytes
		if g.textHead || g.last >= 0 {
			e.xrow[len(heads)] = e.xrow[i]
			heads = append(heads, g)
			text = text || g.textHead
			maxLast = max(maxLast, g.last)
		}
	}
	e.heads = heads
	nh := len(heads)
	if nh > 0 {
		hd := w.AcquireHead()
		for k := range heads {
			be.Norm(e.h.Slice(k, k+1), x.Slice(e.xrow[k], e.xrow[k]+1), &hd.OutNorm)
		}
		if text {
			be.MatMul(e.text.Slice(0, nh), e.h.Slice(0, nh), hd.TextLinear)
		}
		w.ReleaseHead()
		if text {
			// One download of every conversation's text logits (one
			// device→host copy and wait on a GPU, not one per
			// conversation); a row whose text is provided lands unread.
			dsts := e.logits[:0]
			for _, g := range heads {
				dsts = append(dsts, g.textLogits)
			}
			e.logits = dsts
			backend.DownloadRows(be, dsts, e.text.Slice(0, nh))
		}
		for k, g := range heads {
			if g.textHead {
				g.sampleText()
			}
			e.ids[k] = g.prevText()
			e.dep[k].Reset()
			e.depParts[k] = nn.Part{State: e.dep[k], Rows: 1}
		}
		h, dx, audio := e.h.Slice(0, nh), e.dx.Slice(0, nh), e.audio.Slice(0, nh)
		d := e.m.Dep
		for j := 0; j <= maxLast; j++ {
			st := w.AcquireDepStep(j)
			be.MatMul(dx, h, st.In)
			e.tables[0] = d.Table(j)
			be.Embed(dx, e.tables[:], e.ids[:nh], true)
			d.Tr.Forward(e.dsc, &st.Layers, dx, e.depParts[:nh], backend.Stepwise)
			be.MatMul(audio, dx, st.Linear)
			w.ReleaseDepStep(j)
			// Step j's logits of every conversation in one download.
			dsts := e.logits[:0]
			for _, g := range heads {
				dsts = append(dsts, g.audioLogits[j])
			}
			e.logits = dsts
			backend.DownloadRows(be, dsts, audio)
			for k, g := range heads {
				if j > g.last {
					e.ids[k] = ZeroToken // a step this conversation does not need
					continue
				}
				e.ids[k] = g.sampleAudio(j)
				g.stats.DepSteps = j + 1
			}
		}
	}
	w.EndPass()
	t2 := time.Now()
	for _, g := range dec {
		g.stats.Batch = len(dec)
		g.stats.TemporalTime, g.stats.HeadsTime = t1.Sub(t0), t2.Sub(t1)
	}
	clear(e.heads[:cap(e.heads)])
	clear(e.logits[:cap(e.logits)])
}

// flush runs g's deferred positions alone (a pass without heads).
func (e *Engine) flush(g *Gen) {
	np := g.npending
	e.ensure(1, np)
	x := e.x.Slice(0, np)
	e.be.Copy(x, g.pending.rows(np))
	e.parts = append(e.parts[:0], nn.Part{State: g.ts, Rows: np})
	t0 := time.Now()
	e.w.BeginPass()
	e.m.Transformer.Forward(e.tsc, e.w, x, e.parts, backend.Stepwise)
	e.w.EndPass()
	g.stats.TemporalTime += time.Since(t0)
	g.stats.PrefillSteps += np
	g.stats.WeightBytes += e.temporalBytes
	g.npending = 0
}

// actsQueue is a growing list of rows in backend memory (a prefill queue).
type actsQueue struct {
	be   backend.Backend
	cols int
	buf  backend.Acts
}

// row is row i, growing the queue (keeping rows [0, i)) as needed.
func (q *actsQueue) row(i int) backend.Acts {
	if q.buf.Buf == nil || i >= q.buf.Rows {
		nb := q.be.NewActs(max(16, 2*q.buf.Rows, i+1), q.cols)
		if q.buf.Buf != nil && i > 0 {
			q.be.Copy(nb.Slice(0, i), q.buf.Slice(0, i))
		}
		q.buf = nb
	}
	return q.buf.Slice(i, i+1)
}

// rows is rows [0, n).
func (q *actsQueue) rows(n int) backend.Acts { return q.buf.Slice(0, n) }

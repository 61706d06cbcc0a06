package nn

import "github.com/pp-offline/pp-offline/infer/backend"

// LayerSource supplies the weights each layer of a forward pass is computed
// from, in execution order: AcquireLayer(i) before layer i runs,
// ReleaseLayer(i) once it no longer reads them. The Transformer itself is
// the default source (its own Layers: the mapped checkpoint, no overhead);
// an offload executor hands out layers bound to the memory its plan placed;
// the depformer hands out step j's layers. The model says what is computed
// and the source decides where the weights come from.
type LayerSource interface {
	AcquireLayer(i int) *Layer
	ReleaseLayer(i int)
}

// AcquireLayer returns layer i's own weights (Transformer as a LayerSource).
func (t *Transformer) AcquireLayer(i int) *Layer { return t.Layers[i] }

// ReleaseLayer does nothing (Transformer as a LayerSource).
func (t *Transformer) ReleaseLayer(int) {}

// Layers is a list of layers (a depformer step's); *Layers is a LayerSource
// (a pointer, so that passing it allocates nothing).
type Layers []*Layer

// AcquireLayer implements LayerSource.
func (l *Layers) AcquireLayer(i int) *Layer { return (*l)[i] }

// ReleaseLayer implements LayerSource.
func (l *Layers) ReleaseLayer(int) {}

// Part is a group of consecutive rows of a batch that belong to one
// sequence: Rows positions continuing State.
type Part struct {
	State *TransformerState
	Rows  int
}

// Scratch is the activation memory of forward passes of one transformer on
// one backend, shared by every sequence of a batch.
type Scratch struct {
	be                 backend.Backend
	rows               int
	h, qkv, att, o, ff backend.Acts
	pos                []int
	seqs               []backend.Seq
	rope               *backend.Rope

	// Cancelled, when set, is asked before every layer: true stops the
	// pass there (the states it touched are then unusable; the caller is
	// abandoning them), so that a long prefill stops within a layer.
	Cancelled func() bool
}

// NewScratch prepares scratch for t on be (grown on demand).
func (t *Transformer) NewScratch(be backend.Backend) *Scratch {
	sc := &Scratch{be: be}
	if t.Cfg.PosEmb == "rope" {
		sc.rope = be.NewRope(t.DHead, t.Cfg.MaxPeriod)
	}
	return sc
}

func (sc *Scratch) ensure(t *Transformer, rows, parts int) {
	if cap(sc.seqs) < parts {
		sc.seqs = make([]backend.Seq, parts)
	}
	if sc.rows >= rows {
		return
	}
	rows = max(rows, 2*sc.rows)
	D, be := t.Cfg.DModel, sc.be
	ffw := t.Hidden
	if t.Cfg.Gating != "none" {
		ffw = 2 * t.Hidden
	}
	sc.rows = rows
	sc.h, sc.qkv, sc.att, sc.o = be.NewActs(rows, D), be.NewActs(rows, 3*D), be.NewActs(rows, D), be.NewActs(rows, D)
	sc.ff = be.NewActs(rows, ffw)
	sc.pos = make([]int, rows)
}

// Forward runs x (in place) through the transformer: its rows are the
// parts' positions, in order. Each part's positions continue its state
// (offset and KV rings). group is Attend's: backend.Chunk is the
// reference's forward of a chunk of positions (every layer first writes
// the chunk's keys and values into the ring, then each query attends with
// the causal/context mask); backend.Stepwise gives exactly what running
// the rows one at a time would (each position sees the ring as after its
// own write): the prompt prefill and lockstep decoding of many
// conversations; a group of g rows, what running them g at a time as
// chunks would (Mimi: several frames of two positions). Each row's result
// is bit-identical whatever the other rows of the batch are.
func (t *Transformer) Forward(sc *Scratch, src LayerSource, x backend.Acts, parts []Part, group int) {
	T := x.Rows
	if T == 0 {
		return
	}
	sc.ensure(t, T, len(parts))
	be := sc.be
	D := t.Cfg.DModel
	h, qkv, att, o := sc.h.Slice(0, T), sc.qkv.Slice(0, T), sc.att.Slice(0, T), sc.o.Slice(0, T)
	ff := sc.ff.Slice(0, T)
	pos := sc.pos[:T]
	seqs := sc.seqs[:len(parts)]
	r := 0
	for _, p := range parts {
		t.reserve(be, p.State, p.Rows)
		for i := 0; i < p.Rows; i++ {
			pos[r] = p.State.Offset + i
			r++
		}
	}
	if r != T {
		panic("nn: the parts do not cover the batch")
	}
	for li := 0; li < t.Cfg.NumLayers; li++ {
		if sc.Cancelled != nil && sc.Cancelled() {
			return
		}
		l := src.AcquireLayer(li)
		// Self-attention block.
		be.Norm(h, x, &l.Norm1)
		be.MatMul(qkv, h, l.InProj)
		if sc.rope != nil {
			be.RoPE(qkv.Columns(0, D), sc.rope, pos)
			be.RoPE(qkv.Columns(D, 2*D), sc.rope, pos)
		}
		for k, p := range parts {
			seqs[k] = backend.Seq{Ring: p.State.Rings[li], Rows: p.Rows}
		}
		be.Attend(att, qkv, seqs, t.Cfg.Context, group)
		be.MatMul(o, att, l.OutProj)
		be.AddScaled(x, o, l.Scale1)
		// Feed-forward block.
		be.Norm(h, x, &l.Norm2)
		if t.Cfg.Gating == "none" {
			a := ff.Columns(0, t.Hidden)
			be.MatMul(a, h, l.Linear1)
			be.Activate(a, backend.GELU)
			be.MatMul(o, a, l.Linear2)
		} else {
			g := ff.Columns(0, t.Hidden)
			be.MatMul(ff, h, l.GateIn)
			be.Gate(g, ff, t.act)
			be.MatMul(o, g, l.GateOut)
		}
		be.AddScaled(x, o, l.Scale2)
		src.ReleaseLayer(li)
	}
	for _, p := range parts {
		p.State.Offset += p.Rows
	}
}

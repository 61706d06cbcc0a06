package lm

import (
	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// testBE is the backend the package's tests compute on.
var testBE = cpu.Default()

// host runs the model's pieces one position at a time on host slices, for
// tests that compare intermediate values with the reference's trace.
type host struct {
	m      *Model
	be     backend.Backend
	tsc    *nn.Scratch
	dsc    *nn.Scratch
	x, h   backend.Acts
	dx     backend.Acts
	logits backend.Acts
	audio  backend.Acts
	ids    []int
}

func newHost(m *Model) *host {
	be := testBE
	c := &m.Cfg
	return &host{m: m, be: be, tsc: m.Transformer.NewScratch(be), dsc: m.Dep.Tr.NewScratch(be),
		x: be.NewActs(1, c.Dim), h: be.NewActs(1, c.Dim), dx: be.NewActs(1, c.DepformerDim),
		logits: be.NewActs(1, m.TextLinear.Rows), audio: be.NewActs(1, c.Card), ids: make([]int, c.NQ+1)}
}

// embedCodes is embed_codes of tokens (text first) into dst.
func (hs *host) embedCodes(dst []float32, tokens []int) {
	copy(hs.ids, tokens[1:])
	hs.ids[len(tokens)-1] = tokens[0]
	hs.be.Embed(hs.x, hs.m.EmbedTables(), hs.ids, false)
	hs.be.Download(dst, hs.x)
}

// temporal runs one streaming step of tr (the model's transformer or a
// view of it) on x in place.
func (hs *host) temporal(tr *nn.Transformer, sc *nn.Scratch, st *nn.TransformerState, x []float32) {
	hs.be.Upload(hs.x, x)
	tr.Forward(sc, tr, hs.x, []nn.Part{{State: st, Rows: 1}}, backend.Stepwise)
	hs.be.Download(x, hs.x)
}

// step is the model's temporal step on x (in place), out_norm into h and
// the text logits.
func (hs *host) step(st *nn.TransformerState, x, h, logits []float32) {
	hs.temporal(hs.m.Transformer, hs.tsc, st, x)
	hs.be.Upload(hs.x, x)
	hs.be.Norm(hs.h, hs.x, &hs.m.OutNorm)
	hs.be.Download(h, hs.h)
	hs.be.MatMul(hs.logits, hs.h, hs.m.TextLinear)
	hs.be.Download(logits, hs.logits)
}

// layerHook is a LayerSource over a depformer step's layers that downloads
// x after every layer.
type layerHook struct {
	*nn.Layers
	be  backend.Backend
	x   backend.Acts
	out func(layer int, v []float32)
}

func (l *layerHook) ReleaseLayer(i int) {
	if l.out != nil {
		v := make([]float32, l.x.Cols)
		l.be.Download(v, l.x)
		l.out(i, v)
	}
}

// depStep runs depformer step j (the next one of st) on the out_norm'd
// temporal output h and the previous token, returning its input and
// logits; out, when set, gets each layer's output.
func (hs *host) depStep(st *nn.TransformerState, j int, h []float32, prev int, in, logits []float32, out func(int, []float32)) {
	d, be := hs.m.Dep, hs.be
	w := &d.steps[j]
	be.Upload(hs.h, h)
	be.MatMul(hs.dx, hs.h, w.In)
	hs.ids[0] = prev
	be.Embed(hs.dx, []*backend.Weight{d.Table(j)}, hs.ids[:1], true)
	if in != nil {
		be.Download(in, hs.dx)
	}
	d.Tr.Forward(hs.dsc, &layerHook{Layers: &w.Layers, be: be, x: hs.dx, out: out}, hs.dx, []nn.Part{{State: st, Rows: 1}}, backend.Stepwise)
	be.MatMul(hs.audio, hs.dx, w.Linear)
	be.Download(logits, hs.audio)
}

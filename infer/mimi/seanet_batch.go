package mimi

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// seanetBatch runs one SEANet module of many streams at once: each stream
// keeps its own stage (its streaming history and padding state, loaded and
// advanced exactly as its forward does), and the convolutions of all
// streams run as one batched product (ops ForwardBatch: the deep layers'
// few rows per stream gathered into shared register tiles, every weight
// panel read once for the batch). Each stream's rows are bit-identical to
// its stage's own forward.
type seanetBatch struct {
	e     *ops.Engine
	sc    ops.ConvBatchScratch
	segs  []ops.ConvSeg
	convs []*convStage
	trs   []*convTrStage
	cols  []stage
	ys    [][]float32 // a residual block's branch rows
	ns    []int
	skip  [][]float32
	nskip []int

	// The per-stream parts of a stage, run on the engine's threads when
	// they are large (parallelStreams): the input loads of conv and convTr
	// (the ELU of the layer's input, the copy into the stream's history)
	// and the residual sums of res. Each stream's work is its own, so the
	// results are the same in any order.
	lc                      []*convStage
	ltr                     []*convTrStage
	lxs                     [][]float32
	lts                     []int
	loadFn, loadTrFn, addFn func(int)
}

// parallelStreams is the floats of per-stream work above which it runs on
// the engine's threads.
const parallelStreams = 1 << 15

func newSeanetBatch(e *ops.Engine) *seanetBatch {
	b := &seanetBatch{e: e}
	b.loadFn, b.loadTrFn, b.addFn = b.loadOne, b.loadTrOne, b.addOne
	return b
}

// perStream runs f(i) for every stream i, on the engine's threads when the
// streams' work (floats in all) is large.
func (b *seanetBatch) perStream(n, floats int, f func(int)) {
	if n > 1 && floats >= parallelStreams {
		b.e.Parallel(n, f)
		return
	}
	for i := range n {
		f(i)
	}
}

// loadOne loads stream i's input into the stage of conv being run and sets
// its segment of the batched product.
func (b *seanetBatch) loadOne(i int) {
	s := b.lc[i]
	buf, n := s.load(b.lxs[i], b.lts[i])
	s.out = grow(s.out, n*s.l.c.Out)
	b.segs[i] = ops.ConvSeg{Dst: s.out, Src: buf, T: n}
}

// loadTrOne loads stream i's input into the stage of convTr being run and
// sets its segment of the batched product.
func (b *seanetBatch) loadTrOne(i int) {
	s, T := b.ltr[i], b.lts[i]
	s.out = grow(s.out, T*s.l.c.Stride*s.l.c.Out)
	b.segs[i] = ops.ConvSeg{Dst: s.out, T: T}
	if T > 0 {
		b.segs[i].Src = s.load(b.lxs[i], T)
	}
}

// loadFloats is the input floats of the streams' next stage: ts[:n] rows
// of in floats.
func loadFloats(ts []int, n, in int) int {
	f := 0
	for _, t := range ts[:n] {
		f += t * in
	}
	return f
}

// addOne adds stream i's shortcut into its branch's rows (res).
func (b *seanetBatch) addOne(i int) {
	y := b.ys[i]
	b.e.Add(y, b.skip[i][:len(y)])
}

// at returns s resized to n (contents not kept when it grows).
func at[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// forward runs stage k of every stream (ss[i] of stream i, all from the
// same layer) on xs[i] (ts[i] rows); the outputs replace xs[i] and ts[i].
func (b *seanetBatch) forward(ss []stage, xs [][]float32, ts []int) {
	if len(ss) == 0 {
		return
	}
	switch ss[0].(type) {
	case *convStage:
		b.convs = at(b.convs, len(ss))
		for i, s := range ss {
			b.convs[i] = s.(*convStage)
		}
		b.conv(b.convs, xs, ts)
	case *convTrStage:
		b.trs = at(b.trs, len(ss))
		for i, s := range ss {
			b.trs[i] = s.(*convTrStage)
		}
		b.convTr(b.trs, xs, ts)
	case *resStage:
		b.res(ss, xs, ts)
	default:
		for i, s := range ss {
			xs[i], ts[i] = s.forward(xs[i], ts[i])
		}
	}
	clear(b.convs)
	clear(b.trs)
}

// conv runs one convolution stage of every stream.
func (b *seanetBatch) conv(cs []*convStage, xs [][]float32, ts []int) {
	c := cs[0].l.c
	b.segs = at(b.segs, len(cs))
	b.lc, b.lxs, b.lts = cs, xs, ts
	b.perStream(len(cs), loadFloats(ts, len(cs), c.In), b.loadFn)
	b.lc, b.lxs, b.lts = nil, nil, nil
	c.ForwardBatch(b.e, b.segs, &b.sc)
	for i, s := range cs {
		n := b.segs[i].T
		s.advance(n)
		xs[i], ts[i] = s.out, n
	}
	clear(b.segs)
}

// convTr runs one transposed convolution stage of every stream.
func (b *seanetBatch) convTr(cs []*convTrStage, xs [][]float32, ts []int) {
	c := cs[0].l.c
	b.segs = at(b.segs, len(cs))
	b.ltr, b.lxs, b.lts = cs, xs, ts
	b.perStream(len(cs), loadFloats(ts, len(cs), c.In), b.loadTrFn)
	b.ltr, b.lxs, b.lts = nil, nil, nil
	c.ForwardBatch(b.e, b.segs, &b.sc)
	for i, s := range cs {
		if T := b.segs[i].T; T > 0 {
			s.advance(T)
		}
		xs[i], ts[i] = s.out, b.segs[i].T*c.Stride
	}
	clear(b.segs)
}

// res runs one residual block of every stream: the branch's convolutions
// and the shortcut batched, then each stream's skip added (as
// resStage.forward).
func (b *seanetBatch) res(ss []stage, xs [][]float32, ts []int) {
	B := len(ss)
	first := ss[0].(*resStage)
	b.ys, b.ns = at(b.ys, B), at(b.ns, B)
	b.skip, b.nskip = at(b.skip, B), at(b.nskip, B)
	copy(b.ys, xs)
	copy(b.ns, ts)
	copy(b.skip, xs)
	copy(b.nskip, ts)
	cs := at(b.convs, B)
	for j := range first.block {
		for i, s := range ss {
			cs[i] = s.(*resStage).block[j]
		}
		b.conv(cs, b.ys, b.ns)
	}
	if first.shortcut != nil {
		for i, s := range ss {
			cs[i] = s.(*resStage).shortcut
		}
		b.conv(cs, b.skip, b.nskip)
	}
	b.convs = cs
	floats := 0
	for i := range ss {
		n := b.ns[i]
		if first.shortcut != nil && b.nskip[i] != n {
			panic(fmt.Sprintf("mimi: residual block: shortcut gave %d rows, branch %d", b.nskip[i], n))
		}
		if n != ts[i] && first.shortcut == nil {
			panic(fmt.Sprintf("mimi: residual block: branch gave %d rows for %d inputs", n, ts[i]))
		}
		floats += len(b.ys[i])
	}
	b.perStream(B, floats, b.addFn)
	for i := range ss {
		xs[i], ts[i] = b.ys[i], b.ns[i]
	}
	clear(b.ys)
	clear(b.skip)
}

// run passes every stream's input through its whole stage list: steps(i)
// is stream i's list, all built from the same layers.
func (b *seanetBatch) run(B int, steps func(i int) []stage, xs [][]float32, ts []int) {
	if B == 0 {
		return
	}
	n := len(steps(0))
	col := at(b.cols, B)
	for k := 0; k < n; k++ {
		for i := range col {
			col[i] = steps(i)[k]
		}
		b.forward(col, xs, ts)
	}
	clear(col)
	b.cols = col
}

package ops

import "fmt"

// Batched convolutions: the same (transposed) convolution applied to the
// inputs of several independent streams in one pass. When the streams give
// few output steps each (the deep layers of a codec give one or two per
// frame), their windows are gathered into one contiguous block so that a
// register tile holds rows of several streams and each weight panel row is
// loaded once for all of them; the outputs are then copied back to each
// stream. Every output is still the kernels' one sequential chain of FMAs
// over the same window values (conv_kernels.go), so each stream's result is
// bit-identical to its own Forward, on every variant and thread count.

// ConvSeg is one stream's part of a batched convolution: as Forward's dst,
// src and T.
type ConvSeg struct {
	Dst, Src []float32
	T        int
}

// ConvBatchScratch is the per-caller state of ForwardBatch: the gathered
// windows and outputs (grown to the largest batch seen, then reused) and
// the pool job. It must not be shared between goroutines; the zero value
// is ready.
type ConvBatchScratch struct {
	sc       ConvScratch
	win, out []float32
	jobs     []convJob // the streams run one by one, as one pool job
	start    []int     // jobs[k]'s first unit among all
	perChunk int
	fn       func(i int)
}

// chunkFunc computes chunk i of the units of every job in sc.jobs.
func (sc *ConvBatchScratch) chunkFunc() func(int) {
	if sc.fn == nil {
		sc.fn = func(i int) {
			u0 := i * sc.perChunk
			u1 := min(u0+sc.perChunk, sc.start[len(sc.jobs)])
			for k := range sc.jobs {
				a, b := max(u0, sc.start[k]), min(u1, sc.start[k+1])
				if a < b {
					sc.jobs[k].units(a-sc.start[k], b-sc.start[k])
				}
			}
		}
	}
	return sc.fn
}

// ForwardBatch runs Forward for every segment, in one pass where that
// saves register tiles (see above), on engine e. sc may not be nil.
func (c *Conv1d) ForwardBatch(e *Engine, segs []ConvSeg, sc *ConvBatchScratch) {
	if c.Groups != 1 {
		for _, s := range segs {
			c.Forward(e, s.Dst, s.Src, s.T, &sc.sc)
		}
		return
	}
	for _, s := range segs {
		if s.T > 0 && (len(s.Src) < c.InRows(s.T)*c.In || len(s.Dst) < s.T*c.Out) {
			panic(fmt.Sprintf("ops: Conv1d.ForwardBatch: src %d / dst %d floats too short for %d steps (in %d, out %d, span %d)", len(s.Src), len(s.Dst), s.T, c.In, c.Out, c.Span()))
		}
	}
	c.pk.runBatch(e, segs, c.Stride*c.In, c.Dilation*c.In, sc)
}

// ForwardBatch runs Forward for every segment (src: Window()−1 history rows
// then T input steps), in one pass where that saves register tiles.
func (c *ConvTranspose1d) ForwardBatch(e *Engine, segs []ConvSeg, sc *ConvBatchScratch) {
	if c.Groups != 1 {
		for _, s := range segs {
			c.Forward(e, s.Dst, s.Src, s.T, &sc.sc)
		}
		return
	}
	for _, s := range segs {
		if s.T > 0 && (len(s.Src) < (c.window-1+s.T)*c.In || len(s.Dst) < s.T*c.Stride*c.Out) {
			panic(fmt.Sprintf("ops: ConvTranspose1d.ForwardBatch: src %d / dst %d floats too short for %d steps (in %d, out %d, window %d, stride %d)", len(s.Src), len(s.Dst), s.T, c.In, c.Out, c.window, c.Stride))
		}
	}
	c.pk.runBatch(e, segs, c.In, 0, sc)
}

// gatherTiles reports whether gathering the segments' windows saves at
// least a fifth of the register tiles of running them one by one.
func gatherTiles(segs []ConvSeg, tr int) bool {
	sep, n := 0, 0
	for _, s := range segs {
		if s.T > 0 {
			sep += (s.T + tr - 1) / tr
			n += s.T
		}
	}
	return n > 0 && 5*((n+tr-1)/tr) <= 4*sep
}

// runBatch runs the pack over every segment's windows (row t of segment s
// at s.Src[t·rowStep:], taps runs tapStep apart; output rows of p.out
// values), gathered into one product when gatherTiles says so.
func (p *convPack) runBatch(e *Engine, segs []ConvSeg, rowStep, tapStep int, sc *ConvBatchScratch) {
	if !gatherTiles(segs, tileRows(e.k.Load().id)) {
		p.runEach(e, segs, rowStep, tapStep, sc)
		return
	}
	L := p.taps * p.in
	N := 0
	for _, s := range segs {
		N += max(s.T, 0)
	}
	sc.win = grow32(sc.win, N*L)
	sc.out = grow32(sc.out, N*p.out)
	r := 0
	for _, s := range segs {
		for t := 0; t < s.T; t++ {
			w := sc.win[r*L : (r+1)*L]
			for k := 0; k < p.taps; k++ {
				at := t*rowStep + k*tapStep
				copy(w[k*p.in:(k+1)*p.in], s.Src[at:at+p.in])
			}
			r++
		}
	}
	p.run(e, sc.out, p.out, sc.win, N, L, p.in, &sc.sc)
	r = 0
	for _, s := range segs {
		if s.T > 0 {
			copy(s.Dst[:s.T*p.out], sc.out[r*p.out:])
			r += s.T
		}
	}
}

// runEach runs every segment in place, their work units split between
// the threads as one pool job (one wake-up per layer, not one per stream).
func (p *convPack) runEach(e *Engine, segs []ConvSeg, rowStep, tapStep int, sc *ConvBatchScratch) {
	sc.jobs, sc.start = sc.jobs[:0], append(sc.start[:0], 0)
	work := 0
	for _, s := range segs {
		if s.T <= 0 {
			continue
		}
		j := p.job(e, s.Dst, p.out, s.Src, s.T, rowStep, tapStep)
		sc.jobs = append(sc.jobs, j)
		sc.start = append(sc.start, sc.start[len(sc.start)-1]+p.panels*j.nb)
		work += s.T * p.panels * panelCols * p.taps * p.in
	}
	units := sc.start[len(sc.jobs)]
	n := min(units, convChunksPerThread*e.Threads())
	if n < 2 || work < convParallelMin {
		for k := range sc.jobs {
			sc.jobs[k].units(0, sc.start[k+1]-sc.start[k])
		}
	} else {
		sc.perChunk = (units + n - 1) / n
		e.Parallel((units+sc.perChunk-1)/sc.perChunk, sc.chunkFunc())
	}
	clear(sc.jobs) // drop the references to the callers' buffers
	sc.jobs = sc.jobs[:0]
}

// grow32 returns b resized to n, reallocating (without keeping the
// contents) only when its capacity is too small.
func grow32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

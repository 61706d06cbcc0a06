package ops

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// Convolutions over time-major activations: a signal of T steps and C
// channels is a flat []float32 of T rows of C values (row t = time step t).
// Padding, streaming state and trimming are the caller's business; these
// kernels compute only the "valid" convolution (torch's padding=0).
//
// With one group, every output is one sequential chain of float32 FMAs over
// the kernel taps and input channels, plus the bias (conv_kernels.go): the
// same on every CPU, kernel variant and thread count. The input windows are
// read in place (no im2col copy; ForwardBatch, conv_batch.go, gathers
// the few windows of many streams) by register tiles over packed weight
// panels, split between threads by panels and blocks of output steps.
// Transposed convolutions are run as ordinary convolutions over windows of
// consecutive input steps (polyphase: input step t gives output steps
// t·Stride … t·Stride+Stride−1), which needs no overlap-add. The depthwise
// products are plain float32 operations (explicitly rounded, never fused).

// ConvScratch is the per-caller state of Forward: the description of the
// job the worker pool is running (one per streaming state: it must not be
// shared between goroutines). The zero value is ready.
type ConvScratch struct {
	job convJob
	fn  func(i int)
}

func (s *ConvScratch) chunkFunc() func(int) {
	if s.fn == nil {
		s.fn = func(i int) {
			j := &s.job
			u0 := i * j.perChunk
			j.units(u0, min(u0+j.perChunk, j.p.panels*j.nb))
		}
	}
	return s.fn
}

// Reserve prepares sc for calls of Forward (later calls then allocate
// nothing). T is the most output steps (unused: kept for callers sizing
// other buffers the same way).
func (c *Conv1d) Reserve(sc *ConvScratch, T int) { sc.chunkFunc() }

// Conv1d is a torch Conv1d (padding 0) with its kernel packed for
// time-major inputs. Groups is 1 or In == Out (depthwise).
type Conv1d struct {
	In, Out, Kernel, Stride, Dilation, Groups int
	Bias                                      []float32 // nil: no bias
	pk                                        convPack  // one group
	dw                                        []float32 // depthwise kernel [Out][Kernel]
}

// NewConv1d builds a convolution from torch weights [Out, In/groups, Kernel]
// (any float dtype) and an optional bias [Out], packing a large kernel on
// e's threads (nil: the caller's). Errors name the tensor.
func NewConv1d(e *Engine, w, bias *weights.Tensor, stride, dilation, groups int) (*Conv1d, error) {
	if len(w.Shape) != 3 {
		return nil, fmt.Errorf("tensor %q: shape %v is not a conv1d kernel [out, in/groups, kernel]", w.Name, w.Shape)
	}
	out, inG, k := w.Shape[0], w.Shape[1], w.Shape[2]
	c := &Conv1d{In: inG * groups, Out: out, Kernel: k, Stride: stride, Dilation: dilation, Groups: groups}
	switch {
	case k <= 0 || stride <= 0 || dilation <= 0 || inG <= 0 || out <= 0 || groups <= 0:
		return nil, fmt.Errorf("tensor %q: bad conv1d (shape %v, stride %d, dilation %d, groups %d)", w.Name, w.Shape, stride, dilation, groups)
	case groups != 1 && !(groups == c.In && groups == out):
		return nil, fmt.Errorf("tensor %q: conv1d with %d groups (in %d, out %d): only 1 group or depthwise is supported", w.Name, groups, c.In, out)
	}
	if bias != nil {
		if len(bias.Shape) != 1 || bias.Shape[0] != out {
			return nil, fmt.Errorf("tensor %q: shape %v, want [%d]", bias.Name, bias.Shape, out)
		}
		c.Bias = bias.Float32s()
	}
	if groups != 1 {
		c.dw = w.Float32s() // [Out][1][K] is already [Out][K]
		return c, nil
	}
	src := packSource(w)
	// Window j = tap·In + input channel. Undilated taps are consecutive
	// input rows: one run of Kernel·In values.
	taps, in := k, inG
	if dilation == 1 {
		taps, in = 1, k*inG
	}
	c.pk = newConvPack(e, out, taps, in, func(o int, dst []float32) {
		// dst[tap·inG + i] = w[o][i][tap]
		for i := range inG {
			ws := src[(o*inG+i)*k : (o*inG+i+1)*k]
			for tap, v := range ws {
				dst[tap*inG+i] = v
			}
		}
	}, c.biasAt)
	return c, nil
}

// packSource is w's elements for newConvPack to read once: a float32
// tensor is read in place (from its mapping), others are widened into a
// copy that the packing drops.
func packSource(w *weights.Tensor) []float32 {
	if w.DType == weights.F32 {
		return w.F32View()
	}
	return w.Float32s()
}

func (c *Conv1d) biasAt(o int) float32 {
	if c.Bias == nil {
		return 0
	}
	return c.Bias[o]
}

// Span is the receptive field of one output step, (Kernel−1)·Dilation+1.
func (c *Conv1d) Span() int { return (c.Kernel-1)*c.Dilation + 1 }

// InRows is the number of input rows that T output steps read.
func (c *Conv1d) InRows(T int) int {
	if T <= 0 {
		return 0
	}
	return (T-1)*c.Stride + c.Span()
}

// Forward writes T output rows [T][Out] into dst from src, which holds at
// least InRows(T) rows of In values, on engine e's kernels and workers. sc
// may be nil (the product then runs on the calling goroutine only).
func (c *Conv1d) Forward(e *Engine, dst, src []float32, T int, sc *ConvScratch) {
	if T <= 0 {
		return
	}
	if len(src) < c.InRows(T)*c.In || len(dst) < T*c.Out {
		panic(fmt.Sprintf("ops: Conv1d.Forward: src %d / dst %d floats too short for %d steps (in %d, out %d, span %d)", len(src), len(dst), T, c.In, c.Out, c.Span()))
	}
	In, Out := c.In, c.Out
	if c.Groups == 1 {
		c.pk.run(e, dst, Out, src, T, c.Stride*In, c.Dilation*In, sc)
		return
	}
	K := c.Kernel
	for t := 0; t < T; t++ {
		d := dst[t*Out : (t+1)*Out]
		for ch := range d {
			w := c.dw[ch*K : (ch+1)*K]
			var s float32
			for k, wk := range w {
				s += float32(wk * src[(t*c.Stride+k*c.Dilation)*In+ch]) // no FMA fusion
			}
			if c.Bias != nil {
				s += c.Bias[ch]
			}
			d[ch] = s
		}
	}
}

// ConvTranspose1d is a torch ConvTranspose1d (padding 0, dilation 1) run
// as a convolution over windows of Window() consecutive input steps, each
// giving Stride output steps. Groups is 1 or In == Out (depthwise).
type ConvTranspose1d struct {
	In, Out, Kernel, Stride, Groups int
	Bias                            []float32 // nil: no bias
	pk                              convPack  // one group: Stride·Out outputs per window
	dw                              []float32 // depthwise kernel [In][Kernel]
	window                          int
}

// NewConvTranspose1d builds a transposed convolution from torch weights
// [In, Out/groups, Kernel] and an optional bias [Out], packing a large
// kernel on e's threads (nil: the caller's).
func NewConvTranspose1d(e *Engine, w, bias *weights.Tensor, stride, groups int) (*ConvTranspose1d, error) {
	if len(w.Shape) != 3 {
		return nil, fmt.Errorf("tensor %q: shape %v is not a conv_transpose1d kernel [in, out/groups, kernel]", w.Name, w.Shape)
	}
	in, outG, k := w.Shape[0], w.Shape[1], w.Shape[2]
	c := &ConvTranspose1d{In: in, Out: outG * groups, Kernel: k, Stride: stride, Groups: groups}
	switch {
	case k <= 0 || stride <= 0 || in <= 0 || outG <= 0 || groups <= 0:
		return nil, fmt.Errorf("tensor %q: bad conv_transpose1d (shape %v, stride %d, groups %d)", w.Name, w.Shape, stride, groups)
	case groups != 1 && !(groups == in && groups == c.Out):
		return nil, fmt.Errorf("tensor %q: conv_transpose1d with %d groups (in %d, out %d): only 1 group or depthwise is supported", w.Name, groups, in, c.Out)
	}
	if bias != nil {
		if len(bias.Shape) != 1 || bias.Shape[0] != c.Out {
			return nil, fmt.Errorf("tensor %q: shape %v, want [%d]", bias.Name, bias.Shape, c.Out)
		}
		c.Bias = bias.Float32s()
	}
	c.window = (k + stride - 1) / stride
	if groups != 1 {
		c.dw = w.Float32s() // [In][1][K] is already [In][K]
		return c, nil
	}
	src := packSource(w)
	// Output p·Out+o of window t is output step t·Stride+p, channel o; window
	// element r·In+i is input step t−(window−1)+r, channel i, which reaches
	// that output through tap p+(window−1−r)·Stride (none past the kernel).
	m, out := c.window, c.Out
	c.pk = newConvPack(e, stride*out, 1, m*in, func(po int, dst []float32) {
		// dst[r·In + i] = w[i][o][tap] with tap = p + (window−1−r)·Stride.
		p, o := po/out, po%out
		for r := range m {
			row := dst[r*in : (r+1)*in]
			tap := p + (m-1-r)*stride
			if tap >= k {
				clear(row)
				continue
			}
			for i := range row {
				row[i] = src[(i*outG+o)*k+tap]
			}
		}
	}, func(po int) float32 {
		if c.Bias == nil {
			return 0
		}
		return c.Bias[po%out]
	})
	return c, nil
}

// Window is the number of consecutive input steps one output step depends
// on, ⌈Kernel/Stride⌉. Forward's input starts with Window()−1 rows of
// history: the steps before the first one (zeros at the start of a stream).
func (c *ConvTranspose1d) Window() int { return c.window }

// Reserve prepares sc for calls of Forward.
func (c *ConvTranspose1d) Reserve(sc *ConvScratch, T int) { sc.chunkFunc() }

// Forward writes the T·Stride output steps [T·Stride][Out] (bias included)
// that input steps 0…T−1 complete into dst. src holds Window()−1+T rows of
// In values: the history, then the T input steps. Output step s receives
// the contributions of every input step t with 0 ≤ s−t·Stride < Kernel:
// the full transposed convolution of the history and the new steps, from
// the first new step's first output on, on engine e. sc may be nil.
func (c *ConvTranspose1d) Forward(e *Engine, dst, src []float32, T int, sc *ConvScratch) {
	if T <= 0 {
		return
	}
	In, Out, S, m := c.In, c.Out, c.Stride, c.window
	if len(src) < (m-1+T)*In || len(dst) < T*S*Out {
		panic(fmt.Sprintf("ops: ConvTranspose1d.Forward: src %d / dst %d floats too short for %d steps (in %d, out %d, window %d, stride %d)", len(src), len(dst), T, In, Out, m, S))
	}
	if c.Groups == 1 {
		c.pk.run(e, dst, S*Out, src, T, In, 0, sc)
		return
	}
	K := c.Kernel
	for t := 0; t < T; t++ {
		for p := 0; p < S; p++ {
			d := dst[(t*S+p)*Out : (t*S+p+1)*Out]
			for ch := range d {
				var s float32
				for r := 0; r < m; r++ {
					if tap := p + (m-1-r)*S; tap < K {
						s += float32(src[(t+r)*In+ch] * c.dw[ch*K+tap]) // no FMA fusion
					}
				}
				if c.Bias != nil {
					s += c.Bias[ch]
				}
				d[ch] = s
			}
		}
	}
}

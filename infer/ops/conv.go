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
// The products go through Mat.MatMul, so every output value follows the
// package's fixed 16-lane dot-product order (independent of CPU, kernel
// variant and thread count); the bias, the overlap-add of transposed
// convolutions and the depthwise products are plain float32 operations
// (explicitly rounded, never fused).

// ConvScratch holds the reusable buffers of one caller of Forward /
// Accumulate (one per streaming state: it must not be shared between
// goroutines). The zero value is ready; it grows on demand and never shrinks.
type ConvScratch struct {
	xs, ys [][]float32
	buf    []float32
}

func (s *ConvScratch) rows(T int) (xs, ys [][]float32) {
	if cap(s.xs) < T {
		s.xs = make([][]float32, T)
		s.ys = make([][]float32, T)
	}
	return s.xs[:T], s.ys[:T]
}

func (s *ConvScratch) floats(n int) []float32 {
	if cap(s.buf) < n {
		s.buf = make([]float32, n)
	}
	return s.buf[:n]
}

// Reserve sizes sc for calls of Forward with up to T output steps (later
// calls then allocate nothing).
func (c *Conv1d) Reserve(sc *ConvScratch, T int) {
	if c.Groups != 1 || T <= 0 {
		return
	}
	sc.rows(T)
	if c.pad {
		sc.floats(T * c.W.Cols)
	}
}

// Conv1d is a torch Conv1d (padding 0) with its kernel rearranged for
// time-major inputs. Groups is 1 or In == Out (depthwise).
type Conv1d struct {
	In, Out, Kernel, Stride, Dilation, Groups int
	// W is [Out][Kernel·In] (tap-major) for 1 group, zero-padded to
	// convMinCols columns when shorter (the input windows are then copied
	// and padded too, so that the vector kernels do all the work);
	// [Out][Kernel] when depthwise.
	W    Mat
	Bias []float32 // nil: no bias
	pad  bool      // W's rows are zero-padded / windows must be gathered
	dw   []float32 // depthwise kernel [Out][Kernel]
}

// convMinCols is the shortest weight row handed to MatMul: the vector
// kernels work on blocks of 16 columns and shorter rows would run entirely
// in the scalar tail.
const convMinCols = 16

// NewConv1d builds a convolution from torch weights [Out, In/groups, Kernel]
// (any float dtype) and an optional bias [Out]. Errors name the tensor.
func NewConv1d(w, bias *weights.Tensor, stride, dilation, groups int) (*Conv1d, error) {
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
	src := w.Float32s()
	if groups != 1 {
		c.dw = src // [Out][1][K] is already [Out][K]
		c.W = MatFromF32(out, k, src)
	} else {
		L := k * inG
		cols := max(L, convMinCols)
		c.pad = cols != L || dilation != 1
		data := make([]float32, out*cols)
		for o := 0; o < out; o++ {
			for i := 0; i < inG; i++ {
				for j := 0; j < k; j++ {
					data[o*cols+j*inG+i] = src[(o*inG+i)*k+j]
				}
			}
		}
		c.W = MatFromF32(out, cols, data)
	}
	if bias != nil {
		if len(bias.Shape) != 1 || bias.Shape[0] != out {
			return nil, fmt.Errorf("tensor %q: shape %v, want [%d]", bias.Name, bias.Shape, out)
		}
		c.Bias = bias.Float32s()
	}
	return c, nil
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
// least InRows(T) rows of In values. sc may be nil (buffers are then
// allocated for this call).
func (c *Conv1d) Forward(dst, src []float32, T int, sc *ConvScratch) {
	if T <= 0 {
		return
	}
	if len(src) < c.InRows(T)*c.In || len(dst) < T*c.Out {
		panic(fmt.Sprintf("ops: Conv1d.Forward: src %d / dst %d floats too short for %d steps (in %d, out %d, span %d)", len(src), len(dst), T, c.In, c.Out, c.Span()))
	}
	In, Out := c.In, c.Out
	if c.Groups != 1 {
		K := c.Kernel
		for t := 0; t < T; t++ {
			d := dst[t*Out : (t+1)*Out]
			for ch := range d {
				w := c.dw[ch*K : (ch+1)*K]
				var s float32
				for k, wk := range w {
					s += float32(wk * src[(t*c.Stride+k*c.Dilation)*In+ch]) // no FMA fusion
				}
				d[ch] = s
			}
		}
	} else {
		if sc == nil {
			sc = new(ConvScratch)
		}
		xs, ys := sc.rows(T)
		L := c.Kernel * In
		rowStep := c.Stride * In
		if c.pad {
			// Gather each output step's taps into a zero-padded row.
			cols := c.W.Cols
			buf := sc.floats(T * cols)
			for t := 0; t < T; t++ {
				row := buf[t*cols : (t+1)*cols]
				for k := 0; k < c.Kernel; k++ {
					p := t*rowStep + k*c.Dilation*In
					copy(row[k*In:(k+1)*In], src[p:p+In])
				}
				clear(row[L:])
				xs[t] = row
			}
		} else {
			// The taps of an output step are contiguous input rows.
			for t := range xs {
				xs[t] = src[t*rowStep : t*rowStep+L]
			}
		}
		for t := range ys {
			ys[t] = dst[t*Out : (t+1)*Out]
		}
		c.W.MatMul(ys, xs)
		clear(xs) // drop the references to the caller's buffers
		clear(ys)
	}
	if c.Bias != nil {
		for t := 0; t < T; t++ {
			Add(dst[t*Out:(t+1)*Out], c.Bias)
		}
	}
}

// ConvTranspose1d is a torch ConvTranspose1d (padding 0, dilation 1) with its
// kernel rearranged for time-major inputs. Groups is 1 or In == Out
// (depthwise).
type ConvTranspose1d struct {
	In, Out, Kernel, Stride, Groups int
	// W is [Kernel·Out][In] for 1 group (row k·Out+o: output channel o at
	// tap k), [In][Kernel] when depthwise.
	W    Mat
	Bias []float32 // nil: no bias; Accumulate does not apply it
	dw   []float32 // depthwise kernel [In][Kernel]
}

// NewConvTranspose1d builds a transposed convolution from torch weights
// [In, Out/groups, Kernel] and an optional bias [Out].
func NewConvTranspose1d(w, bias *weights.Tensor, stride, groups int) (*ConvTranspose1d, error) {
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
	src := w.Float32s()
	if groups == 1 {
		data := make([]float32, len(src))
		for i := 0; i < in; i++ {
			for o := 0; o < outG; o++ {
				for j := 0; j < k; j++ {
					data[(j*outG+o)*in+i] = src[(i*outG+o)*k+j]
				}
			}
		}
		c.W = MatFromF32(k*outG, in, data)
	} else {
		c.dw = src // [In][1][K] is already [In][K]
		c.W = MatFromF32(in, k, src)
	}
	if bias != nil {
		if len(bias.Shape) != 1 || bias.Shape[0] != c.Out {
			return nil, fmt.Errorf("tensor %q: shape %v, want [%d]", bias.Name, bias.Shape, c.Out)
		}
		c.Bias = bias.Float32s()
	}
	return c, nil
}

// Reserve sizes sc for calls of Accumulate with up to T input steps.
func (c *ConvTranspose1d) Reserve(sc *ConvScratch, T int) {
	if c.Groups != 1 || T <= 0 {
		return
	}
	sc.rows(T)
	sc.floats(T * c.Kernel * c.Out)
}

// OutRows is the full output length of T input steps, (T−1)·Stride+Kernel.
func (c *ConvTranspose1d) OutRows(T int) int {
	if T <= 0 {
		return 0
	}
	return (T-1)*c.Stride + c.Kernel
}

// Accumulate adds the transposed convolution (without bias) of the T input
// rows src [T][In] into dst [OutRows(T)][Out], input step by input step.
// sc may be nil.
func (c *ConvTranspose1d) Accumulate(dst, src []float32, T int, sc *ConvScratch) {
	if T <= 0 {
		return
	}
	if len(src) < T*c.In || len(dst) < c.OutRows(T)*c.Out {
		panic(fmt.Sprintf("ops: ConvTranspose1d.Accumulate: src %d / dst %d floats too short for %d steps (in %d, out %d, kernel %d)", len(src), len(dst), T, c.In, c.Out, c.Kernel))
	}
	In, Out, K, S := c.In, c.Out, c.Kernel, c.Stride
	if c.Groups != 1 {
		for t := 0; t < T; t++ {
			x := src[t*In : (t+1)*In]
			for k := 0; k < K; k++ {
				d := dst[(t*S+k)*Out : (t*S+k+1)*Out]
				for ch, v := range x {
					d[ch] += float32(v * c.dw[ch*K+k]) // no FMA fusion
				}
			}
		}
		return
	}
	if sc == nil {
		sc = new(ConvScratch)
	}
	rows := K * Out
	xs, ys := sc.rows(T)
	buf := sc.floats(T * rows)
	for t := range xs {
		xs[t] = src[t*In : (t+1)*In]
		ys[t] = buf[t*rows : (t+1)*rows]
	}
	c.W.MatMul(ys, xs)
	for t, y := range ys {
		for k := 0; k < K; k++ {
			p := (t*S + k) * Out
			Add(dst[p:p+Out], y[k*Out:(k+1)*Out])
		}
	}
	clear(xs)
	clear(ys)
}

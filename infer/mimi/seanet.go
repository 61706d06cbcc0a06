package mimi

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Activations are time-major everywhere in this package: a signal of T steps
// and C channels is a flat []float32 of T rows of C values.

// convDesc names one (transposed) convolution of the model and its shape.
type convDesc struct {
	prefix          string // tensors prefix+".weight", prefix+".bias"
	in, out, kernel int
	stride, dil     int
	groups          int
	transposed      bool
	bias            bool
	replicate       bool // pad_mode "replicate" (else zeros)
}

// weightShape is the torch shape of the kernel.
func (d convDesc) weightShape() []int {
	if d.transposed {
		return []int{d.in, d.out / d.groups, d.kernel}
	}
	return []int{d.out, d.in / d.groups, d.kernel}
}

type stepKind int

const (
	stepConv stepKind = iota
	stepConvTr
	stepELU
	stepRes
)

// stepDesc is one module of SEANet's nn.Sequential.
type stepDesc struct {
	kind     stepKind
	conv     convDesc   // stepConv, stepConvTr
	block    []convDesc // stepRes: the residual branch's convs (each after an ELU)
	shortcut *convDesc  // stepRes without true_skip
}

func checkSeanet(c *config.Seanet) error {
	switch {
	case !c.Causal:
		return fmt.Errorf("seanet: only causal (streaming) models are supported")
	case c.Activation != "ELU":
		return fmt.Errorf("seanet: activation %q is not supported (ELU only)", c.Activation)
	case c.Norm != "none":
		return fmt.Errorf("seanet: norm %q is not supported (\"none\": weights already folded)", c.Norm)
	case c.PadMode != "constant" && c.PadMode != "replicate":
		return fmt.Errorf("seanet: pad_mode %q is not supported (constant, replicate)", c.PadMode)
	case c.LSTM != 0:
		return fmt.Errorf("seanet: LSTM layers are not supported")
	case c.Channels != 1:
		return fmt.Errorf("seanet: %d audio channels: only mono is supported", c.Channels)
	case c.NFilters <= 0 || c.Dimension <= 0 || c.Compress <= 0 || c.KernelSize <= 0 || c.LastKernelSize <= 0 || c.ResidualKernelSize <= 0 || c.NResidualLayers < 0:
		return fmt.Errorf("seanet: sizes must be positive")
	}
	for _, r := range c.Ratios {
		if r <= 0 {
			return fmt.Errorf("seanet: ratios must be positive")
		}
	}
	return nil
}

// seanetPlan lists SEANetEncoder/SEANetDecoder's modules with the names their
// weights have under "encoder.model" / "decoder.model".
func seanetPlan(c *config.Seanet, encoder bool) []stepDesc {
	var steps []stepDesc
	prefix := "decoder.model"
	if encoder {
		prefix = "encoder.model"
	}
	repl := c.PadMode == "replicate"
	conv := func(in, out, k, stride, dil int) convDesc {
		return convDesc{prefix: fmt.Sprintf("%s.%d.conv.conv", prefix, len(steps)), in: in, out: out, kernel: k,
			stride: stride, dil: dil, groups: 1, bias: true, replicate: repl}
	}
	res := func(dim int) {
		for j := 0; j < c.NResidualLayers; j++ {
			hidden := dim / c.Compress
			dil := 1
			for range j {
				dil *= c.DilationBase
			}
			p := fmt.Sprintf("%s.%d", prefix, len(steps))
			kernels := []int{c.ResidualKernelSize, 1}
			dils := []int{dil, 1}
			s := stepDesc{kind: stepRes}
			for i := range kernels {
				in, out := hidden, hidden
				if i == 0 {
					in = dim
				}
				if i == len(kernels)-1 {
					out = dim
				}
				s.block = append(s.block, convDesc{prefix: fmt.Sprintf("%s.block.%d.conv.conv", p, 2*i+1), in: in, out: out,
					kernel: kernels[i], stride: 1, dil: dils[i], groups: 1, bias: true, replicate: repl})
			}
			if !c.TrueSkip {
				s.shortcut = &convDesc{prefix: p + ".shortcut.conv.conv", in: dim, out: dim, kernel: 1, stride: 1, dil: 1,
					groups: 1, bias: true, replicate: repl}
			}
			steps = append(steps, s)
		}
	}
	elu := func() { steps = append(steps, stepDesc{kind: stepELU}) }
	nf := c.NFilters
	if encoder {
		mult := 1
		steps = append(steps, stepDesc{kind: stepConv, conv: conv(c.Channels, nf, c.KernelSize, 1, 1)})
		for i := len(c.Ratios) - 1; i >= 0; i-- {
			r := c.Ratios[i]
			res(mult * nf)
			elu()
			steps = append(steps, stepDesc{kind: stepConv, conv: conv(mult*nf, 2*mult*nf, 2*r, r, 1)})
			mult *= 2
		}
		elu()
		steps = append(steps, stepDesc{kind: stepConv, conv: conv(mult*nf, c.Dimension, c.LastKernelSize, 1, 1)})
		return steps
	}
	mult := 1 << len(c.Ratios)
	steps = append(steps, stepDesc{kind: stepConv, conv: conv(c.Dimension, mult*nf, c.KernelSize, 1, 1)})
	for _, r := range c.Ratios {
		elu()
		d := convDesc{prefix: fmt.Sprintf("%s.%d.convtr.convtr", prefix, len(steps)), in: mult * nf, out: mult * nf / 2,
			kernel: 2 * r, stride: r, dil: 1, groups: 1, transposed: true, bias: true}
		steps = append(steps, stepDesc{kind: stepConvTr, conv: d})
		res(mult * nf / 2)
		mult /= 2
	}
	elu()
	steps = append(steps, stepDesc{kind: stepConv, conv: conv(nf, c.Channels, c.LastKernelSize, 1, 1)})
	return steps
}

// layer is the weights of one streaming module; stage is its state.
// layer makes the streaming stage of one SEANet layer, run on CPU engine e.
type layer interface{ newStage(e *ops.Engine) stage }

type stage interface {
	// forward consumes T input rows and returns the output rows it can
	// produce now. The result is owned by the stage and valid until its
	// next forward; x is not modified unless the stage says so.
	forward(x []float32, T int) ([]float32, int)
	reset()
}

func loadConv(f *weights.File, d convDesc, e *ops.Engine) (layer, error) {
	w, err := f.Get(d.prefix+".weight", d.weightShape()...)
	if err != nil {
		return nil, err
	}
	var b *weights.Tensor
	if d.bias {
		if b, err = f.Get(d.prefix+".bias", d.out); err != nil {
			return nil, err
		}
	}
	if d.transposed {
		c, err := ops.NewConvTranspose1d(e, w, b, d.stride, d.groups)
		if err != nil {
			return nil, err
		}
		return &convTrLayer{c: c}, nil
	}
	c, err := ops.NewConv1d(e, w, b, d.stride, d.dil, d.groups)
	if err != nil {
		return nil, err
	}
	return &convLayer{c: c, pad: c.Span() - c.Stride, replicate: d.replicate}, nil
}

func loadSteps(f *weights.File, plan []stepDesc, e *ops.Engine) ([]layer, error) {
	var out []layer
	elu := false // an ELU precedes the next module
	for _, s := range plan {
		if elu && s.kind != stepConv && s.kind != stepConvTr {
			out = append(out, eluLayer{})
			elu = false
		}
		switch s.kind {
		case stepConv, stepConvTr:
			l, err := loadConv(f, s.conv, e)
			if err != nil {
				return nil, err
			}
			// The ELU before a convolution is applied as its input is
			// copied into the stage's buffer.
			switch l := l.(type) {
			case *convLayer:
				l.elu = elu
			case *convTrLayer:
				l.elu = elu
			}
			elu = false
			out = append(out, l)
		case stepELU:
			elu = true
		case stepRes:
			r := &resLayer{}
			for _, d := range s.block {
				l, err := loadConv(f, d, e)
				if err != nil {
					return nil, err
				}
				c := l.(*convLayer)
				c.elu = true // each branch conv follows an ELU
				r.block = append(r.block, c)
			}
			if s.shortcut != nil {
				l, err := loadConv(f, *s.shortcut, e)
				if err != nil {
					return nil, err
				}
				r.shortcut = l.(*convLayer)
			}
			out = append(out, r)
		}
	}
	if elu {
		out = append(out, eluLayer{})
	}
	return out, nil
}

// grow returns b resized to n, reallocating (without keeping the contents)
// only when its capacity is too small.
func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// convLayer is StreamingConv1d: a causal convolution whose streaming state
// keeps the input rows not consumed yet (RawStreamingConv1d.previous) and
// pads the first input after a reset with Span−Stride rows on the left
// (zeros, or copies of the first row for pad_mode "replicate"). With elu
// set, the ELU before it is applied to its input as it enters the buffer.
type convLayer struct {
	c         *ops.Conv1d
	pad       int
	replicate bool
	elu       bool
}

type convStage struct {
	l     *convLayer
	e     *ops.Engine
	buf   []float32 // held rows then new rows, [rows][In]
	held  int
	first bool // the left padding is still to add
	out   []float32
	sc    ops.ConvScratch
}

func (l *convLayer) newStage(e *ops.Engine) stage { return l.newConvStage(e) }

func (l *convLayer) newConvStage(e *ops.Engine) *convStage {
	return &convStage{l: l, e: e, first: true}
}

func (s *convStage) reset() {
	s.held = 0
	s.first = true
}

// input copies x (through the ELU when the layer has one) into dst.
func input(e *ops.Engine, dst, x []float32, elu bool) {
	if elu {
		e.ELUTo(dst, x)
	} else {
		copy(dst, x)
	}
}

func (s *convStage) forward(x []float32, T int) ([]float32, int) {
	buf, n := s.load(x, T)
	c := s.l.c
	s.out = grow(s.out, n*c.Out)
	c.Forward(s.e, s.out, buf, n, &s.sc)
	s.advance(n)
	return s.out, n
}

// load brings T input rows into the buffer (after the left padding of the
// first input) and returns the buffer and the number of output rows the
// convolution can give now; advance(n) must follow once they are computed.
func (s *convStage) load(x []float32, T int) ([]float32, int) {
	c := s.l.c
	in := c.In
	pad := 0
	if s.first && T > 0 {
		pad = s.l.pad
		s.first = false
	}
	rows := s.held + pad + T
	if cap(s.buf) < rows*in {
		nb := make([]float32, rows*in)
		copy(nb, s.buf[:s.held*in])
		s.buf = nb
	}
	buf := s.buf[:rows*in]
	p := (s.held + pad) * in
	input(s.e, buf[p:p+T*in], x[:T*in], s.l.elu)
	if pad > 0 {
		seg := buf[s.held*in : p]
		if s.l.replicate {
			for r := 0; r < pad; r++ {
				copy(seg[r*in:(r+1)*in], buf[p:p+in])
			}
		} else {
			clear(seg)
		}
	}
	s.held = rows // until advance
	n := 0
	if span := c.Span(); rows >= span {
		n = (rows-span)/c.Stride + 1
	}
	return buf, n
}

// advance drops the input rows that n outputs have consumed for good.
func (s *convStage) advance(n int) {
	c := s.l.c
	off := n * c.Stride
	rows := s.held
	s.held = rows - off
	copy(s.buf[:rows*c.In], s.buf[off*c.In:rows*c.In])
}

// convTrLayer is StreamingConvTranspose1d. Run as a convolution over
// windows of consecutive inputs (ops.ConvTranspose1d), its streaming state
// is the last Window()−1 input rows (zeros after a reset), which is the
// reference's partial output (the last Kernel−Stride rows of each chunk's
// transposed convolution, added to the next chunk's first rows) expressed
// through the inputs that make it. With elu set, the ELU before it is
// applied to its input as it enters the buffer.
type convTrLayer struct {
	c   *ops.ConvTranspose1d
	elu bool
}

type convTrStage struct {
	l   *convTrLayer
	e   *ops.Engine
	buf []float32 // Window()−1 history rows then the new rows, [rows][In]
	out []float32 // [T·Stride][Out]
	sc  ops.ConvScratch
}

func (l *convTrLayer) newStage(e *ops.Engine) stage { return l.newConvTrStage(e) }

func (l *convTrLayer) newConvTrStage(e *ops.Engine) *convTrStage {
	c := l.c
	return &convTrStage{l: l, e: e, buf: make([]float32, (c.Window()-1)*c.In)}
}

func (s *convTrStage) reset() { clear(s.buf[:(s.l.c.Window()-1)*s.l.c.In]) }

func (s *convTrStage) forward(x []float32, T int) ([]float32, int) {
	if T == 0 {
		return s.out[:0], 0
	}
	buf := s.load(x, T)
	c := s.l.c
	ready := T * c.Stride
	s.out = grow(s.out, ready*c.Out)
	c.Forward(s.e, s.out, buf, T, &s.sc)
	s.advance(T)
	return s.out, ready
}

// load appends T > 0 input rows to the history and returns the buffer;
// advance(T) must follow once the outputs are computed.
func (s *convTrStage) load(x []float32, T int) []float32 {
	c := s.l.c
	in, h := c.In, c.Window()-1
	rows := h + T
	if cap(s.buf) < rows*in {
		nb := make([]float32, rows*in)
		copy(nb, s.buf[:h*in])
		s.buf = nb
	}
	buf := s.buf[:rows*in]
	input(s.e, buf[h*in:], x[:T*in], s.l.elu)
	return buf
}

// advance keeps the last Window()−1 of the h+T rows as the history.
func (s *convTrStage) advance(T int) {
	c := s.l.c
	in, h := c.In, c.Window()-1
	copy(s.buf[:h*in], s.buf[T*in:(h+T)*in])
}

// eluLayer is nn.ELU(alpha=1) on its own (SEANet always has a convolution
// after it, which applies it instead), in place on its input (the previous
// stage's output, never needed again).
type eluLayer struct{}

func (eluLayer) newStage(e *ops.Engine) stage { return eluStage{e} }

type eluStage struct{ e *ops.Engine }

func (eluStage) reset() {}

func (s eluStage) forward(x []float32, T int) ([]float32, int) {
	s.e.ELUTo(x, x)
	return x, T
}

// resLayer is SEANetResnetBlock: x + convs(ELU(…)) with an identity (true
// skip) or 1×1 convolution shortcut. Its causal stride-1 convolutions give
// as many rows as they get, so StreamingAdd never has to buffer. The
// branch's ELUs are applied by its convolutions (elu set), so x itself is
// left as it is for the skip.
type resLayer struct {
	block    []*convLayer
	shortcut *convLayer
}

type resStage struct {
	l        *resLayer
	e        *ops.Engine
	block    []*convStage
	shortcut *convStage
}

func (l *resLayer) newStage(e *ops.Engine) stage {
	s := &resStage{l: l, e: e}
	for _, c := range l.block {
		s.block = append(s.block, c.newConvStage(e))
	}
	if l.shortcut != nil {
		s.shortcut = l.shortcut.newConvStage(e)
	}
	return s
}

func (s *resStage) reset() {
	for _, b := range s.block {
		b.reset()
	}
	if s.shortcut != nil {
		s.shortcut.reset()
	}
}

func (s *resStage) forward(x []float32, T int) ([]float32, int) {
	y, n := x, T
	for _, b := range s.block {
		y, n = b.forward(y, n)
	}
	skip := x
	if s.shortcut != nil {
		var ns int
		skip, ns = s.shortcut.forward(x, T)
		if ns != n {
			panic(fmt.Sprintf("mimi: residual block: shortcut gave %d rows, branch %d", ns, n))
		}
	}
	if n != T && s.shortcut == nil {
		panic(fmt.Sprintf("mimi: residual block: branch gave %d rows for %d inputs", n, T))
	}
	s.e.Add(y, skip[:len(y)])
	return y, n
}

// prealloc sizes a stage's buffers for inputs of T rows (any later call
// with as many rows allocates nothing) and returns its most output rows.
func prealloc(s stage, T int) int {
	if T <= 0 {
		return 0
	}
	switch s := s.(type) {
	case *convStage:
		c := s.l.c
		s.buf = make([]float32, (T+c.Span())*c.In)
		n := (T-1)/c.Stride + 1
		s.out = make([]float32, n*c.Out)
		c.Reserve(&s.sc, n)
		return n
	case *convTrStage:
		c := s.l.c
		buf := make([]float32, (c.Window()-1+T)*c.In)
		copy(buf, s.buf)
		s.buf = buf
		s.out = make([]float32, T*c.Stride*c.Out)
		c.Reserve(&s.sc, T)
		return T * c.Stride
	case *resStage:
		n := T
		for _, b := range s.block {
			n = prealloc(b, n)
		}
		if s.shortcut != nil {
			prealloc(s.shortcut, T)
		}
		return n
	}
	return T
}

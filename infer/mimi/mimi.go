// Package mimi ports the Mimi neural audio codec (moshi/models/compression.py
// MimiModel as loaders.get_mimi builds it): a causal SEANet encoder, a
// streaming transformer, a stride-2 convolution from the 25 Hz encoder rate
// to the 12.5 Hz frame rate and a split residual vector quantizer on the
// encode side; codebook lookup, a depthwise transposed convolution back to
// 25 Hz, a transformer and the SEANet decoder on the decode side.
//
// Everything runs in streaming mode exactly as offline.py drives it: one
// frame (FrameSize() samples, 80 ms) per EncodeFrame call giving
// NumCodebooks codes, one frame of codes per DecodeFrame call giving
// FrameSize() samples. Encode and Decode take several frames of a stream
// at once with the bits of those calls frame by frame (every layer's
// streaming state advances alike, and the transformers attend a frame's
// positions together, as the reference's forward of one frame does), which
// reads the weights once for the frames. The streaming state lives in
// Encoder/Decoder values (one per stream), separate from the weights in
// Model, and Reset returns a state to the fresh one (reset_streaming).
package mimi

import (
	"errors"
	"fmt"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Model holds Mimi's weights. It is read-only once loaded: any number of
// encoders and decoders may use it, each from one goroutine at a time.
type Model struct {
	Cfg *config.Mimi

	file      *weights.File // owned when opened by Open
	enc, dec  []layer
	encTr     *projTransformer
	decTr     *projTransformer
	down      *convLayer   // nil when the encoder rate is the frame rate
	up        *convTrLayer // nil likewise
	q         *quantizer
	frameSize int
	resample  int             // SEANet steps per frame (the downsample stride)
	dim       int             // latent dimension (SEANet dimension)
	be        backend.Backend // runs the codec's transformers
	host      *ops.Engine     // runs the SEANet convolutions (CPU kernels)
}

// Open opens a Mimi safetensors checkpoint (memory-mapped; Close releases
// it) and loads it (see Load).
func Open(cfg *config.Mimi, path string, be backend.Backend, host *ops.Engine) (*Model, error) {
	f, err := weights.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(cfg, f, be, host)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// Load binds the tensors of an open file (which must stay open while the
// model is used) and checks every shape against cfg. The encoders, decoders
// and batches made from the model run its transformers on be and its SEANet
// convolutions on the CPU engine host (a CPU backend's own engine, or the
// CPU beside a device backend).
func Load(cfg *config.Mimi, f *weights.File, be backend.Backend, host *ops.Engine) (*Model, error) {
	if be == nil || host == nil {
		return nil, errors.New("mimi: Load needs a backend and a CPU engine")
	}
	g, err := geometry(cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: cfg, frameSize: g.frameSize, resample: g.resample, dim: cfg.Seanet.Dimension, be: be, host: host}
	if m.enc, err = loadSteps(f, seanetPlan(&cfg.Seanet, true), host); err != nil {
		return nil, err
	}
	if m.dec, err = loadSteps(f, seanetPlan(&cfg.Seanet, false), host); err != nil {
		return nil, err
	}
	if m.encTr, err = loadProjTransformer(f, "encoder_transformer", cfg); err != nil {
		return nil, err
	}
	if m.decTr, err = loadProjTransformer(f, "decoder_transformer", cfg); err != nil {
		return nil, err
	}
	if g.resample > 1 {
		l, err := loadConv(f, downsampleDesc(cfg, g.resample), host)
		if err != nil {
			return nil, err
		}
		m.down = l.(*convLayer)
		if l, err = loadConv(f, upsampleDesc(cfg, g.resample), host); err != nil {
			return nil, err
		}
		m.up = l.(*convTrLayer)
	}
	if m.q, err = loadQuantizer(f, cfg); err != nil {
		return nil, err
	}
	// NaN or Inf in a weight would decode to garbage with no error:
	// refused here, naming the tensor (a full scan of what the codec reads).
	specs, err := WeightSpecs(cfg)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sp := range specs {
		if f.Has(sp.Name) {
			names = append(names, sp.Name)
		}
	}
	if err := f.CheckFinite(names...); err != nil {
		return nil, err
	}
	return m, nil
}

// WithCompute is the model's weights run on another backend and CPU engine
// (a shallow copy: the weights are shared, the copy owns no file).
func (m *Model) WithCompute(be backend.Backend, host *ops.Engine) *Model {
	c := *m
	c.be, c.host, c.file = be, host, nil
	return &c
}

// Close releases the checkpoint mapping when the model was opened by Open.
func (m *Model) Close() error {
	if m.file == nil {
		return nil
	}
	err := m.file.Close()
	m.file = nil
	return err
}

// FrameSize is the number of samples per frame (1920).
func (m *Model) FrameSize() int { return m.frameSize }

// NumCodebooks is the number of codes per frame (8).
func (m *Model) NumCodebooks() int { return m.Cfg.NumCodebooks }

// Cardinality is the size of each codebook (2048): codes are in [0, Cardinality).
func (m *Model) Cardinality() int { return m.q.bins }

// Dimension is the latent dimension (SEANet dimension, 512 for the real Mimi).
func (m *Model) Dimension() int { return m.dim }

// CheckCodes reports whether codes is one valid frame of codes.
func (m *Model) CheckCodes(codes []int) error {
	if len(codes) != m.Cfg.NumCodebooks {
		return fmt.Errorf("mimi: %d codes in a frame, %d expected", len(codes), m.Cfg.NumCodebooks)
	}
	for i, c := range codes {
		if c < 0 || c >= m.q.bins {
			return fmt.Errorf("mimi: code %d of codebook %d is out of range [0, %d)", c, i, m.q.bins)
		}
	}
	return nil
}

type frameGeometry struct{ frameSize, hop, resample int }

func geometry(cfg *config.Mimi) (frameGeometry, error) {
	if err := checkSeanet(&cfg.Seanet); err != nil {
		return frameGeometry{}, err
	}
	if cfg.SampleRate <= 0 || cfg.FrameRate <= 0 {
		return frameGeometry{}, fmt.Errorf("mimi: sample_rate and frame_rate must be positive")
	}
	if cfg.NumCodebooks < 1 || cfg.NumCodebooks > cfg.Quantizer.NQ {
		return frameGeometry{}, fmt.Errorf("mimi: num_codebooks %d must be in 1..quantizer.n_q %d", cfg.NumCodebooks, cfg.Quantizer.NQ)
	}
	g := frameGeometry{frameSize: cfg.FrameSize(), hop: 1}
	for _, r := range cfg.Seanet.Ratios {
		g.hop *= r
	}
	if g.frameSize <= 0 || g.frameSize%g.hop != 0 {
		return g, fmt.Errorf("mimi: frame size %d (sample_rate/frame_rate) is not a multiple of the SEANet hop length %d", g.frameSize, g.hop)
	}
	g.resample = g.frameSize / g.hop
	d := cfg.Seanet.Dimension
	if in := quantInDim(&cfg.Quantizer); in != d {
		return g, fmt.Errorf("mimi: quantizer input_dimension %d differs from seanet dimension %d", in, d)
	}
	if out := quantOutDim(&cfg.Quantizer); out != d {
		return g, fmt.Errorf("mimi: quantizer output_dimension %d differs from seanet dimension %d", out, d)
	}
	return g, nil
}

func downsampleDesc(cfg *config.Mimi, stride int) convDesc {
	d := cfg.Seanet.Dimension
	return convDesc{prefix: "downsample.conv.conv.conv", in: d, out: d, kernel: 2 * stride, stride: stride, dil: 1,
		groups: 1, replicate: true}
}

func upsampleDesc(cfg *config.Mimi, stride int) convDesc {
	d := cfg.Seanet.Dimension
	return convDesc{prefix: "upsample.convtr.convtr.convtr", in: d, out: d, kernel: 2 * stride, stride: stride, dil: 1,
		groups: d, transposed: true}
}

// projTransformer is ProjectedTransformer: optional input projection, the
// streaming transformer, the first output projection (others are unused).
type projTransformer struct {
	tr              *nn.Transformer
	inProj, outProj *backend.Weight // nil: identity
	inDim, outDim   int
}

func transformerDims(cfg *config.Mimi) (in, dModel, out int) {
	t := &cfg.Transformer
	in, dModel, out = t.InputDimension, t.DModel, t.DModel
	if in == 0 {
		in = cfg.Seanet.Dimension
	}
	if len(t.OutputDimensions) > 0 {
		out = t.OutputDimensions[0]
	}
	return
}

func transformerConfig(cfg *config.Mimi) nn.TransformerConfig {
	t := &cfg.Transformer
	return nn.TransformerConfig{DModel: t.DModel, NumHeads: t.NumHeads, NumLayers: t.NumLayers,
		DimFeedforward: t.DimFeedforward, Context: t.Context, Norm: t.Norm, LayerScale: t.LayerScale != nil,
		Gating: t.Gating, PosEmb: t.PosEmb, MaxPeriod: t.MaxPeriod}
}

func loadProjTransformer(f *weights.File, prefix string, cfg *config.Mimi) (*projTransformer, error) {
	t := &cfg.Transformer
	if !t.Causal {
		return nil, fmt.Errorf("mimi: %s: only causal (streaming) transformers are supported", prefix)
	}
	in, dm, out := transformerDims(cfg)
	if d := cfg.Seanet.Dimension; in != d || out != d {
		return nil, fmt.Errorf("mimi: %s: input/output dimensions %d/%d differ from seanet dimension %d", prefix, in, out, d)
	}
	p := &projTransformer{inDim: in, outDim: out}
	var err error
	if p.tr, err = nn.LoadTransformer(f, prefix+".transformer", transformerConfig(cfg)); err != nil {
		return nil, err
	}
	inRefs, outRefs := p.projTensors(prefix, dm)
	if err := nn.BindTensors(append(inRefs, outRefs...), f.Get); err != nil {
		return nil, err
	}
	return p, nil
}

// projTensors declares the transformer's input and output projections
// (present when their dimension differs from the model's, dm).
func (p *projTransformer) projTensors(prefix string, dm int) (in, out []nn.TensorRef) {
	if p.inDim != dm {
		in = append(in, nn.Mat(&p.inProj, prefix+".input_proj.weight", dm, p.inDim))
	}
	if p.outDim != dm {
		out = append(out, nn.Mat(&p.outProj, prefix+".output_projs.0.weight", p.outDim, dm))
	}
	return in, out
}

// transformerTensors declares every tensor of one projTransformer, in
// checkpoint order: the input projection, the layers (nn's declaration)
// and the output projection. Loading and WeightSpecs read it.
func transformerTensors(cfg *config.Mimi, prefix string) ([]nn.TensorRef, error) {
	in, dm, out := transformerDims(cfg)
	t, err := nn.NewTransformer(transformerConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", prefix, err)
	}
	p := &projTransformer{inDim: in, outDim: out}
	refs, outRefs := p.projTensors(prefix, dm)
	for i := 0; i < cfg.Transformer.NumLayers; i++ {
		refs = append(refs, t.LayerTensors(&nn.Layer{}, prefix+".transformer", i, -1, 0)...)
	}
	return append(refs, outRefs...), nil
}

// trStage is the streaming state of a projTransformer for one stream: the
// transformer state and the host copy of its last output.
type trStage struct {
	st  *nn.TransformerState
	out []float32 // [T][outDim]
}

// newStage sizes the stream's KV rings at the full context at once (250
// positions: a few MiB a stream), so they are never grown, and copied, as
// the stream runs; outputs do not depend on it (nn.Transformer.Reserve).
func (p *projTransformer) newStage(be backend.Backend, T int) *trStage {
	st := p.tr.NewState(be)
	p.tr.Reserve(be, st, p.tr.MaxCapacity())
	return &trStage{st: st, out: make([]float32, T*p.outDim)}
}

func (s *trStage) reset() { s.st.Reset() }

// trRunner runs a projTransformer over a batch of streams on a backend:
// each stream's positions are one part of the pass, every weight read once
// for the batch, and attend a frame (group positions) at a time: the
// reference's forward of each frame's chunk.
type trRunner struct {
	p        *projTransformer
	be       backend.Backend
	sc       *nn.Scratch
	group    int // positions per frame
	in, x, y backend.Acts
	rows     int
	parts    []nn.Part
	blocks   [][]float32 // every stream's input, then output, rows
}

func (p *projTransformer) newRunner(be backend.Backend, group int) *trRunner {
	return &trRunner{p: p, be: be, sc: p.tr.NewScratch(be), group: group}
}

// forward runs xs[i] (ts[i] positions of stage i, time-major, whole
// frames) through the transformer; stage i's output is left in
// stages[i].out.
func (r *trRunner) forward(stages []*trStage, xs [][]float32, ts []int) {
	p, be := r.p, r.be
	n := 0
	for _, t := range ts[:len(stages)] {
		n += t
	}
	if n == 0 {
		return
	}
	if n > r.rows {
		r.rows = max(n, 2*r.rows)
		r.x = be.NewActs(r.rows, p.tr.Cfg.DModel)
		if p.inProj != nil {
			r.in = be.NewActs(r.rows, p.inDim)
		}
		if p.outProj != nil {
			r.y = be.NewActs(r.rows, p.outDim)
		}
	}
	x := r.x.Slice(0, n)
	in := x
	if p.inProj != nil {
		in = r.in.Slice(0, n)
	}
	// Every stream's rows in one upload and, below, one download (on a
	// GPU one copy each way per pass, not one per stream).
	r.parts, r.blocks = r.parts[:0], r.blocks[:0]
	for i, s := range stages {
		r.blocks = append(r.blocks, xs[i][:ts[i]*p.inDim])
		r.parts = append(r.parts, nn.Part{State: s.st, Rows: ts[i]})
	}
	backend.UploadRows(be, in, r.blocks)
	if p.inProj != nil {
		be.MatMul(x, r.in.Slice(0, n), p.inProj)
	}
	p.tr.Forward(r.sc, p.tr, x, r.parts, r.group)
	y := x
	if p.outProj != nil {
		y = r.y.Slice(0, n)
		be.MatMul(y, x, p.outProj)
	}
	r.blocks = r.blocks[:0]
	for i, s := range stages {
		s.out = grow(s.out, ts[i]*p.outDim)
		r.blocks = append(r.blocks, s.out)
	}
	backend.DownloadRows(be, r.blocks, y)
	clear(r.blocks)
}

// Encoder is the streaming state of Mimi's encode path (encoder, encoder
// transformer, downsample; the quantizer is stateless).
type Encoder struct {
	m      *Model
	steps  []stage
	tr     *trStage
	run    *trRunner // for Encode (a batch of one)
	down   *convStage
	qs     []*quantScratch // one a frame of a call
	quant  quantBatch
	codes  []int
	seanet []float32
	trOut  []float32
	latent []float32
}

// NewEncoder returns a fresh encoder state.
func (m *Model) NewEncoder() *Encoder {
	e := &Encoder{m: m, tr: m.encTr.newStage(m.be, m.resample), run: m.encTr.newRunner(m.be, m.resample),
		codes: make([]int, m.Cfg.NumCodebooks)}
	e.scratch(0)
	T := m.frameSize
	for _, l := range m.enc {
		s := l.newStage(m.host)
		T = prealloc(s, T)
		e.steps = append(e.steps, s)
	}
	if m.down != nil {
		e.down = m.down.newConvStage(m.host)
		prealloc(e.down, m.resample)
	}
	return e
}

// Reset returns the encoder to its fresh state (reset_streaming).
func (e *Encoder) Reset() {
	for _, s := range e.steps {
		s.reset()
	}
	e.tr.reset()
	if e.down != nil {
		e.down.reset()
	}
	e.seanet, e.trOut, e.latent = nil, nil, nil
}

// EncodeFrame encodes one frame of FrameSize() mono samples (mimi.encode on
// [1, 1, FrameSize]) into NumCodebooks() codes. The returned slice belongs to
// the encoder and is overwritten by the next call: copy it to keep it.
func (e *Encoder) EncodeFrame(pcm []float32) []int {
	if len(pcm) != e.m.frameSize {
		panic(fmt.Sprintf("mimi: EncodeFrame got %d samples, a frame is %d", len(pcm), e.m.frameSize))
	}
	return e.Encode(pcm)
}

// Encode encodes whole frames of samples (a multiple of FrameSize()) into
// NumCodebooks() codes a frame, frame after frame: the codes of EncodeFrame
// on each frame in turn. The returned slice belongs to the encoder and is
// overwritten by the next call.
func (e *Encoder) Encode(pcm []float32) []int {
	n := e.frames(pcm)
	x, T := pcm, len(pcm)
	for _, s := range e.steps {
		x, T = s.forward(x, T)
	}
	e.seanetDone(x, T, n)
	e.run.forward([]*trStage{e.tr}, [][]float32{e.seanet}, []int{n * e.m.resample})
	return e.finish(n)
}

// frames is the number of whole frames in pcm (at least one).
func (e *Encoder) frames(pcm []float32) int {
	f := e.m.frameSize
	if len(pcm) == 0 || len(pcm)%f != 0 {
		panic(fmt.Sprintf("mimi: %d samples to encode: not whole frames of %d", len(pcm), f))
	}
	return len(pcm) / f
}

// seanetDone keeps the SEANet encoder's output of n frames (T rows).
func (e *Encoder) seanetDone(x []float32, T, n int) {
	m := e.m
	if T != n*m.resample {
		panic(fmt.Sprintf("mimi: SEANet encoder gave %d steps for %d frames, %d expected", T, n, n*m.resample))
	}
	e.seanet = x[:T*m.dim]
}

// finish runs the downsample and the quantizer on the transformer's output
// of n frames.
func (e *Encoder) finish(n int) []int {
	x, T := e.transformed(n)
	if e.down != nil {
		x, T = e.down.forward(x, T)
	}
	e.setLatent(x, T, n)
	quantizeAll(e.m, []*Encoder{e}, &e.quant)
	return e.codes
}

// quantizeAll codes the latents of every encoder's call (set by setLatent)
// as one batch of rows (quantizer.encodeBatch: each row's codes are those
// of coding it alone).
func quantizeAll(m *Model, encs []*Encoder, qb *quantBatch) {
	nq, d := m.Cfg.NumCodebooks, m.dim
	qb.xs, qb.codes, qb.scs = qb.xs[:0], qb.codes[:0], qb.scs[:0]
	for _, e := range encs {
		for j := range len(e.latent) / d {
			qb.xs = append(qb.xs, e.latent[j*d:(j+1)*d])
			qb.codes = append(qb.codes, e.codes[j*nq:(j+1)*nq])
			qb.scs = append(qb.scs, e.scratch(j))
		}
	}
	m.q.encodeBatch(m.host, qb.codes, qb.xs, qb.scs, qb)
	clear(qb.xs)
	clear(qb.codes)
	clear(qb.scs)
}

// scratch is the quantizer scratch of frame j of a call.
func (e *Encoder) scratch(j int) *quantScratch {
	for len(e.qs) <= j {
		e.qs = append(e.qs, e.m.q.newScratch())
	}
	return e.qs[j]
}

// transformed is the transformer's output rows of n frames, kept as
// TransformerOut.
func (e *Encoder) transformed(n int) ([]float32, int) {
	m := e.m
	e.trOut = e.tr.out[:n*m.resample*m.dim]
	return e.trOut, n * m.resample
}

// setLatent keeps the latent (T rows after the downsample: one a frame)
// and sizes the codes for n frames.
func (e *Encoder) setLatent(x []float32, T, n int) {
	if T != n {
		panic(fmt.Sprintf("mimi: encoder gave %d latent frames for %d frames", T, n))
	}
	e.latent = x[:n*e.m.dim]
	if nq := e.m.Cfg.NumCodebooks; cap(e.codes) < n*nq {
		e.codes = make([]int, n*nq)
	} else {
		e.codes = e.codes[:n*nq]
	}
}

// SeanetOut is the last call's SEANet encoder output, [frames·steps][Dimension()]
// time-major (steps = 2 at 25 Hz), valid until the next call.
func (e *Encoder) SeanetOut() []float32 { return e.seanet }

// TransformerOut is the last call's encoder transformer output, like SeanetOut.
func (e *Encoder) TransformerOut() []float32 { return e.trOut }

// Latent is the last call's unquantized latents (the quantizer input),
// [frames][Dimension()].
func (e *Encoder) Latent() []float32 { return e.latent }

// Decoder is the streaming state of Mimi's decode path (upsample, decoder
// transformer, SEANet decoder).
type Decoder struct {
	m         *Model
	qs        *quantScratch
	up        *convTrStage
	tr        *trStage
	run       *trRunner // for Decode (a batch of one)
	steps     []stage
	latent    []float32
	upsampled []float32
	trOut     []float32
	pcm       []float32
}

// NewDecoder returns a fresh decoder state.
func (m *Model) NewDecoder() *Decoder {
	d := &Decoder{m: m, qs: m.q.newScratch(), tr: m.decTr.newStage(m.be, m.resample), run: m.decTr.newRunner(m.be, m.resample)}
	if m.up != nil {
		d.up = m.up.newConvTrStage(m.host)
		prealloc(d.up, 1)
	}
	T := m.resample
	for _, l := range m.dec {
		s := l.newStage(m.host)
		T = prealloc(s, T)
		d.steps = append(d.steps, s)
	}
	return d
}

// Reset returns the decoder to its fresh state (reset_streaming).
func (d *Decoder) Reset() {
	if d.up != nil {
		d.up.reset()
	}
	d.tr.reset()
	for _, s := range d.steps {
		s.reset()
	}
	d.latent, d.upsampled, d.trOut, d.pcm = d.latent[:0], nil, nil, nil // the latents' buffer kept
}

// DecodeFrame decodes one frame of NumCodebooks() codes (mimi.decode on
// [1, K, 1]) into FrameSize() samples. It panics on invalid codes (see
// CheckCodes). The returned slice belongs to the decoder and is overwritten
// by the next call: copy it to keep it.
func (d *Decoder) DecodeFrame(codes []int) []float32 {
	if len(codes) != d.m.Cfg.NumCodebooks {
		panic(fmt.Sprintf("mimi: DecodeFrame got %d codes, a frame has %d", len(codes), d.m.Cfg.NumCodebooks))
	}
	return d.Decode(codes)
}

// Decode decodes whole frames of codes (NumCodebooks() a frame, frame after
// frame) into FrameSize() samples a frame: the samples of DecodeFrame on
// each frame in turn. It panics on invalid codes. The returned slice
// belongs to the decoder and is overwritten by the next call.
func (d *Decoder) Decode(codes []int) []float32 {
	n := d.upsample(codes)
	d.run.forward([]*trStage{d.tr}, [][]float32{d.upsampled}, []int{n * d.m.resample})
	return d.finish(n)
}

// upsample looks the codes up and brings the latents to the encoder rate;
// it returns the number of frames.
func (d *Decoder) upsample(codes []int) int {
	m := d.m
	nq := m.Cfg.NumCodebooks
	if len(codes) == 0 || len(codes)%nq != 0 {
		panic(fmt.Sprintf("mimi: %d codes to decode: not whole frames of %d", len(codes), nq))
	}
	n := len(codes) / nq
	d.latent = grow(d.latent, n*m.dim)
	for j := range n {
		f := codes[j*nq : (j+1)*nq]
		if err := m.CheckCodes(f); err != nil {
			panic(err.Error())
		}
		copy(d.latent[j*m.dim:], m.q.decode(m.host, f, d.qs))
	}
	x, T := d.latent, n
	if d.up != nil {
		x, T = d.up.forward(x, T)
	}
	if T != n*m.resample {
		panic(fmt.Sprintf("mimi: upsample gave %d steps for %d frames, %d expected", T, n, n*m.resample))
	}
	d.upsampled = x[:T*m.dim]
	return n
}

// finish runs the SEANet decoder on the transformer's output of n frames.
func (d *Decoder) finish(n int) []float32 {
	x, T := d.transformed(n)
	for _, s := range d.steps {
		x, T = s.forward(x, T)
	}
	return d.done(x, T, n)
}

// transformed is the transformer's output rows of n frames, kept as
// TransformerOut.
func (d *Decoder) transformed(n int) ([]float32, int) {
	m := d.m
	d.trOut = d.tr.out[:n*m.resample*m.dim]
	return d.trOut, n * m.resample
}

// done keeps the SEANet decoder's output of n frames (T samples).
func (d *Decoder) done(x []float32, T, n int) []float32 {
	if T != n*d.m.frameSize {
		panic(fmt.Sprintf("mimi: decoder gave %d samples for %d frames, %d expected", T, n, n*d.m.frameSize))
	}
	d.pcm = x[:T]
	return d.pcm
}

// Batch encodes and decodes frames of many streams at once: every layer of
// the codec runs once for all streams, the transformers (the codec's
// largest weight reads) as one pass and the SEANet convolutions, the
// downsample included, as batched products over all streams' rows (see
// seanetBatch), each stream keeping its own streaming state (a batch of one
// runs the stream's own path: nothing to share). A stream may bring
// several frames to a call (Encoder.Encode, Decoder.Decode). Each stream's
// results are bit-identical to its EncodeFrame / DecodeFrame, frame by
// frame. A Batch is used from one goroutine.
type Batch struct {
	m        *Model
	enc, dec *trRunner
	seanet   *seanetBatch
	stages   []*trStage
	xs       [][]float32
	ts       []int
	ns       []int // each stream's frames in the call
	downs    []*convStage
	quant    quantBatch
}

// NewBatch prepares batched coding over m's backend.
func (m *Model) NewBatch() *Batch {
	return &Batch{m: m, enc: m.encTr.newRunner(m.be, m.resample), dec: m.decTr.newRunner(m.be, m.resample), seanet: newSeanetBatch(m.host)}
}

// rows sets b.xs, b.ts and b.ns for n streams.
func (b *Batch) rows(n int) {
	b.xs, b.ts, b.ns = at(b.xs, n), at(b.ts, n), at(b.ns, n)
}

// done drops the references to the streams' buffers.
func (b *Batch) done() {
	clear(b.stages[:cap(b.stages)])
	clear(b.xs[:cap(b.xs)])
	clear(b.downs[:cap(b.downs)])
}

// Encode encodes pcm[i] (whole frames) with encs[i]; out[i] receives a
// copy of its codes, NumCodebooks() a frame.
func (b *Batch) Encode(encs []*Encoder, pcm [][]float32, out [][]int) {
	if len(encs) == 1 {
		out[0] = append(out[0][:0], encs[0].Encode(pcm[0])...)
		return
	}
	m := b.m
	b.rows(len(encs))
	for i, e := range encs {
		b.ns[i] = e.frames(pcm[i])
		b.xs[i], b.ts[i] = pcm[i], len(pcm[i])
	}
	b.seanet.run(len(encs), func(i int) []stage { return encs[i].steps }, b.xs, b.ts)
	b.stages = b.stages[:0]
	for i, e := range encs {
		e.seanetDone(b.xs[i], b.ts[i], b.ns[i])
		b.stages, b.xs[i] = append(b.stages, e.tr), e.seanet
	}
	b.enc.forward(b.stages, b.xs, b.ts)
	b.downs = b.downs[:0]
	for i, e := range encs {
		b.xs[i], b.ts[i] = e.transformed(b.ns[i])
		b.downs = append(b.downs, e.down)
	}
	if m.down != nil {
		b.seanet.conv(b.downs, b.xs, b.ts)
	}
	for i, e := range encs {
		e.setLatent(b.xs[i], b.ts[i], b.ns[i])
	}
	quantizeAll(m, encs, &b.quant)
	for i, e := range encs {
		out[i] = append(out[i][:0], e.codes...)
	}
	b.done()
}

// Decode decodes codes[i] (whole frames) with decs[i] and returns each
// decoder's samples (owned by the decoder, valid until its next call).
func (b *Batch) Decode(decs []*Decoder, codes [][]int, out [][]float32) {
	if len(decs) == 1 {
		out[0] = decs[0].Decode(codes[0])
		return
	}
	b.rows(len(decs))
	b.stages = b.stages[:0]
	for i, d := range decs {
		b.ns[i] = d.upsample(codes[i])
		b.stages, b.xs[i], b.ts[i] = append(b.stages, d.tr), d.upsampled, b.ns[i]*b.m.resample
	}
	b.dec.forward(b.stages, b.xs, b.ts)
	for i, d := range decs {
		b.xs[i], b.ts[i] = d.transformed(b.ns[i])
	}
	b.seanet.run(len(decs), func(i int) []stage { return decs[i].steps }, b.xs, b.ts)
	for i, d := range decs {
		out[i] = d.done(b.xs[i], b.ts[i], b.ns[i])
	}
	b.done()
}

// encodeEach is Encode with each stream's SEANet encoder, downsample and
// quantizer run alone, the transformer once for all: BenchmarkBatchCodec's
// baseline.
func (b *Batch) encodeEach(encs []*Encoder, pcm [][]float32, out [][]int) {
	b.rows(len(encs))
	b.stages = b.stages[:0]
	for i, e := range encs {
		b.ns[i] = e.frames(pcm[i])
		x, T := pcm[i], len(pcm[i])
		for _, s := range e.steps {
			x, T = s.forward(x, T)
		}
		e.seanetDone(x, T, b.ns[i])
		b.stages, b.xs[i], b.ts[i] = append(b.stages, e.tr), e.seanet, T
	}
	b.enc.forward(b.stages, b.xs, b.ts)
	for i, e := range encs {
		out[i] = append(out[i][:0], e.finish(b.ns[i])...)
	}
	b.done()
}

// decodeEach is Decode with each stream's SEANet decoder run alone.
func (b *Batch) decodeEach(decs []*Decoder, codes [][]int, out [][]float32) {
	b.rows(len(decs))
	b.stages = b.stages[:0]
	for i, d := range decs {
		b.ns[i] = d.upsample(codes[i])
		b.stages, b.xs[i], b.ts[i] = append(b.stages, d.tr), d.upsampled, b.ns[i]*b.m.resample
	}
	b.dec.forward(b.stages, b.xs, b.ts)
	for i, d := range decs {
		out[i] = d.finish(b.ns[i])
	}
	b.done()
}

// QuantizedLatent is the last call's decoded latents (quantizer.decode),
// [frames][Dimension()].
func (d *Decoder) QuantizedLatent() []float32 { return d.latent }

// Upsampled is the last call's latents at the encoder rate,
// [frames·steps][Dimension()].
func (d *Decoder) Upsampled() []float32 { return d.upsampled }

// TransformerOut is the last call's decoder transformer output, like Upsampled.
func (d *Decoder) TransformerOut() []float32 { return d.trOut }

// CheckFile reports an error when the mapped checkpoint shrank under the
// running job (see weights.File.CheckIntact).
func (m *Model) CheckFile() error { return m.file.CheckIntact() }

package lm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// GenOptions configures a Gen (LMGen's constructor arguments plus the port's
// own switches).
type GenOptions struct {
	UseSampling    bool    // false: greedy (argmax) decoding
	Temp, TempText float32 // audio / text temperature (≤ 0: greedy)
	TopK, TopKText int     // audio / text top-k (≤ 0: the whole vocabulary)
	Seed           uint64  // seed of the run's one generator (reseeded by Reset)

	FrameRate float64 // codec frame rate for the 0.5 s silences; 0 → 12.5

	// StepwisePrompts runs fully forced steps (the prompt phases) one at a
	// time like the reference instead of deferring them into one causal
	// prefill. Tokens are identical either way.
	StepwisePrompts bool
	// Full does the reference's dead work: the text head and all dep_q
	// depformer steps on every step, even where every output is provided
	// (for traces and tests). Implies StepwisePrompts.
	Full bool
	// Trace, when set, is called after every step that reached the temporal
	// transformer (or was deferred into the prefill). The StepTrace and its
	// slices are reused: copy what you keep.
	Trace func(*StepTrace)
	// Weights supplies the weights of every unit as a step or a prefill
	// reaches it (nil: the model's own mapped weights). An offload executor
	// (Placed) goes here; see Weights.
	Weights Weights
}

// DefaultGenOptions are offline.py's CLI defaults (sampling on).
func DefaultGenOptions() GenOptions {
	return GenOptions{UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, FrameRate: 12.5}
}

// StepTrace describes one LMGen step (one row of the fixtures' steps.safetensors).
type StepTrace struct {
	Offset         int   // LMGen offset t of the step (input column t−1, target column t)
	FromEmbeddings bool  // fed by StepEmbeddings
	Deferred       bool  // every channel forced: queued for the prefill, nothing computed
	Input          []int // the K input tokens (ZeroToken for an embeddings step)
	Provided       []bool
	Sampled        []int // token decided from the logits (argmax where provided), −1 where not computed
	Next           []int // the token stored at the target column
	// TextLogits is nil when the text head was skipped (text provided, not Full).
	TextLogits []float32
	// AudioLogits[j] holds depformer step j's logits (stream j+1), nil for
	// steps that were not run.
	AudioLogits [][]float32
	Output      []int // what Step returned, nil when it returned nothing
}

// StepStats is the work of the last step.
type StepStats struct {
	Transformer  bool  // the temporal transformer ran (false: deferred or early return)
	TextHead     bool  // text_linear ran
	DepSteps     int   // depformer steps run
	WeightBytes  int64 // weight bytes read by the step (temporal + heads + depformer + embedding rows)
	PrefillSteps int   // positions run by a prefill flushed during the last call

	TemporalTime time.Duration // temporal transformer + out_norm (prefill included)
	HeadsTime    time.Duration // text head, depformer and sampling
}

// Gen is LMGen: the streaming generation state over a Model. All state is in
// the struct: token cache and provided flags ([n_q+1][max_delay+3]), offset,
// the temporal transformer's KV rings, the depformer state (fresh each
// frame), the random generator and the prefill queue.
type Gen struct {
	m   *Model
	opt GenOptions
	w   Weights

	K, CT, maxDelay int
	delays          []int
	cache           []int  // [K·CT], cache[k·CT+col]
	provided        []bool // [K·CT]
	offset          int

	ts      *nn.TransformerState
	ds      *DepState
	rng     *rand.Rand
	sampler ops.Sampler

	x, h, row   []float32
	rows        [][]float32
	textLogits  []float32
	audioLogits [][]float32
	tokens      []int
	out         []int
	sampled     []int
	dummyAudio  []int // the initial token, step_embeddings' dummy inputs

	pending  [][]float32 // prefill queue: rows [npending] are queued
	npending int

	trace StepTrace
	stats StepStats

	recording bool        // keep the transformer inputs (save_voice_prompt_embeddings)
	recorded  [][]float32 // what was kept

	temporalBytes int64
}

// NewGen prepares generation over m.
func NewGen(m *Model, opt GenOptions) *Gen {
	if opt.FrameRate == 0 {
		opt.FrameRate = 12.5
	}
	if opt.Full {
		opt.StepwisePrompts = true
	}
	c := &m.Cfg
	g := &Gen{m: m, opt: opt, w: opt.Weights, K: c.NQ + 1, maxDelay: c.MaxDelay(), delays: c.Delays}
	if g.w == nil {
		g.w = m.HostWeights()
	}
	g.CT = g.maxDelay + 3
	g.cache = make([]int, g.K*g.CT)
	g.provided = make([]bool, g.K*g.CT)
	g.ts = m.NewState()
	g.temporalBytes = m.TemporalBytes()
	g.ds = m.Dep.NewState()
	g.rng = ops.NewRNG(opt.Seed)
	g.x, g.h, g.row = make([]float32, c.Dim), make([]float32, c.Dim), make([]float32, c.Dim)
	g.rows = [][]float32{g.x}
	g.textLogits = make([]float32, m.TextLinear.Rows)
	for j := 0; j < c.DepQ; j++ {
		g.audioLogits = append(g.audioLogits, make([]float32, c.Card))
	}
	g.tokens = make([]int, g.K)
	g.out = make([]int, c.DepQ+1)
	g.sampled = make([]int, g.K)
	g.dummyAudio = make([]int, c.NQ)
	for i := range g.dummyAudio {
		g.dummyAudio[i] = c.Card
	}
	g.trace = StepTrace{Input: make([]int, g.K), Provided: make([]bool, g.K), Sampled: make([]int, g.K),
		Next: make([]int, g.K), AudioLogits: make([][]float32, c.DepQ)}
	g.Reset()
	return g
}

// Model is the model generated from.
func (g *Gen) Model() *Model { return g.m }

// Options are the options in use.
func (g *Gen) Options() GenOptions { return g.opt }

// Reset is reset_streaming: offset 0, nothing provided, empty KV rings, an
// empty prefill queue, the generator reseeded. (The reference keeps the token
// cache, but every cell is rewritten before it is read; here it is cleared to
// UngeneratedToken so that a reset Gen does not depend on its history.)
func (g *Gen) Reset() {
	g.offset = 0
	clear(g.provided)
	for i := range g.cache {
		g.cache[i] = UngeneratedToken
	}
	g.ts.Reset()
	g.ds.Reset()
	g.npending = 0
	g.rng = ops.NewRNG(g.opt.Seed)
	g.stats = StepStats{}
}

// Offset is LMGen's offset: the number of step calls since the reset.
func (g *Gen) Offset() int { return g.offset }

// Err is the first error of the Weights the steps are computed from (nil
// for the model's own weights). After an error the outputs are still right
// (the host weights are used) but the run should stop.
func (g *Gen) Err() error { return g.w.Err() }

// Cache returns a copy of the token cache, [n_q+1][max_delay+3].
func (g *Gen) Cache() [][]int {
	out := make([][]int, g.K)
	for k := range out {
		out[k] = append([]int(nil), g.cache[k*g.CT:(k+1)*g.CT]...)
	}
	return out
}

// TransformerState runs any pending prefill and returns the temporal
// transformer's state (owned by the Gen).
func (g *Gen) TransformerState() *nn.TransformerState {
	g.Flush()
	return g.ts
}

// Stats is the work done by the last step.
func (g *Gen) Stats() StepStats { return g.stats }

// Pending is the number of deferred positions waiting for the prefill.
func (g *Gen) Pending() int { return g.npending }

func (g *Gen) set(k, col, tok int) {
	g.cache[k*g.CT+col] = tok
	g.provided[k*g.CT+col] = true
}

// prepare is prepare_step_input: it writes the given tokens at offset +
// delay and the initial tokens at the start; false for the very first call
// after a reset (which returns before the transformer).
func (g *Gen) prepare(user, agent []int, text int, hasText bool) bool {
	CT := g.CT
	if user != nil {
		if len(user) != g.K-1-AudioTokensPerStream {
			panic(fmt.Sprintf("lm: %d user tokens given, %d expected", len(user), g.K-1-AudioTokensPerStream))
		}
		for q, tok := range user {
			k := AudioTokensPerStream + 1 + q
			g.set(k, (g.offset+g.delays[k])%CT, tok)
		}
	}
	if agent != nil {
		if len(agent) != AudioTokensPerStream {
			panic(fmt.Sprintf("lm: %d agent tokens given, %d expected", len(agent), AudioTokensPerStream))
		}
		for q, tok := range agent {
			k := 1 + q
			g.set(k, (g.offset+g.delays[k])%CT, tok)
		}
	}
	if hasText {
		g.set(0, (g.offset+g.delays[0])%CT, text)
	}
	for k, d := range g.delays {
		if g.offset <= d {
			g.set(k, g.offset%CT, g.m.InitialToken(k))
		}
	}
	if g.offset == 0 {
		for k := 0; k < g.K; k++ {
			g.cache[k*CT] = g.m.InitialToken(k)
		}
		g.offset++
		return false
	}
	return true
}

// Step is LMGen.step with the user's codes (n_q − 8 of them) as input_tokens:
// text and agent audio are generated. It returns the dep_q+1 output tokens
// (text, agent codebooks, user codebooks) once offset > max_delay; out is
// owned by the Gen and overwritten by the next step. userCodes nil generates
// the user stream too.
func (g *Gen) Step(userCodes []int) (out []int, ok bool) {
	return g.StepInput(Input{User: userCodes})
}

// Input is what one LMGen.step call is given; nil / !HasText = not provided.
type Input struct {
	User    []int // input_tokens: n_q − 8 user codes
	Agent   []int // moshi_tokens: 8 agent codes
	Text    int   // text_token, when HasText
	HasText bool
}

// StepInput is LMGen.step with any combination of forced streams.
func (g *Gen) StepInput(in Input) (out []int, ok bool) {
	g.stats = StepStats{}
	if !g.prepare(in.User, in.Agent, in.Text, in.HasText) {
		return nil, false
	}
	return g.run(nil)
}

// StepEmbeddings is LMGen.step_embeddings: the transformer input is emb
// (len dim) instead of embedded tokens; every stream is forced (dummy audio,
// text PAD), and the token cache is whatever the prompt leaves.
func (g *Gen) StepEmbeddings(emb []float32) (out []int, ok bool) {
	if len(emb) != g.m.Cfg.Dim {
		panic(fmt.Sprintf("lm: embedding of %d values, dim is %d", len(emb), g.m.Cfg.Dim))
	}
	g.stats = StepStats{}
	na := g.K - 1 - AudioTokensPerStream
	for !g.prepare(g.dummyAudio[:na], g.dummyAudio[na:], TextPadToken, true) {
	}
	return g.run(emb)
}

// run is the part of step / step_embeddings after prepare_step_input: the
// transformer (or its deferral), process_transformer_output, the output gather.
func (g *Gen) run(emb []float32) ([]int, bool) {
	m, CT, dq := g.m, g.CT, g.m.Cfg.DepQ
	in, tgt := (g.offset-1)%CT, g.offset%CT
	tr := &g.trace
	tr.Offset, tr.FromEmbeddings, tr.TextLogits, tr.Output = g.offset, emb != nil, nil, nil
	for j := range tr.AudioLogits {
		tr.AudioLogits[j] = nil
	}
	allProvided := true
	for k := 0; k < g.K; k++ {
		tr.Provided[k] = g.provided[k*CT+tgt]
		g.sampled[k] = -1
		if k <= dq && !tr.Provided[k] {
			allProvided = false
		}
	}
	x := g.x
	if emb != nil {
		copy(x, emb)
		for k := range tr.Input {
			tr.Input[k] = ZeroToken
		}
	} else {
		for k := 0; k < g.K; k++ {
			g.tokens[k] = g.cache[k*CT+in]
		}
		copy(tr.Input, g.tokens)
		m.EmbedCodes(x, g.row, g.tokens)
		g.stats.WeightBytes += int64(g.K) * int64(m.Cfg.Dim) * int64(m.TextEmb.DType.Size())
	}
	if g.recording {
		g.recorded = append(g.recorded, slices.Clone(x))
	}
	if allProvided && !g.opt.StepwisePrompts {
		// Nothing sampled is kept: defer the position into the prefill.
		g.queue(x)
		tr.Deferred = true
	} else {
		tr.Deferred = false
		g.Flush()
		w := g.w
		w.BeginPass()
		t0 := time.Now()
		m.Transformer.ForwardFrom(w, g.ts, g.rows)
		t1 := time.Now()
		g.stats.TemporalTime += t1.Sub(t0)
		g.stats.Transformer = true
		g.stats.WeightBytes += g.temporalBytes
		textProvided := tr.Provided[0]
		textHead := !textProvided || g.opt.Full
		// Depformer steps after the last stream that is not provided produce
		// nothing that is kept: skip them (steps 8..15 in the user phase).
		last := dq - 1
		if !g.opt.Full {
			for last >= 0 && tr.Provided[last+1] {
				last--
			}
		}
		// The head: out_norm feeds the text head and the depformer; nothing
		// needs it when neither runs.
		if textHead || last >= 0 {
			hd := w.AcquireHead()
			hd.OutNorm.Apply(g.h, x)
			if textHead {
				hd.TextLinear.MatVec(g.textLogits, g.h)
			}
			w.ReleaseHead()
		}
		if textHead {
			g.stats.TextHead = true
			g.stats.WeightBytes += m.TextLinear.Bytes()
			tr.TextLogits = g.textLogits
			if textProvided {
				g.sampled[0] = ops.Argmax(g.textLogits)
			} else {
				g.sampled[0] = g.sampler.Sample(g.textLogits, g.opt.UseSampling, g.opt.TempText, g.opt.TopKText, g.rng)
			}
		}
		prev := g.sampled[0]
		if textProvided {
			prev = g.cache[tgt]
		}
		g.ds.Reset()
		for j := 0; j <= last; j++ {
			k := j + 1
			logits := g.audioLogits[j]
			g.ds.StepWith(w.AcquireDepStep(j), j, g.h, prev, logits)
			w.ReleaseDepStep(j)
			g.stats.WeightBytes += m.Dep.StepBytes(j)
			tr.AudioLogits[j] = logits
			if tr.Provided[k] {
				g.sampled[k] = ops.Argmax(logits)
				prev = g.cache[k*CT+tgt]
			} else {
				g.sampled[k] = g.sampler.Sample(logits, g.opt.UseSampling, g.opt.Temp, g.opt.TopK, g.rng)
				prev = g.sampled[k]
			}
		}
		w.EndPass()
		g.stats.DepSteps = last + 1
		g.stats.HeadsTime += time.Since(t1)
	}
	for k := 0; k < g.K; k++ {
		g.provided[k*CT+in] = false
	}
	for k := 0; k <= dq; k++ {
		if !g.provided[k*CT+tgt] {
			g.cache[k*CT+tgt] = g.sampled[k]
		}
	}
	copy(tr.Sampled, g.sampled)
	for k := range tr.Next {
		tr.Next[k] = g.cache[k*CT+tgt]
	}
	ok := false
	if g.offset > g.maxDelay {
		for k := 0; k <= dq; k++ {
			g.out[k] = g.cache[k*CT+(g.offset-g.maxDelay+g.delays[k])%CT]
		}
		ok = true
		tr.Output = g.out
	}
	g.offset++
	if g.opt.Trace != nil {
		g.opt.Trace(tr)
	}
	if !ok {
		return nil, false
	}
	return g.out, true
}

func (g *Gen) queue(x []float32) {
	if g.npending == len(g.pending) {
		g.pending = append(g.pending, make([]float32, len(x)))
	}
	copy(g.pending[g.npending], x)
	g.npending++
}

// Flush runs the deferred positions through the temporal transformer as one
// causal prefill (nn.Transformer.ForwardSteps: each position sees the KV ring
// as after its own write, exactly as step-by-step), without out_norm, text
// head or depformer, whose outputs would all be discarded.
func (g *Gen) Flush() {
	if g.npending == 0 {
		return
	}
	t0 := time.Now()
	g.w.BeginPass()
	g.m.Transformer.ForwardStepsFrom(g.w, g.ts, g.pending[:g.npending])
	g.w.EndPass()
	g.stats.TemporalTime += time.Since(t0)
	g.stats.PrefillSteps += g.npending
	g.stats.WeightBytes += g.temporalBytes
	g.npending = 0
}

package lm

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// GenOptions configures a Gen (LMGen's constructor arguments plus the port's
// own switches). They are per conversation: conversations of one lockstep
// batch may differ in every field.
type GenOptions struct {
	UseSampling    bool    // false: greedy (argmax) decoding
	Temp, TempText float32 // audio / text temperature (≤ 0: greedy)
	TopK, TopKText int     // audio / text top-k (≤ 0: the whole vocabulary)
	Seed           uint64  // seed of the conversation's one generator (reseeded by Reset)

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
	PrefillSteps int   // deferred positions run by the last pass (prefill) of the step
	Batch        int   // conversations in the pass (1 alone)

	TemporalTime time.Duration // temporal transformer (prefill included), for the whole pass
	HeadsTime    time.Duration // out_norm, text head, depformer and sampling, for the whole pass
}

// Input is what one LMGen.step call is given; nil / !HasText = not provided.
// Emb set makes it LMGen.step_embeddings instead: the transformer input is
// Emb (len dim), every stream forced.
type Input struct {
	User    []int // input_tokens: n_q − 8 user codes
	Agent   []int // moshi_tokens: 8 agent codes
	Text    int   // text_token, when HasText
	HasText bool
	Emb     []float32
}

// Gen is LMGen for one conversation: the token cache and provided flags
// ([n_q+1][max_delay+3]), offset, the temporal transformer's state (KV rings
// in backend memory), the random generator, the prefill queue. It steps on
// the Engine that made it, alone (Step) or in lockstep with others
// (Engine.Step).
type Gen struct {
	e   *Engine
	m   *Model
	opt GenOptions

	K, CT, maxDelay int
	delays          []int
	cache           []int  // [K·CT], cache[k·CT+col]
	provided        []bool // [K·CT]
	offset          int

	ts      *nn.TransformerState
	rng     *rand.Rand
	sampler ops.Sampler

	// The prefill queue: deferred positions' transformer inputs, rows
	// [0, npending) of pending (backend memory).
	pending  actsQueue
	npending int

	textLogits  []float32   // host copy for sampling
	audioLogits [][]float32 // host copies, per depformer step
	tokens      []int
	ids         []int // embedding ids in EmbedTables order
	out         []int
	sampled     []int
	dummyAudio  []int // the initial token, step_embeddings' dummy inputs

	// Per step.
	in, tgt     int
	allProvided bool
	emb         []float32
	textHead    bool
	last        int // last depformer step to run
	ok          bool

	trace StepTrace
	stats StepStats

	recording bool        // keep the transformer inputs (save_voice_prompt_embeddings)
	recorded  [][]float32 // what was kept
}

// NewGen prepares the generation of one conversation on e.
func (e *Engine) NewGen(opt GenOptions) *Gen { return e.newGen(opt, nil) }

// Renew makes g the Gen that NewGen(opt) on g's engine would make, but
// keeps the memory of its KV rings (reset, at the capacity they reached),
// so that a job's next conversation does not allocate, and fault in, its
// rings again. g's earlier conversation must be over. Outputs do not depend
// on the rings' capacity (see Reserve).
func (g *Gen) Renew(opt GenOptions) { *g = *g.e.newGen(opt, g.ts) }

func (e *Engine) newGen(opt GenOptions, ts *nn.TransformerState) *Gen {
	if opt.FrameRate == 0 {
		opt.FrameRate = 12.5
	}
	if opt.Full {
		opt.StepwisePrompts = true
	}
	m := e.m
	c := &m.Cfg
	g := &Gen{e: e, m: m, opt: opt, K: c.NQ + 1, maxDelay: c.MaxDelay(), delays: c.Delays}
	g.CT = g.maxDelay + 3
	g.cache = make([]int, g.K*g.CT)
	g.provided = make([]bool, g.K*g.CT)
	g.ts = ts
	if g.ts == nil {
		g.ts = m.Transformer.NewState(e.be)
	}
	g.pending = actsQueue{be: e.be, cols: c.Dim}
	g.textLogits = make([]float32, m.TextLinear.Rows)
	for j := 0; j < c.DepQ; j++ {
		g.audioLogits = append(g.audioLogits, make([]float32, c.Card))
	}
	g.tokens = make([]int, g.K)
	g.ids = make([]int, g.K)
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

// Engine is the engine the Gen steps on.
func (g *Gen) Engine() *Engine { return g.e }

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
	g.npending = 0
	g.rng = ops.NewRNG(g.opt.Seed)
	g.stats = StepStats{}
}

// Offset is LMGen's offset: the number of step calls since the reset.
func (g *Gen) Offset() int { return g.offset }

// Reserve sizes the temporal transformer's KV rings for steps more steps
// after those run and queued (at most the context), so that a conversation
// of known length does not grow (and copy) them while it runs. Outputs do
// not depend on it. A later Restore may take the snapshot's (smaller) ring
// sizes: reserve after it.
func (g *Gen) Reserve(steps int) {
	g.m.Transformer.Reserve(g.e.be, g.ts, g.npending+steps)
}

// Err is the first error of the Weights the steps are computed from (nil
// for the model's own weights). After an error the outputs are still right
// (the host weights are used) but the run should stop.
func (g *Gen) Err() error { return g.e.w.Err() }

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

// Output is what the last step returned: the dep_q+1 output tokens (text,
// agent codebooks, user codebooks) once offset > max_delay, owned by the Gen
// and overwritten by the next step.
func (g *Gen) Output() ([]int, bool) {
	if !g.ok {
		return nil, false
	}
	return g.out, true
}

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

// StepInput is LMGen.step with any combination of forced streams (a batch
// of one: see Engine.Step).
func (g *Gen) StepInput(in Input) (out []int, ok bool) {
	e := g.e
	e.one[0], e.oneIn[0] = g, in
	err := e.Step(e.one[:], e.oneIn[:])
	e.one[0], e.oneIn[0] = nil, Input{}
	if err != nil {
		return nil, false
	}
	return g.Output()
}

// StepEmbeddings is LMGen.step_embeddings: the transformer input is emb
// (len dim) instead of embedded tokens; every stream is forced (dummy audio,
// text PAD), and the token cache is whatever the prompt leaves.
func (g *Gen) StepEmbeddings(emb []float32) (out []int, ok bool) {
	return g.StepInput(Input{Emb: emb})
}

// begin runs prepare_step_input for in; false when the step returns before
// the transformer (the first call after a reset).
func (g *Gen) begin(in Input) bool {
	g.stats = StepStats{}
	g.ok = false
	if in.Emb != nil {
		if len(in.Emb) != g.m.Cfg.Dim {
			panic(fmt.Sprintf("lm: embedding of %d values, dim is %d", len(in.Emb), g.m.Cfg.Dim))
		}
		na := g.K - 1 - AudioTokensPerStream
		for !g.prepare(g.dummyAudio[:na], g.dummyAudio[na:], TextPadToken, true) {
		}
	} else if !g.prepare(in.User, in.Agent, in.Text, in.HasText) {
		return false
	}
	g.emb = in.Emb
	CT, dq := g.CT, g.m.Cfg.DepQ
	g.in, g.tgt = (g.offset-1)%CT, g.offset%CT
	tr := &g.trace
	tr.Offset, tr.FromEmbeddings, tr.TextLogits, tr.Output = g.offset, g.emb != nil, nil, nil
	for j := range tr.AudioLogits {
		tr.AudioLogits[j] = nil
	}
	g.allProvided = true
	for k := 0; k < g.K; k++ {
		tr.Provided[k] = g.provided[k*CT+g.tgt]
		g.sampled[k] = -1
		if k <= dq && !tr.Provided[k] {
			g.allProvided = false
		}
	}
	if g.emb != nil {
		for k := range tr.Input {
			tr.Input[k] = ZeroToken
		}
	} else {
		for k := 0; k < g.K; k++ {
			g.tokens[k] = g.cache[k*CT+g.in]
		}
		copy(tr.Input, g.tokens)
		// embed_codes sums the audio embeddings, then the text embedding.
		copy(g.ids, g.tokens[1:])
		g.ids[g.K-1] = g.tokens[0]
		g.stats.WeightBytes += int64(g.K) * int64(g.m.Cfg.Dim) * int64(g.m.TextEmb.DType.Size())
	}
	// Which heads the step needs: the text head unless the text is
	// provided; the depformer steps up to the last stream not provided
	// (steps 8..15 in the user phase produce nothing that is kept).
	g.textHead = !tr.Provided[0] || g.opt.Full
	g.last = dq - 1
	if !g.opt.Full {
		for g.last >= 0 && tr.Provided[g.last+1] {
			g.last--
		}
	}
	return true
}

// deferred reports whether the step is only queued for the prefill.
func (g *Gen) deferred() bool { return g.allProvided && !g.opt.StepwisePrompts }

// finish is the part of the step after the transformer (or its deferral):
// the cache update of process_transformer_output and the output gather.
func (g *Gen) finish() {
	CT, dq, tgt := g.CT, g.m.Cfg.DepQ, g.tgt
	tr := &g.trace
	tr.Deferred = g.deferred()
	for k := 0; k < g.K; k++ {
		g.provided[k*CT+g.in] = false
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
	if g.offset > g.maxDelay {
		for k := 0; k <= dq; k++ {
			g.out[k] = g.cache[k*CT+(g.offset-g.maxDelay+g.delays[k])%CT]
		}
		g.ok = true
		tr.Output = g.out
	}
	g.offset++
	g.emb = nil
	if g.opt.Trace != nil {
		g.opt.Trace(tr)
	}
}

// sampleText decides the text token from the downloaded text logits.
func (g *Gen) sampleText() {
	tr := &g.trace
	g.stats.TextHead = true
	g.stats.WeightBytes += g.m.TextLinear.Bytes()
	tr.TextLogits = g.textLogits
	if tr.Provided[0] {
		g.sampled[0] = ops.Argmax(g.textLogits)
	} else {
		g.sampled[0] = g.sampler.Sample(g.textLogits, g.opt.UseSampling, g.opt.TempText, g.opt.TopKText, g.rng)
	}
}

// prevText is the token depformer step 0 is fed: the text token decided
// (or provided) this step.
func (g *Gen) prevText() int {
	if g.trace.Provided[0] {
		return g.cache[g.tgt]
	}
	return g.sampled[0]
}

// sampleAudio decides stream j+1's token from depformer step j's logits
// and returns the token step j+1 is fed.
func (g *Gen) sampleAudio(j int) int {
	k := j + 1
	tr := &g.trace
	logits := g.audioLogits[j]
	g.stats.WeightBytes += g.m.Dep.StepBytes(j)
	tr.AudioLogits[j] = logits
	if tr.Provided[k] {
		g.sampled[k] = ops.Argmax(logits)
		return g.cache[k*g.CT+g.tgt]
	}
	g.sampled[k] = g.sampler.Sample(logits, g.opt.UseSampling, g.opt.Temp, g.opt.TopK, g.rng)
	return g.sampled[k]
}

// Flush runs the deferred positions through the temporal transformer as one
// causal prefill (each position sees the KV ring as after its own write,
// exactly as step-by-step), without out_norm, text head or depformer, whose
// outputs would all be discarded. Engine.Step does this in the same pass as
// the conversation's next step.
func (g *Gen) Flush() {
	if g.npending == 0 {
		return
	}
	g.e.flush(g)
}

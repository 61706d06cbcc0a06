package infer

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/prompts"
	"github.com/pp-offline/pp-offline/voices"
)

// Item is one conversation of a job: its inputs and sampling settings, as
// the main command's per-run flags give them, and whatever the caller
// attaches (output paths, a manifest line) in Tag.
type Item struct {
	InputWAV    string
	VoicePrompt string // resolved path: .pt = saved embeddings, else audio
	TextPrompt  string // "" = no text prompt

	Greedy              bool
	TempAudio, TempText float64
	TopKAudio, TopKText int
	Seed                int64

	Tag any
}

// ItemResult is what became of one item: its Result, or the error that
// failed it alone.
type ItemResult struct {
	Item   *Item
	Result *Result
	Err    error
}

// ItemOf is the item of a single-run Options.
func ItemOf(o Options) *Item {
	return &Item{InputWAV: o.InputWAV, VoicePrompt: o.VoicePrompt, TextPrompt: o.TextPrompt, Greedy: o.Greedy,
		TempAudio: o.TempAudio, TempText: o.TempText, TopKAudio: o.TopKAudio, TopKText: o.TopKText, Seed: o.Seed}
}

// Items is a queue over a list, for RunItems.
func Items(items ...*Item) func() (*Item, bool) {
	return func() (*Item, bool) {
		if len(items) == 0 {
			return nil, false
		}
		it := items[0]
		items = items[1:]
		return it, true
	}
}

// conv is one conversation in flight.
type conv struct {
	item *Item
	in   *inputs
	gen  *lm.Gen
	enc  *mimi.Encoder
	dec  *mimi.Decoder
	f    int // next frame
	n    int // frames
	pcm  []float32
	res  *Result
}

// inputs are an item's inputs, read and checked before it joins.
type inputs struct {
	user       []float32
	sys        lm.SystemPrompt
	voiceAudio []float32
}

// prepare reads and checks an item's inputs (nothing of the models is
// needed: a bad input costs nothing).
func prepare(ctx context.Context, it *Item, cfg *config.Config, tok *prompts.Tokenizer, tokPath string) (*inputs, error) {
	in := &inputs{}
	var err error
	if in.user, err = audio.LoadMonoContext(ctx, it.InputWAV, cfg.Mimi.SampleRate); err != nil {
		return nil, err
	}
	if len(in.user) == 0 {
		return nil, fmt.Errorf("%s: no audio samples", it.InputWAV)
	}
	if err := finiteAudio(it.InputWAV, in.user, cfg.Mimi.SampleRate); err != nil {
		return nil, err
	}
	if it.TextPrompt != "" {
		in.sys.TextIDs = tok.Encode(prompts.WrapWithSystemTags(it.TextPrompt))
	}
	for _, id := range in.sys.TextIDs {
		if id >= cfg.TextCard {
			return nil, fmt.Errorf("%s: token id %d of the text prompt is outside the model's text vocabulary (%d): tokenizer and model do not match", tokPath, id, cfg.TextCard)
		}
	}
	if voices.IsEmbeddings(it.VoicePrompt) {
		// Bounded before anything is allocated: a voice prompt is at most
		// the model's context of steps or 4096 (5.5 minutes), whichever is
		// more (its width is checked against the loaded model, see start).
		p, err := voices.LoadPTLimits(it.VoicePrompt, voices.Limits{MaxRows: max(cfg.Context, 4096), Finite: true})
		if err != nil {
			return nil, err
		}
		in.sys.VoiceEmbeddings, in.sys.VoiceCache = p.Embeddings, p.Cache
	} else if in.voiceAudio, err = loadVoiceAudio(ctx, it.VoicePrompt, cfg.Mimi.SampleRate); err != nil {
		return nil, err
	}
	return in, nil
}

// promptSteps is the number of LM positions of the item's prompt phases.
func (in *inputs) promptSteps(cfg *config.Config, frame int) int {
	voice := len(in.sys.VoiceEmbeddings)
	if in.voiceAudio != nil {
		voice = (len(in.voiceAudio) + frame - 1) / frame
	}
	return voice + len(in.sys.TextIDs) + 2*int(0.5*cfg.Mimi.FrameRate) + 1
}

func fileSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// finiteAudio refuses audio holding NaN or infinite samples (a float WAV
// can): the codec would turn them into garbage frames with no error. An
// unattended job wants the item failed, loudly, rather than an output that
// looks fine.
func finiteAudio(path string, x []float32, rate int) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: sample %d (at %.3f s) is %v: not usable audio", path, i, float64(i)/float64(rate), v)
		}
	}
	return nil
}

// RunItems is the offline job over many conversations: it loads the models
// once and runs every item next yields, up to o.BatchSize (default 1)
// conversations in lockstep — each LM step and each codec transformer pass
// reads the weights once for all of them. Items join as slots free up
// (their prompt phases run as prefills in the next pass) and leave when
// their input ends, so inputs of different lengths stream through one
// batch. Every item's outputs are bit-identical to a run of it alone,
// whatever the batch size, its slot or its neighbours.
//
// done is called once per item, in the order items finish, with its
// Result or the error that failed it alone (a bad input, a voice of the
// wrong width); the others go on. RunItems returns an error only for what
// stops the whole job: the models failing to load, an offload error, or
// ctx being cancelled (ctx.Err(), checked before every step), after which
// items in flight get no call.
func RunItems(ctx context.Context, o Options, next func() (*Item, bool), done func(ItemResult)) (err error) {
	// A mapped checkpoint truncated under the job faults on the next read
	// of a page past its end: on this goroutine that is a panic turned into
	// an error (CheckIntact before every step reports the common case
	// before any read).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(*cuda.Failure); ok {
				err = f // a device failure inside an op (see deviceFailure)
				return
			}
			// A fault with SetPanicOnFault is a runtime.Error with an Addr
			// method (a plain nil dereference has none).
			if re, ok := r.(interface {
				runtime.Error
				Addr() uintptr
			}); ok {
				err = fmt.Errorf("a memory-mapped model file changed under the job (%v at %#x): stopped", re, re.Addr())
				return
			}
			panic(r)
		}
	}()
	o = o.withDefaults()
	cfg := o.Config
	B := max(1, o.BatchSize)
	tok, err := prompts.Load(o.Tokenizer)
	if err != nil {
		return err
	}
	// The first batch's inputs are read before the models load: when none
	// is usable, nothing is loaded.
	type ready struct {
		it *Item
		in *inputs
	}
	var queue []ready
	exhausted := false
	pull := func() bool {
		for !exhausted {
			it, ok := next()
			if !ok {
				exhausted = true
				break
			}
			in, err := prepare(ctx, it, cfg, tok, o.Tokenizer)
			if err != nil {
				if ctx.Err() != nil {
					return false
				}
				done(ItemResult{Item: it, Err: err})
				continue
			}
			queue = append(queue, ready{it, in})
			return true
		}
		return false
	}
	for len(queue) < B && pull() {
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(queue) == 0 {
		return nil
	}
	// The memory the first batch needs, before anything loads.
	frame := cfg.Mimi.FrameSize()
	positions, prefill := 0, 0
	for _, r := range queue {
		p := r.in.promptSteps(cfg, frame)
		positions = max(positions, p+(len(r.in.user)+frame-1)/frame)
		prefill += p
	}
	est := EstimateMemory(cfg, B, positions, prefill)
	est.Mapped = fileSize(o.MoshiWeight) + fileSize(o.MimiWeight)
	blocks, _ := quantSizes(o.Weights, checkpointSpecs(o.MoshiWeight)) // --weights: the blocks are new RAM
	est.Other += blocks
	if o.Device == "cuda" {
		// The KV rings and activations live in device memory (the device's
		// size check, or the offload plan, accounts for them).
		est.KV, est.Activations = 0, 0
	}
	if err := checkMemory(est, o.Log, "use a smaller --batch-size, quantized weights or --cpu-offload with a GPU"); err != nil {
		return err
	}

	be, err := newBackend(o)
	if err != nil {
		return err
	}
	defer be.Close()
	codec, model, err := loadModels(o)
	if err != nil {
		return err
	}
	defer codec.Close()
	codec.SetBackend(be)
	// After the weights: a config that does not fit them is reported first.
	if n := tok.VocabSize(); n != cfg.TextCard {
		return fmt.Errorf("%s: the tokenizer has %d pieces but the model %s has text_card %d: tokenizer and model do not match", o.Tokenizer, n, o.MoshiWeight, cfg.TextCard)
	}
	var placed *lm.Placed
	if o.Device == "sim" {
		if placed, err = lm.NewSim(model, o.Offload); err != nil {
			return err
		}
		defer placed.Close()
		for _, line := range placed.Summary() {
			o.Log.Infof("%s", line)
		}
	}
	if o.Device == "cuda" {
		if placed, err = placeOnGPU(be, model, o.Log); err != nil {
			return err
		}
		if placed != nil {
			defer placed.Close()
		}
	}
	eng := lm.NewEngine(model, be, weightsOf(placed))
	eng.SetContext(ctx)
	batch := codec.NewBatch()
	frame = codec.FrameSize() // the codec's geometry (the estimate used the config's rate ratio)
	nq := cfg.Mimi.NumCodebooks

	start := func(r ready) (c *conv, err error) {
		it, in := r.it, r.in
		if in.sys.VoiceEmbeddings != nil {
			// Checked against the loaded model: a config that does not fit
			// the weights is reported first, as such.
			if err := checkVoiceEmbeddings(it.VoicePrompt, in.sys, &cfg.LM); err != nil {
				return nil, err
			}
		}
		c = &conv{item: it, in: in, enc: codec.NewEncoder(), dec: codec.NewDecoder()}
		c.gen = eng.NewGen(lm.GenOptions{
			UseSampling:     !it.Greedy,
			Temp:            float32(it.TempAudio),
			TempText:        float32(it.TempText),
			TopK:            it.TopKAudio,
			TopKText:        it.TopKText,
			Seed:            uint64(it.Seed),
			FrameRate:       cfg.Mimi.FrameRate,
			StepwisePrompts: o.StepwisePrompts,
		})
		if in.voiceAudio != nil {
			progress(o, "encoding the voice prompt")
			if in.sys.VoiceFrames, err = encodeAll(ctx, c.enc, in.voiceAudio, frame); err != nil {
				return nil, err
			}
			c.enc.Reset()
		}
		progress(o, fmt.Sprintf("prompt phases (%d text tokens)", len(in.sys.TextIDs)))
		if p := in.promptSteps(cfg, frame); p >= cfg.Context {
			o.Log.Infof("warning: %s: the prompt phases (%d steps: voice prompt, text prompt, silences) are longer than the model's context (%d): the conversation starts without their beginning", it.VoicePrompt, p, cfg.Context)
		}
		// Queued, not run: the prefill joins the batch's next pass.
		if err := c.gen.QueueSystemPrompts(in.sys); err != nil {
			return nil, fmt.Errorf("%s: %v", it.VoicePrompt, err)
		}
		c.n = (len(in.user) + frame - 1) / frame
		c.res = &Result{SampleRate: cfg.Mimi.SampleRate, FrameRate: cfg.Mimi.FrameRate}
		c.pcm = make([]float32, 0, c.n*frame)
		if o.Progress != nil {
			o.Progress.Start(c.n, float64(frame)/float64(cfg.Mimi.SampleRate))
		}
		return c, nil
	}

	var (
		active []*conv
		gens   []*lm.Gen
		ins    []lm.Input
		encs   []*mimi.Encoder
		pcms   [][]float32
		codes  [][]int
		decs   []*mimi.Decoder
		outs   [][]int
		dpcm   [][]float32
		owners []*conv
	)
	bufs := make([][]float32, 0, B)
	for {
		for len(active) < B && (len(queue) > 0 || pull()) {
			r := queue[0]
			queue = queue[1:]
			c, err := start(r)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				done(ItemResult{Item: r.it, Err: err})
				continue
			}
			active = append(active, c)
		}
		if len(active) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := model.CheckFile(); err != nil {
			return err
		}
		if err := codec.CheckFile(); err != nil {
			return err
		}
		gens, ins, encs, pcms = gens[:0], ins[:0], encs[:0], pcms[:0]
		for len(bufs) < len(active) {
			bufs = append(bufs, make([]float32, frame))
		}
		for len(codes) < len(active) {
			codes = append(codes, nil)
		}
		for i, c := range active {
			buf := bufs[i]
			clear(buf)
			copy(buf, c.in.user[c.f*frame:min((c.f+1)*frame, len(c.in.user))])
			encs, pcms = append(encs, c.enc), append(pcms, buf)
			gens = append(gens, c.gen)
		}
		batch.Encode(encs, pcms, codes)
		for i := range active {
			ins = append(ins, lm.Input{User: codes[i]})
		}
		if err := eng.Step(gens, ins); err != nil {
			return err
		}
		if err := eng.Err(); err != nil {
			return err
		}
		decs, outs, owners = decs[:0], outs[:0], owners[:0]
		for _, c := range active {
			if out, ok := c.gen.Output(); ok {
				decs, outs, owners = append(decs, c.dec), append(outs, out[1:1+nq]), append(owners, c)
				c.res.TextTokens = append(c.res.TextTokens, out[0])
				c.res.Pieces = append(c.res.Pieces, tok.RenderToken(out[0]))
			}
		}
		for len(dpcm) < len(decs) {
			dpcm = append(dpcm, nil)
		}
		batch.Decode(decs, outs, dpcm)
		for i, c := range owners {
			c.pcm = append(c.pcm, dpcm[i]...)
		}
		kept := active[:0]
		for _, c := range active {
			c.f++
			if o.Progress != nil {
				o.Progress.Frame(c.f)
			}
			if c.f < c.n {
				kept = append(kept, c)
				continue
			}
			done(c.finish())
		}
		clear(active[len(kept):])
		active = kept
	}
	if placed != nil {
		line, err := placed.Finish()
		if err != nil {
			return err
		}
		o.Log.Infof("%s", line)
	}
	return nil
}

// finish assembles a conversation's result once its input has ended.
func (c *conv) finish() ItemResult {
	r := ItemResult{Item: c.item}
	if len(c.res.Pieces) == 0 {
		r.Err = fmt.Errorf("%s: no audio frames were generated (input too short)", c.item.InputWAV)
		return r
	}
	n := len(c.in.user)
	pcm := c.pcm
	// Trim or zero-pad to the input length, as offline.py does.
	if len(pcm) > n {
		pcm = pcm[:n]
	}
	for len(pcm) < n {
		pcm = append(pcm, 0)
	}
	c.res.PCM = pcm
	r.Result = c.res
	return r
}

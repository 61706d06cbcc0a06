package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"time"

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

// item is one Item in flight: its session member and what it collects.
type item struct {
	Conversation
	it  *Item
	in  *inputs
	n   int // frames
	pcm []float32
	res *Result
}

// inputs are an item's inputs, read and checked before it joins.
type inputs struct {
	user       []float32
	sys        lm.SystemPrompt
	voiceAudio []float32
}

// prepare reads and checks an item's inputs (nothing of the models is
// needed: a bad input costs nothing).
func prepare(ctx context.Context, it *Item, cfg *config.Config, tok *prompts.Tokenizer, tokPath string, lim audio.Limits) (*inputs, error) {
	in := &inputs{}
	var err error
	if in.user, err = audio.LoadMonoLimits(ctx, it.InputWAV, cfg.Mimi.SampleRate, lim); err != nil {
		return nil, err
	}
	if err := UsableAudio(it.InputWAV, in.user, cfg.Mimi.SampleRate); err != nil {
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
		p, err := voices.LoadPTLimits(it.VoicePrompt, voices.Limits{MaxRows: voices.RunRows(cfg.Context), Finite: true})
		if err != nil {
			return nil, err
		}
		in.sys.VoiceEmbeddings, in.sys.VoiceCache = p.Embeddings, p.Cache
	} else if in.voiceAudio, err = loadVoiceAudio(ctx, it.VoicePrompt, cfg.Mimi.SampleRate, lim); err != nil {
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

// UsableAudio refuses an input with no samples, or with a NaN or infinite
// one (FiniteAudio): the main job's input and codec encode's.
func UsableAudio(path string, x []float32, rate int) error {
	if len(x) == 0 {
		return fmt.Errorf("%s: no audio samples", path)
	}
	return FiniteAudio(path, x, rate)
}

// FiniteAudio refuses audio holding NaN or infinite samples (a float WAV
// can): the codec would turn them into garbage frames with no error. An
// unattended job wants the item failed, loudly, rather than an output that
// looks fine.
func FiniteAudio(path string, x []float32, rate int) error {
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
// (their prompt phases run as prefills in the next pass, or are restored
// from the job's prompt cache when an earlier item had the same voice and
// text prompt: Options.PromptCache) and leave when their input ends, so
// inputs of different lengths stream through one batch. Every item's outputs are bit-identical to a run of it alone,
// whatever the batch size, its slot or its neighbours.
//
// done is called once per item, in the order items finish, with its
// Result or the error that failed it alone (a bad input, a voice of the
// wrong width); the others go on. RunItems returns an error only for what
// stops the whole job: the models failing to load, an offload error, or
// ctx being cancelled (ctx.Err(), checked before every step), after which
// items in flight get no call.
func RunItems(ctx context.Context, o Options, next func() (*Item, bool), done func(ItemResult)) error {
	return RunItemsGraceful(ctx, o, Graceful{}, next, done)
}

// Graceful lets a caller stop a RunItems job without losing the
// conversations in flight (the batch command's first SIGINT/SIGTERM).
type Graceful struct {
	// Stop, once closed, admits no more items: those read but not started
	// get no done call; those in flight run to their end (or see Finish).
	// nil: never.
	Stop <-chan struct{}
	// Finish is asked once, when Stop is seen with items in flight
	// (inFlight of them): frames is the most frames any of them has left,
	// step the mean time of the last steps (0 when none was timed yet).
	// true lets them run to their end; false stops the job at once
	// (ErrStopped; they get no done call). nil: they finish. A hard
	// deadline is the caller's: cancel ctx.
	Finish func(inFlight, frames int, step time.Duration) bool
}

// ErrStopped is RunItemsGraceful's error when Graceful.Stop ended the job
// before every item ran.
var ErrStopped = errors.New("stopped before every item ran")

// RunItemsGraceful is RunItems that stops admitting items once g.Stop is
// closed and returns ErrStopped when the items in flight are done (or at
// once, when g.Finish says they cannot finish). Without a stop it is
// RunItems, step for step.
func RunItemsGraceful(ctx context.Context, o Options, g Graceful, next func() (*Item, bool), done func(ItemResult)) (err error) {
	// A mapped checkpoint truncated under the job faults on the next read
	// of a page past its end: on this goroutine that is a panic turned into
	// an error (CheckIntact before every step reports the common case
	// before any read).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer jobFailure(&err)
	o = o.withDefaults()
	tok, err := prompts.Load(o.Tokenizer)
	if err != nil {
		return err
	}
	j := &itemsRun{ctx: ctx, o: o, cfg: o.Config, B: max(1, o.BatchSize), tok: tok, next: next, done: done, g: g}
	j.inputLimits = inputLimits(j.B)
	j.prompts = openPromptCache(o)
	// The first batch's inputs are read before the models load: when none
	// is usable, nothing is loaded.
	for len(j.queue) < j.B && !j.stopRequested() && j.pull() {
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.stopRequested() {
		return ErrStopped
	}
	if len(j.queue) == 0 {
		return nil
	}
	if err := j.open(); err != nil {
		return err
	}
	defer j.close()
	return j.run()
}

// jobFailure turns what a job's goroutine may panic with into its error:
// a device failure inside an op (see deviceFailure) or a fault on a
// memory-mapped page (SetPanicOnFault: a runtime.Error with an Addr
// method; a plain nil dereference has none, and panics on).
func jobFailure(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(*cuda.Failure); ok {
		*err = f
		return
	}
	if re, ok := r.(interface {
		runtime.Error
		Addr() uintptr
	}); ok {
		*err = fmt.Errorf("a memory-mapped model file changed under the job (%v at %#x): stopped", re, re.Addr())
		return
	}
	panic(r)
}

// itemsRun is one RunItems call: its queue of items read and checked, and once
// open its device, models and session.
type itemsRun struct {
	ctx  context.Context
	o    Options
	cfg  *config.Config
	B    int
	tok  *prompts.Tokenizer
	next func() (*Item, bool)
	done func(ItemResult)

	g        Graceful
	stopping bool            // g.Stop seen: no item joins any more
	steps    []time.Duration // the last steps' times, for g.Finish

	queue       []ready
	exhausted   bool
	inputLimits audio.Limits // what one item's audio may decode to

	prompts *promptCache // nil: off (Options.PromptCache < 0)

	d     *Device
	codec *mimi.Model
	model *lm.Model
	eng   *lm.Engine
	sess  *Session
	frame int
	spare []*lm.Gen // the generators of finished items, renewed for the next ones
}

// ready is an item whose inputs are read and checked.
type ready struct {
	it *Item
	in *inputs
}

// pull reads items until one is usable (queued: true) or none is left;
// a bad item fails alone, through done.
func (j *itemsRun) pull() bool {
	for !j.exhausted {
		it, ok := j.next()
		if !ok {
			j.exhausted = true
			break
		}
		in, err := prepare(j.ctx, it, j.cfg, j.tok, j.o.Tokenizer, j.inputLimits)
		if err != nil {
			if j.ctx.Err() != nil {
				return false
			}
			j.done(ItemResult{Item: it, Err: err})
			continue
		}
		j.queue = append(j.queue, ready{it, in})
		return true
	}
	return false
}

// open checks the memory the first batch needs, then opens the device,
// loads the models and starts the session.
func (j *itemsRun) open() error {
	o, cfg := j.o, j.cfg
	frame := cfg.Mimi.FrameSize()
	positions, prefill := 0, 0
	for _, r := range j.queue {
		p := r.in.promptSteps(cfg, frame)
		positions = max(positions, p+(len(r.in.user)+frame-1)/frame)
		prefill += p
	}
	dev, err := o.Device.Resolve(o.Log)
	if err != nil {
		return err
	}
	est := EstimateMemory(cfg, j.B, positions, prefill, o.Device.KVElemBytes())
	est.Mapped = fileSize(o.MoshiWeight) + fileSize(o.MimiWeight)
	for _, r := range j.queue { // the first batch's decoded audio, held while it runs
		est.Other += 4 * int64(len(r.in.user)+len(r.in.voiceAudio))
	}
	var promptStates int64 // the prompt cache's states (on a GPU, in its memory)
	if j.prompts != nil && !(j.exhausted && len(j.queue) <= 1) {
		p := 0
		for _, r := range j.queue {
			p = max(p, r.in.promptSteps(cfg, frame))
		}
		promptStates = j.prompts.estimate(cfg, p, o.Device.KVElemBytes())
		est.KV += promptStates
	}
	blocks, _ := quantSizes(o.Quantize, checkpointSpecs(o.MoshiWeight)) // --weights: the blocks are new RAM
	est.Other += blocks
	if dev.Kind() == DeviceCUDA {
		// The KV rings and activations live in device memory (the device's
		// size check, or the offload plan, accounts for them).
		est.KV, est.Activations = 0, 0
	}
	if err := checkMemory(est, o.Log, "use a smaller --batch-size, quantized weights or --cpu-offload with a GPU"); err != nil {
		return err
	}
	if j.d, err = OpenDevice(dev, JobShape{Config: cfg, BatchSize: j.B, MoshiWeight: o.MoshiWeight, MimiWeight: o.MimiWeight, Quantize: o.Quantize, PromptStates: promptStates}, o.Log); err != nil {
		return err
	}
	if j.codec, j.model, err = loadModels(o, j.d); err != nil {
		return err
	}
	// After the weights: a config that does not fit them is reported first.
	if n := j.tok.VocabSize(); n != cfg.TextCard {
		return fmt.Errorf("%s: the tokenizer has %d pieces but the model %s has text_card %d: tokenizer and model do not match", o.Tokenizer, n, o.MoshiWeight, cfg.TextCard)
	}
	w, err := j.d.Place(j.model, j.B)
	if err != nil {
		return err
	}
	j.eng = lm.NewEngine(j.model, j.d.Backend(), w)
	j.eng.SetContext(j.ctx)
	j.sess = NewSession(j.eng, j.codec)
	j.frame = j.codec.FrameSize() // the codec's geometry (the estimate used the config's rate ratio)
	return nil
}

func (j *itemsRun) close() {
	if j.codec != nil {
		j.codec.Close()
	}
	if j.model != nil {
		j.model.Close()
	}
	if j.d != nil {
		j.d.Close()
	}
}

// start makes an item's conversation: its generator with the prompt
// phases queued (their prefill joins the session's next pass), its input
// and its output collected into the item's result.
func (j *itemsRun) start(r ready) (c *item, err error) {
	o, cfg, it, in, frame := j.o, j.cfg, r.it, r.in, j.frame
	if in.sys.VoiceEmbeddings != nil {
		// Checked against the loaded model: a config that does not fit
		// the weights is reported first, as such.
		if err := checkVoiceEmbeddings(it.VoicePrompt, in.sys, &cfg.LM); err != nil {
			return nil, err
		}
	}
	opt := lm.GenOptions{
		UseSampling:     !it.Greedy,
		Temp:            float32(it.TempAudio),
		TempText:        float32(it.TempText),
		TopK:            it.TopKAudio,
		TopKText:        it.TopKText,
		Seed:            uint64(it.Seed),
		FrameRate:       cfg.Mimi.FrameRate,
		StepwisePrompts: o.StepwisePrompts,
	}
	var gen *lm.Gen
	if k := len(j.spare); k > 0 {
		// A finished item's rings, already faulted in: renewed, not made.
		gen, j.spare = j.spare[k-1], j.spare[:k-1]
		gen.Renew(opt)
	} else {
		gen = j.eng.NewGen(opt)
	}
	n := (len(in.user) + frame - 1) / frame
	if err := j.prompt(gen, it, in, n); err != nil {
		j.spare = append(j.spare, gen)
		return nil, err
	}
	gen.Reserve(n) // the KV rings at their final size: never grown (copied) mid-conversation
	c = &item{it: it, in: in, n: n,
		res: &Result{SampleRate: cfg.Mimi.SampleRate, FrameRate: cfg.Mimi.FrameRate},
		pcm: make([]float32, 0, n*frame)}
	c.Conversation = Conversation{Gen: gen, Frames: n,
		Audio: func(f int, dst []float32) { copy(dst, in.user[f*frame:min((f+1)*frame, len(in.user))]) },
		Output: func(text int, pcm []float32) {
			c.res.TextTokens = append(c.res.TextTokens, text)
			c.res.Pieces = append(c.res.Pieces, j.tok.RenderToken(text))
			c.pcm = append(c.pcm, pcm...)
		}}
	if o.Progress != nil {
		o.Progress.Start(c.n, float64(frame)/float64(cfg.Mimi.SampleRate))
	}
	return c, nil
}

// prompt puts gen where the item's prompt phases leave it: restored from
// the prompt cache when a conversation with the same prompts ran them
// (nothing is encoded or computed), else run. A state that later items may
// reuse is computed at once (its prefill alone, then copied into the
// cache); otherwise the phases stay queued and their prefill joins the
// session's next pass, as without a cache (a job of one item).
func (j *itemsRun) prompt(gen *lm.Gen, it *Item, in *inputs, frames int) error {
	o, cfg, frame := j.o, j.cfg, j.frame
	var key promptKey
	if j.prompts != nil {
		key = promptKeyOf(in, o.StepwisePrompts, cfg.Mimi.FrameRate)
		if snap := j.prompts.get(key); snap != nil {
			progress(o, fmt.Sprintf("prompt phases (%d text tokens): from the prompt cache", len(in.sys.TextIDs)))
			j.contextWarning(it, in)
			// The rings at their final size first: the restore copies
			// the prompt's positions into them (one allocation, not two).
			gen.Reserve(snap.Offset() + frames)
			gen.Restore(snap)
			return nil
		}
	}
	if in.voiceAudio != nil {
		progress(o, "encoding the voice prompt")
		var err error
		if in.sys.VoiceFrames, err = encodeAll(j.ctx, j.codec.NewEncoder(), in.voiceAudio, frame); err != nil {
			return err
		}
	}
	progress(o, fmt.Sprintf("prompt phases (%d text tokens)", len(in.sys.TextIDs)))
	j.contextWarning(it, in)
	if err := gen.QueueSystemPrompts(in.sys); err != nil {
		return fmt.Errorf("%s: %v", it.VoicePrompt, err)
	}
	// Another item may come: the one queued, or the next one read now
	// (a bad one fails through done, as it would a step later).
	// A checkpoint changed under the job is left to the check before the
	// next step, which stops the job.
	if j.prompts == nil || !(len(j.queue) > 0 || j.pull()) || j.model.CheckFile() != nil {
		return nil
	}
	snap := gen.Snapshot() // the prefill, alone
	if err := j.ctx.Err(); err != nil {
		return err
	}
	j.prompts.put(key, snap, snap.Bytes())
	return nil
}

// contextWarning says when an item's prompt phases do not fit the model's
// context.
func (j *itemsRun) contextWarning(it *Item, in *inputs) {
	if p := in.promptSteps(j.cfg, j.frame); p >= j.cfg.Context {
		j.o.Log.Infof("warning: %s: the prompt phases (%d steps: voice prompt, text prompt, silences) are longer than the model's context (%d): the conversation starts without their beginning", it.VoicePrompt, p, j.cfg.Context)
	}
}

// run steps the session until every item has run: items join as members
// leave (up to B at once) and are done when their input has ended.
func (j *itemsRun) run() error {
	active := map[*Conversation]*item{}
	var members []*Conversation
	for {
		if !j.stopping && j.stopRequested() {
			j.stopping = true
			if len(active) > 0 && j.g.Finish != nil && !j.g.Finish(len(active), framesLeft(active), j.meanStep()) {
				return ErrStopped
			}
		}
		for !j.stopping && j.sess.Len() < j.B && (len(j.queue) > 0 || j.pull()) {
			r := j.queue[0]
			j.queue = j.queue[1:]
			c, err := j.start(r)
			if err != nil {
				if j.ctx.Err() != nil {
					return j.ctx.Err()
				}
				j.done(ItemResult{Item: r.it, Err: err})
				continue
			}
			active[&c.Conversation] = c
			j.sess.Join(&c.Conversation)
		}
		if j.sess.Len() == 0 {
			if j.stopping {
				return ErrStopped
			}
			break
		}
		if err := j.ctx.Err(); err != nil {
			return err
		}
		if err := j.model.CheckFile(); err != nil {
			return err
		}
		if err := j.codec.CheckFile(); err != nil {
			return err
		}
		members = append(members[:0], j.sess.members...)
		t0 := time.Now()
		left, _, err := j.sess.Step()
		if err != nil {
			return err
		}
		if j.g.Stop != nil {
			j.steps = append(j.steps, time.Since(t0))
			if len(j.steps) > 2*codecRows { // whole codec chunks: their steps code the frames of the others
				j.steps = j.steps[1:]
			}
		}
		if j.o.Progress != nil {
			for _, m := range members {
				j.o.Progress.Frame(m.Done())
			}
		}
		for _, m := range left {
			c := active[m]
			delete(active, m)
			j.done(c.finish())
			j.spare = append(j.spare, m.Gen)
		}
	}
	if j.prompts != nil && j.prompts.hits+len(j.prompts.entries) > 0 {
		j.o.Log.Infof("%s", j.prompts)
	}
	line, err := j.d.Finish()
	if err != nil {
		return err
	}
	if line != "" {
		j.o.Log.Infof("%s", line)
	}
	return nil
}

// stopRequested reports whether g.Stop is closed.
func (j *itemsRun) stopRequested() bool {
	if j.g.Stop == nil {
		return false
	}
	select {
	case <-j.g.Stop:
		return true
	default:
		return false
	}
}

// meanStep is the mean time of the last steps (0: none timed).
func (j *itemsRun) meanStep() time.Duration {
	if len(j.steps) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range j.steps {
		sum += d
	}
	return sum / time.Duration(len(j.steps))
}

// framesLeft is the most frames an item in flight has still to run.
func framesLeft(active map[*Conversation]*item) int {
	n := 0
	for m, c := range active {
		n = max(n, c.n-m.Done())
	}
	return n
}

// finish assembles an item's result once its input has ended.
func (c *item) finish() ItemResult {
	r := ItemResult{Item: c.it}
	if len(c.res.Pieces) == 0 {
		r.Err = fmt.Errorf("%s: no audio frames were generated (input too short)", c.it.InputWAV)
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

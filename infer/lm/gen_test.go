package lm

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// rec is one traced step.
type rec struct {
	offset            int
	fromEmb, deferred bool
	input, next, out  []int
	sampled           []int
	provided          []bool
}

type runResult struct {
	recs    []rec
	outs    [][]int // what Step returned for each user frame (nil: nothing)
	gen     *Gen
	prompts int // steps in the prompt phases
}

// run drives a Gen like offline.py: system prompts, then one Step per user frame.
func run(t *testing.T, m *Model, opt GenOptions, scenario string) *runResult {
	t.Helper()
	res := &runResult{}
	opt.Trace = func(s *StepTrace) {
		r := rec{offset: s.Offset, fromEmb: s.FromEmbeddings, deferred: s.Deferred,
			input: slices.Clone(s.Input), next: slices.Clone(s.Next), sampled: slices.Clone(s.Sampled),
			provided: slices.Clone(s.Provided)}
		if s.Output != nil {
			r.out = slices.Clone(s.Output)
		}
		res.recs = append(res.recs, r)
	}
	g := NewGen(m, testBE, opt)
	res.gen = g
	p := SystemPrompt{TextIDs: textPromptIDs(t, scenario)}
	if scenario == "run_wav" {
		p.VoiceFrames = codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors")
	} else {
		p.VoiceEmbeddings, p.VoiceCache = voicePT(t)
	}
	if err := g.StepSystemPrompts(p); err != nil {
		t.Fatal(err)
	}
	res.prompts = len(res.recs)
	for _, c := range codes(t, tiny+"expected/mimi/mimi_encode.safetensors") {
		out, ok := g.Step(c)
		if ok {
			res.outs = append(res.outs, slices.Clone(out))
		} else {
			res.outs = append(res.outs, nil)
		}
	}
	return res
}

// checkAgainst compares a greedy run's token stream with the reference's rows
// after the warmup (rows 3..).
func checkAgainst(t *testing.T, res *runResult, s *steps) {
	t.Helper()
	const first = 3
	if len(res.recs) != s.S-first {
		t.Fatalf("%d transformer steps, the reference ran %d after the warmup", len(res.recs), s.S-first)
	}
	users := 0
	for i, r := range res.recs {
		row := first + i
		if r.offset != s.Offset[row] || r.fromEmb != s.FromEmb[row] {
			t.Fatalf("row %d: offset %d emb %v, reference %d %v", row, r.offset, r.fromEmb, s.Offset[row], s.FromEmb[row])
		}
		if !slices.Equal(r.input, s.Input[row]) {
			t.Fatalf("row %d: input %v, reference %v", row, r.input, s.Input[row])
		}
		if !slices.Equal(r.provided, s.Provided[row]) {
			t.Fatalf("row %d: provided %v, reference %v", row, r.provided, s.Provided[row])
		}
		if !slices.Equal(r.next, s.Next[row]) {
			t.Fatalf("row %d: next tokens %v, reference %v", row, r.next, s.Next[row])
		}
		want := s.Output[row]
		if want[0] == -1 {
			if r.out != nil {
				t.Fatalf("row %d: output %v, reference none", row, r.out)
			}
		} else if !slices.Equal(r.out, want) {
			t.Fatalf("row %d: output %v, reference %v", row, r.out, want)
		}
		if s.Phase[row] == 5 {
			if !slices.Equal(res.outs[users], want) {
				t.Fatalf("user frame %d: Step returned %v, reference %v", users, res.outs[users], want)
			}
			users++
		}
	}
	if users != len(res.outs) {
		t.Fatalf("%d user steps in the trace, %d Step calls", users, len(res.outs))
	}
}

// Free-running greedy, the voice prompt from Mimi codes (run_wav): the whole
// token stream equals the reference, while the KV ring (context 48) wraps.
func TestFreeRunWAV(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	res := run(t, m, GenOptions{}, "run_wav")
	checkAgainst(t, res, loadSteps(t, "run_wav"))
	if st := res.gen.TransformerState(); st.Offset <= m.Cfg.Context {
		t.Fatalf("ring did not wrap: %d steps, context %d", st.Offset, m.Cfg.Context)
	}
	for _, r := range res.recs[:res.prompts] {
		if !r.deferred {
			t.Fatal("a prompt step was not deferred into the prefill")
		}
	}
}

// Free-running greedy with the .pt voice prompt (run_pt) and with the 8-step
// checkpoint (run_dep8, whose outputs are the same).
func TestFreeRunPT(t *testing.T) {
	res := run(t, tinyModel(t, "model.safetensors"), GenOptions{}, "run_pt")
	checkAgainst(t, res, loadSteps(t, "run_pt"))
}

func TestFreeRunDep8(t *testing.T) {
	res := run(t, tinyModel(t, "model-dep8.safetensors"), GenOptions{}, "run_dep8")
	checkAgainst(t, res, loadSteps(t, "run_dep8"))
}

// The reference's full work (text head and all 16 depformer steps on every
// step, prompts one step at a time) gives the same stream, and its argmaxes
// equal the reference's sampled tokens on every decision that is used.
func TestFreeRunFull(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	res := run(t, m, GenOptions{Full: true}, "run_wav")
	s := loadSteps(t, "run_wav")
	checkAgainst(t, res, s)
	used, discardedDiffer := 0, 0
	for i, r := range res.recs {
		row := 3 + i
		for k := range r.sampled {
			if r.sampled[k] == s.Sampled[row][k] {
				continue
			}
			if !s.Provided[row][k] {
				t.Errorf("row %d channel %d: sampled %d, reference %d", row, k, r.sampled[k], s.Sampled[row][k])
			} else {
				discardedDiffer++
			}
		}
		for k := range r.sampled {
			if !s.Provided[row][k] {
				used++
			}
		}
	}
	t.Logf("%d used decisions match; %d discarded argmaxes differ (reference margins down to 1.4e-4)", used, discardedDiffer)
}

// The prefill and the step-by-step prompt phases give identical token streams
// and KV caches equal within float tolerance; greedy and sampling.
func TestPrefillMatchesStepwise(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	for _, opt := range []GenOptions{{}, {UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, Seed: 7}} {
		for _, scenario := range []string{"run_wav", "run_pt"} {
			pre := runPromptsOnly(t, m, opt, scenario)
			o := opt
			o.StepwisePrompts = true
			step := runPromptsOnly(t, m, o, scenario)
			if pre.Pending() != 0 || step.Pending() != 0 {
				t.Fatal("pending positions after the system prompts")
			}
			if !slices.EqualFunc(pre.Cache(), step.Cache(), slices.Equal) || pre.Offset() != step.Offset() {
				t.Fatalf("%s: token caches differ: %v vs %v", scenario, pre.Cache(), step.Cache())
			}
			a, b := pre.TransformerState(), step.TransformerState()
			if a.Offset != b.Offset {
				t.Fatalf("state offsets %d vs %d", a.Offset, b.Offset)
			}
			var worst, scale float64
			for l := range a.Rings {
				if a.Rings[l].End != b.Rings[l].End {
					t.Fatalf("layer %d: ring end %d vs %d", l, a.Rings[l].End, b.Rings[l].End)
				}
				ak, av := cpu.KV(a.Rings[l])
				bk, bv := cpu.KV(b.Rings[l])
				for i := range ak {
					worst = math.Max(worst, math.Abs(float64(ak[i]-bk[i])))
					worst = math.Max(worst, math.Abs(float64(av[i]-bv[i])))
					scale = math.Max(scale, math.Abs(float64(bk[i])))
				}
			}
			if worst > 1e-5*scale {
				t.Fatalf("%s: KV caches differ by %g (scale %g)", scenario, worst, scale)
			}
			t.Logf("%s sampling=%v: KV max abs diff %g (max |K| %g)", scenario, opt.UseSampling, worst, scale)
			// And the runs continue identically.
			user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
			for i, c := range user {
				o1, ok1 := pre.Step(c)
				o1 = slices.Clone(o1)
				o2, ok2 := step.Step(c)
				if ok1 != ok2 || !slices.Equal(o1, o2) {
					t.Fatalf("%s frame %d: %v vs %v", scenario, i, o1, o2)
				}
			}
		}
	}
}

func runPromptsOnly(t *testing.T, m *Model, opt GenOptions, scenario string) *Gen {
	g := NewGen(m, testBE, opt)
	p := SystemPrompt{TextIDs: textPromptIDs(t, scenario)}
	if scenario == "run_wav" {
		p.VoiceFrames = codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors")
	} else {
		p.VoiceEmbeddings, p.VoiceCache = voicePT(t)
	}
	if err := g.StepSystemPrompts(p); err != nil {
		t.Fatal(err)
	}
	return g
}

// Sampling is deterministic per seed (also across a Reset), and the seed matters.
func TestSamplingDeterministic(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	opt := DefaultGenOptions()
	streams := func(seed uint64) [][]int {
		o := opt
		o.Seed = seed
		res := run(t, m, o, "run_pt")
		return res.outs
	}
	a, b, c := streams(1), streams(1), streams(2)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("same seed, different outputs")
	}
	if slices.EqualFunc(a, c, slices.Equal) {
		t.Fatal("different seeds, same outputs")
	}
	// A Reset reseeds: the same Gen replays the same stream.
	g := runPromptsOnly(t, m, opt, "run_pt")
	user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
	var first, second [][]int
	for _, u := range user {
		o, _ := g.Step(u)
		first = append(first, slices.Clone(o))
	}
	g.Reset()
	embs, cache := voicePT(t)
	if err := g.StepSystemPrompts(SystemPrompt{VoiceEmbeddings: embs, VoiceCache: cache, TextIDs: textPromptIDs(t, "run_pt")}); err != nil {
		t.Fatal(err)
	}
	for _, u := range user {
		o, _ := g.Step(u)
		second = append(second, slices.Clone(o))
	}
	if !slices.EqualFunc(first, second, slices.Equal) {
		t.Fatal("a reset Gen does not replay its stream")
	}
}

// Depformer steps 8..15 are skipped while the user stream is provided, and
// run when it is not; the text head is skipped when the text is forced.
func TestDepformerSkip(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	g := runPromptsOnly(t, m, GenOptions{}, "run_pt")
	user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
	g.Step(user[0])
	if s := g.Stats(); s.DepSteps != 1 || !s.TextHead || !s.Transformer || s.PrefillSteps != 0 {
		t.Fatalf("first user step (streams 2..8 forced by the silence): %+v", s)
	}
	g.Step(user[1])
	if s := g.Stats(); s.DepSteps != 8 || !s.TextHead || !s.Transformer {
		t.Fatalf("user step: %+v", s)
	}
	g.Step(nil) // the user stream generated too (its delayed streams were given the step before)
	if s := g.Stats(); s.DepSteps != 9 {
		t.Fatalf("generating user codebook 0 ran %d depformer steps", s.DepSteps)
	}
	g.Step(nil)
	if s := g.Stats(); s.DepSteps != 16 {
		t.Fatalf("generating the user stream ran %d depformer steps", s.DepSteps)
	}
	g.StepInput(Input{User: user[2], Agent: SilenceTokens[:]})
	g.StepInput(Input{User: user[3], Agent: SilenceTokens[:]})
	if s := g.Stats(); s.DepSteps != 0 || !s.TextHead || !s.Transformer {
		t.Fatalf("text-only step: %+v", s)
	}
	full := runPromptsOnly(t, m, GenOptions{Full: true}, "run_pt")
	full.Step(user[0])
	if s := full.Stats(); s.DepSteps != 16 {
		t.Fatalf("Full ran %d depformer steps", s.DepSteps)
	}
}

// An empty text prompt skips the text phase; the first call after a reset
// returns nothing without reaching the transformer.
func TestEmptyTextPromptAndFirstCall(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	var n int
	g := NewGen(m, testBE, GenOptions{Trace: func(*StepTrace) { n++ }})
	frames := codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors")
	if err := g.StepSystemPrompts(SystemPrompt{VoiceFrames: frames}); err != nil {
		t.Fatal(err)
	}
	if want := len(frames) - 1 + 2*g.SilenceSteps(); n != want || g.Offset() != want+1 {
		t.Fatalf("%d traced steps, offset %d; want %d, %d", n, g.Offset(), want, want+1)
	}
	g.Reset()
	n = 0
	if _, ok := g.Step(SineTokens[:]); ok || n != 0 || g.Offset() != 1 {
		t.Fatalf("first call after reset: ok %v, %d steps, offset %d", ok, n, g.Offset())
	}
}

// The per-frame hot path does not allocate.
func TestStepAllocs(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	for _, opt := range []GenOptions{{}, DefaultGenOptions()} {
		g := runPromptsOnly(t, m, opt, "run_pt")
		user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
		g.Step(user[0])
		i := 1
		allocs := testalloc.PerRun(t, 20, func() {
			g.Step(user[i%len(user)])
			i++
		})
		if allocs != 0 {
			t.Fatalf("sampling=%v: %v allocations per step", opt.UseSampling, allocs)
		}
	}
}

// The voice prompt from Mimi codes saves exactly the reference's .pt
// (embeddings within float tolerance, cache equal), and replaying that
// saved prompt continues identically.
func TestVoicePromptSaving(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	g := NewGen(m, testBE, GenOptions{})
	embs, cache, err := g.StepVoicePromptCodesSaving(codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	wantE, wantC := voicePT(t)
	if len(embs) != len(wantE) {
		t.Fatalf("%d embeddings, the .pt has %d", len(embs), len(wantE))
	}
	worst := 0.0
	for i := range embs {
		worst = math.Max(worst, relErr(embs[i], wantE[i]))
	}
	if worst > 1e-6 {
		t.Fatalf("embeddings rel err %g", worst)
	}
	if !slices.EqualFunc(cache, wantC, slices.Equal) {
		t.Fatalf("cache %v, the .pt has %v", cache, wantC)
	}
	t.Logf("embeddings rel err %g, cache equal", worst)
}

// cancelAt is the host weights, cancelling a context when layer `at` is
// acquired and counting the layers acquired.
type cancelAt struct {
	Weights
	at, acquired int
	cancel       func()
}

func (c *cancelAt) AcquireLayer(i int) *nn.Layer {
	c.acquired++
	if i == c.at {
		c.cancel()
	}
	return c.Weights.AcquireLayer(i)
}

// A cancelled context stops a step within a layer, a long prefill
// included: Step returns the context's error and no further layer is
// computed.
func TestStepCancelledWithinALayer(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelAt{Weights: m.HostWeights(), at: 0, cancel: cancel}
	e := NewEngine(m, testBE, w)
	e.SetContext(ctx)
	g := e.NewGen(GenOptions{})
	if err := g.QueueSystemPrompts(SystemPrompt{VoiceEmbeddings: nil, TextIDs: textPromptIDs(t, "run_pt")}); err != nil {
		t.Fatal(err)
	}
	if g.Pending() == 0 {
		t.Fatal("nothing queued")
	}
	user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
	err := e.Step([]*Gen{g}, []Input{{User: user[0]}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Step: %v, want context.Canceled", err)
	}
	if w.acquired != 1 {
		t.Fatalf("%d layers acquired after the cancel at layer 0", w.acquired)
	}
}

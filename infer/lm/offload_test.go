package lm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// The offload executor (Placed) drives the runtime for whole runs of the
// tiny model — prompts (prefill) and every user frame — at several plans,
// and must give bit-identical logits and tokens to the run on the model's
// own weights, within the device budget, each streamed unit crossing once
// per pass.

// traced is one step of a run: every token and the bits of every logit.
type traced struct {
	offset        int
	deferred      bool
	sampled, next []int
	out           []int
	text          []uint32
	audio         [][]uint32
	depSteps      int
	transformer   bool
}

func bitsOf(x []float32) []uint32 {
	if x == nil {
		return nil
	}
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

// runTraced runs a scenario (prompts, then every user frame) and records it.
func runTraced(t *testing.T, m *Model, opt GenOptions, scenario string, w ...Weights) ([]traced, *Gen) {
	t.Helper()
	var recs []traced
	var g *Gen
	opt.Trace = func(s *StepTrace) {
		r := traced{offset: s.Offset, deferred: s.Deferred, sampled: slices.Clone(s.Sampled), next: slices.Clone(s.Next),
			out: slices.Clone(s.Output), text: bitsOf(s.TextLogits)}
		for _, a := range s.AudioLogits {
			r.audio = append(r.audio, bitsOf(a))
		}
		st := g.Stats()
		r.depSteps, r.transformer = st.DepSteps, st.Transformer
		recs = append(recs, r)
	}
	var wt Weights
	if len(w) > 0 {
		wt = w[0]
	}
	g = NewEngine(m, runBE, wt).NewGen(opt)
	p := SystemPrompt{TextIDs: textPromptIDs(t, scenario)}
	if scenario == "run_wav" {
		p.VoiceFrames = codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors")
	} else {
		p.VoiceEmbeddings, p.VoiceCache = voicePT(t)
	}
	if err := g.StepSystemPrompts(p); err != nil {
		t.Fatal(err)
	}
	for _, c := range codes(t, tiny+"expected/mimi/mimi_encode.safetensors") {
		g.Step(c)
	}
	return recs, g
}

func sameRun(t *testing.T, got, want []traced) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d steps, the host run has %d", len(got), len(want))
	}
	for i := range got {
		a, b := got[i], want[i]
		if a.offset != b.offset || a.deferred != b.deferred || !slices.Equal(a.sampled, b.sampled) || !slices.Equal(a.next, b.next) || !slices.Equal(a.out, b.out) {
			t.Fatalf("step %d (offset %d): tokens differ from the host run:\n got %v %v\nwant %v %v", i, a.offset, a.sampled, a.out, b.sampled, b.out)
		}
		if !slices.Equal(a.text, b.text) || len(a.audio) != len(b.audio) {
			t.Fatalf("step %d (offset %d): text logits differ from the host run", i, a.offset)
		}
		for j := range a.audio {
			if !slices.Equal(a.audio[j], b.audio[j]) {
				t.Fatalf("step %d (offset %d): depformer step %d logits differ from the host run", i, a.offset, j)
			}
		}
	}
}

// testFigures make the device attractive for the tiny model (whose units
// are so small that with the default figures kernel launches would keep
// everything on the CPU): a very slow CPU, negligible launches.
func testFigures(t testing.TB) offload.Figures {
	fig := offload.DefaultFigures()
	if err := fig.Set("cpu_bandwidth=0.01,gpu_launch=0.001,sync=0.001", offload.FromDeclared, "test"); err != nil {
		t.Fatal(err)
	}
	return fig
}

const testWorkspace = 64 << 10

func tinyUnits(t testing.TB, m *Model, depSteps int) *offload.LM {
	u, err := Units(&m.Cfg, depSteps)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// placedFor starts a Placed for where on a device whose budget is exactly
// the plan's device total (no slack: any overuse fails).
func placedFor(t *testing.T, m *Model, units *offload.LM, fig offload.Figures, where []offload.Placement) *Placed {
	t.Helper()
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, 1<<40, 0)
	p.Workspace = testWorkspace
	plan, err := p.Evaluate(where)
	if err != nil {
		t.Fatal(err)
	}
	p.GPUBudget = plan.Memory.GPUTotal
	pl, err := NewPlaced(m, plan, offload.NewSimDevice(plan.Memory.GPUTotal))
	if err != nil {
		t.Fatal(err)
	}
	pl.rt.Verify = true
	t.Cleanup(func() { pl.Close() })
	return pl
}

// checkTimeline asserts, from the runtime's timeline of a whole run: the
// engine's invariants (Timeline.Check), the device peak within the budget
// and equal to the plan's device total, resident units loaded once and
// never transferred, CPU units never on the link, each streamed unit that
// computed in a pass transferred exactly once in that pass, units computed
// in execution order, one pass per transformer step or prefill, and the
// depformer steps computed per pass exactly those the generation ran.
func checkTimeline(t *testing.T, pl *Placed, recs []traced, prefills int) {
	t.Helper()
	tl := pl.Timeline()
	if err := tl.Check(); err != nil {
		t.Fatal(err)
	}
	plan := pl.Plan()
	if tl.PeakBytes > tl.Budget || tl.PeakBytes != plan.Memory.GPUTotal {
		t.Fatalf("device peak %d, budget %d, plan's device total %d", tl.PeakBytes, tl.Budget, plan.Memory.GPUTotal)
	}
	units := plan.Units()
	type key struct{ pass, unit int }
	xfer := map[key]int{}
	comp := map[key]bool{}
	loads := map[int]int{}
	lastUnit := map[int]int{}
	perPass := map[int][]int{}
	for _, e := range tl.Events {
		switch e.Kind {
		case offload.Load:
			loads[e.Unit]++
			if plan.Where[e.Unit] != offload.Resident {
				t.Fatalf("%s (%s) loaded", e.Name, plan.Where[e.Unit])
			}
		case offload.Transfer:
			xfer[key{e.Frame, e.Unit}]++
			if plan.Where[e.Unit] != offload.Streamed {
				t.Fatalf("%s (%s) transferred in pass %d", e.Name, plan.Where[e.Unit], e.Frame)
			}
		case offload.Compute:
			if e.Where != plan.Where[e.Unit] {
				t.Fatalf("%s computed %s, placed %s", e.Name, e.Where, plan.Where[e.Unit])
			}
			if l, ok := lastUnit[e.Frame]; ok && e.Unit <= l {
				t.Fatalf("pass %d: %s computed after unit %d", e.Frame, e.Name, l)
			}
			lastUnit[e.Frame] = e.Unit
			comp[key{e.Frame, e.Unit}] = true
			perPass[e.Frame] = append(perPass[e.Frame], e.Unit)
		}
	}
	for i, w := range plan.Where {
		if (w == offload.Resident) != (loads[i] == 1) || loads[i] > 1 {
			t.Fatalf("%s (%s) loaded %d times", units[i].Name, w, loads[i])
		}
	}
	for k, n := range xfer {
		if n != 1 {
			t.Fatalf("%s transferred %d times in pass %d", units[k.unit].Name, n, k.pass)
		}
	}
	for k := range comp {
		if plan.Where[k.unit] == offload.Streamed && xfer[k] != 1 {
			t.Fatalf("streamed %s computed in pass %d with %d transfers", units[k.unit].Name, k.pass, xfer[k])
		}
	}
	// Passes: the prefill(s), then one per step that reached the transformer.
	var steps []traced
	for _, r := range recs {
		if r.transformer {
			steps = append(steps, r)
		}
	}
	if pl.Passes() != prefills+len(steps) || len(perPass) != pl.Passes() {
		t.Fatalf("%d passes, %d with computes; want %d prefill(s) + %d steps", pl.Passes(), len(perPass), prefills, len(steps))
	}
	nL := pl.m.Cfg.NumLayers
	for f := 0; f < pl.Passes(); f++ {
		us := perPass[f]
		for i := 0; i < nL; i++ {
			if len(us) <= i || us[i] != i {
				t.Fatalf("pass %d computed %v: not every layer in order", f, us)
			}
		}
		deps := 0
		for _, u := range us[nL:] {
			if u > nL {
				deps++
			}
		}
		want := 0
		if f >= prefills {
			want = steps[f-prefills].depSteps
		}
		if deps != want {
			t.Fatalf("pass %d computed %d depformer steps, the generation ran %d", f, deps, want)
		}
	}
}

func allOf(n int, w offload.Placement) []offload.Placement {
	out := make([]offload.Placement, n)
	for i := range out {
		out[i] = w
	}
	return out
}

func TestPlacedRunsBitIdentical(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	units := tinyUnits(t, m, offload.DefaultDepSteps(&m.Cfg))
	n := len(units.Units)
	fig := testFigures(t)
	rng := rand.New(rand.NewPCG(1, 2))
	mixed := func() []offload.Placement {
		w := make([]offload.Placement, n)
		for i := range w {
			w[i] = offload.Placements[rng.IntN(3)]
		}
		return w
	}
	alternate := make([]offload.Placement, n)
	for i := range alternate {
		alternate[i] = []offload.Placement{offload.Streamed, offload.CPU, offload.Resident}[i%3]
	}
	sampling := DefaultGenOptions()
	sampling.Seed = 1234
	for _, sc := range []struct {
		name, scenario string
		opt            GenOptions
	}{
		{"greedy run_pt", "run_pt", GenOptions{}},
		{"greedy run_wav", "run_wav", GenOptions{}},
		{"sampling run_pt", "run_pt", sampling},
	} {
		want, _ := runTraced(t, m, sc.opt, sc.scenario)
		for _, pc := range []struct {
			name  string
			where []offload.Placement
		}{
			{"all resident", allOf(n, offload.Resident)},
			{"all streamed", allOf(n, offload.Streamed)},
			{"all cpu", allOf(n, offload.CPU)},
			{"alternating", alternate},
			{"mixed 1", mixed()},
			{"mixed 2", mixed()},
		} {
			t.Run(sc.name+"/"+pc.name, func(t *testing.T) {
				pl := placedFor(t, m, units, fig, pc.where)
				opt := sc.opt
				got, g := runTraced(t, m, opt, sc.scenario, pl)
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				sameRun(t, got, want)
				checkTimeline(t, pl, got, 1)
			})
		}
	}
}

// The planner's plans at budgets from everything to nothing, through
// newSim: outputs identical, budget kept; the 8-step checkpoint (its
// aliased and expanded tensors packed) and stepwise prompts too.
func TestSimBudgets(t *testing.T) {
	fig := testFigures(t)
	for _, file := range []string{"model.safetensors", "model-dep8.safetensors"} {
		m := tinyModel(t, file)
		units := tinyUnits(t, m, offload.DefaultDepSteps(&m.Cfg))
		p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, 1<<40, 0)
		p.Workspace = testWorkspace
		all, err := p.Evaluate(allOf(len(units.Units), offload.Resident))
		if err != nil {
			t.Fatal(err)
		}
		var maxUnit int64
		for _, u := range units.Units {
			maxUnit = max(maxUnit, u.Bytes)
		}
		fixed := all.Memory.GPUTotal - all.Memory.GPUResident // KV cache + workspace
		budgets := []struct {
			name   string
			budget int64
			check  func(*offload.Plan) error
		}{
			{"everything", all.Memory.GPUTotal, func(pl *offload.Plan) error {
				if pl.Count(offload.Resident) != len(pl.Where) {
					return fmt.Errorf("not all resident")
				}
				return nil
			}},
			{"half", fixed + 2*maxUnit + all.Memory.GPUResident/2, func(pl *offload.Plan) error {
				if pl.Count(offload.Resident) == 0 || pl.Count(offload.Resident) == len(pl.Where) {
					return fmt.Errorf("not a mix")
				}
				return nil
			}},
			{"streamed-heavy", fixed + 2*maxUnit + maxUnit/2, func(pl *offload.Plan) error {
				if pl.Count(offload.Streamed) < len(pl.Where)/2 {
					return fmt.Errorf("only %d streamed", pl.Count(offload.Streamed))
				}
				return nil
			}},
			{"nothing", 0, func(pl *offload.Plan) error {
				if pl.Count(offload.CPU) != len(pl.Where) || pl.Memory.GPUTotal != 0 {
					return fmt.Errorf("not all on the CPU")
				}
				return nil
			}},
		}
		sampling := DefaultGenOptions()
		sampling.Seed = 99
		for _, opt := range []GenOptions{{}, sampling, {StepwisePrompts: true}} {
			want, _ := runTraced(t, m, opt, "run_pt")
			for _, b := range budgets {
				t.Run(fmt.Sprintf("%s/%s/sampling=%v,stepwise=%v", file, b.name, opt.UseSampling, opt.StepwisePrompts), func(t *testing.T) {
					pl, err := newSim(m, simOptions{Memory: b.budget, Workspace: testWorkspace, Figures: &fig, Verify: true})
					if err != nil {
						t.Fatal(err)
					}
					defer pl.Close()
					if err := b.check(pl.Plan()); err != nil {
						t.Fatalf("plan %s at %d bytes: %v", pl.Plan().Summary(), b.budget, err)
					}
					o := opt
					got, g := runTraced(t, m, o, "run_pt", pl)
					if err := g.Err(); err != nil {
						t.Fatal(err)
					}
					sameRun(t, got, want)
					prefills := 1
					if opt.StepwisePrompts {
						prefills = 0
					}
					checkTimeline(t, pl, got, prefills)
					line, err := pl.Finish()
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%s\n%s", strings.Join(pl.Summary(), "\n"), line)
				})
			}
		}
	}
}

// Full generation runs all 16 depformer steps and the text head on every
// step: with a plan for 16 steps it is bit-identical too; with the default
// 8-step plan, step 8 has no unit: Gen.Err says so, and the outputs are
// still right (the host weights stand in).
func TestPlacedFullAndMissingSteps(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	fig := testFigures(t)
	opt := GenOptions{Full: true}
	want, _ := runTraced(t, m, opt, "run_pt")
	units := tinyUnits(t, m, m.Cfg.DepQ)
	where := make([]offload.Placement, len(units.Units))
	for i := range where {
		where[i] = offload.Placements[(i+1)%3]
	}
	pl := placedFor(t, m, units, fig, where)
	o := opt
	got, g := runTraced(t, m, o, "run_pt", pl)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	sameRun(t, got, want)
	checkTimeline(t, pl, got, 0)

	pl8 := placedFor(t, m, tinyUnits(t, m, 8), fig, allOf(11, offload.Streamed))
	got, g = runTraced(t, m, o, "run_pt", pl8)
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "depformer step 8 runs, the plan has units for 8") {
		t.Fatalf("Gen.Err = %v", err)
	}
	sameRun(t, got, want)
}

// A plan that does not fit the device is refused without exceeding it; a
// plan for another model is refused.
func TestPlacedRefusals(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	fig := testFigures(t)
	units := tinyUnits(t, m, 8)
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, 1<<40, 0)
	p.Workspace = testWorkspace
	plan, err := p.Evaluate(allOf(len(units.Units), offload.Resident))
	if err != nil {
		t.Fatal(err)
	}
	dev := offload.NewSimDevice(plan.Memory.GPUTotal - 1)
	if _, err := NewPlaced(m, plan, dev); err == nil || !strings.Contains(err.Error(), "out of device memory") {
		t.Fatalf("plan over the device: %v", err)
	}
	if dev.Peak() > dev.Budget() || dev.Used() != 0 || dev.Live() != 0 {
		t.Fatalf("device peak %d of %d, %d still used in %d buffers", dev.Peak(), dev.Budget(), dev.Used(), dev.Live())
	}
	other := m.Cfg
	other.NumLayers = 3
	ou, err := Units(&other, 8)
	if err != nil {
		t.Fatal(err)
	}
	op := offload.NewProblem(ou, offload.Workload{Batch: 1}, fig, 1<<40, 0)
	oplan, err := op.Evaluate(allOf(len(ou.Units), offload.CPU))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlaced(m, oplan, offload.NewSimDevice(0)); err == nil || !strings.Contains(err.Error(), "unit 2 of the plan is layer.2") {
		t.Fatalf("plan for a 3-layer model: %v", err)
	}
}

func TestCompactNames(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"layer.0", "layer.1", "layer.2", "head", "dep.0", "dep.1", "dep.3"}, "layer.0..2, head, dep.0, dep.1, dep.3"},
		{[]string{"layer.4"}, "layer.4"},
		{nil, ""},
	} {
		if got := CompactNames(c.in); got != c.want {
			t.Errorf("CompactNames(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPlacedBindsDeviceView: a unit on the device is bound with Dev (the
// runtime's buffer) and DevOffset (its span there) beside Host (the same
// bytes, host-visible on the simulated device); a CPU unit has no Dev. The
// bytes at Dev+DevOffset are the weight's Host bytes.
func TestPlacedBindsDeviceView(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	units := tinyUnits(t, m, offload.DefaultDepSteps(&m.Cfg))
	where := allOf(len(units.Units), offload.CPU)
	where[0], where[1] = offload.Resident, offload.Streamed
	pl := placedFor(t, m, units, testFigures(t), where)
	pl.BeginPass()
	for i := 0; i < m.Cfg.NumLayers; i++ {
		l := pl.AcquireLayer(i)
		for _, w := range []*backend.Weight{l.InProj, l.OutProj, l.Norm1.W, l.GateOut} {
			if i >= 2 {
				if w.Dev != nil {
					t.Errorf("layer %d (CPU): %s bound to a device buffer", i, w.Name)
				}
				continue
			}
			b, ok := w.Dev.(*offload.SimBuffer)
			if !ok {
				t.Fatalf("layer %d (%s): %s has no device buffer (%T)", i, where[i], w.Name, w.Dev)
			}
			n := int64(len(w.Host))
			if n != w.Bytes() || !bytes.Equal(b.Bytes()[w.DevOffset:w.DevOffset+n], w.Host) || &b.Bytes()[w.DevOffset] != &w.Host[0] {
				t.Errorf("layer %d: %s's Dev+DevOffset (%d) is not its Host bytes", i, w.Name, w.DevOffset)
			}
		}
		pl.ReleaseLayer(i)
	}
	pl.EndPass()
	if err := pl.Err(); err != nil {
		t.Fatal(err)
	}
}

// A quantized model (at load, both block formats, both checkpoint layouts)
// runs through offload plans: the units are sized and packed in their
// stored formats, and every placement gives the bits of the quantized
// model's own run. A plan made for bf16 units is refused, naming the
// tensor.
func TestPlacedQuantized(t *testing.T) {
	fig := testFigures(t)
	for _, file := range []string{"model.safetensors", "model-dep8.safetensors"} {
		for _, dt := range []weights.DType{weights.Q8_0, weights.Q4_K} {
			m := loadTiny(t, file)
			if _, err := m.QuantizeWeights(dt, nil); err != nil {
				t.Fatal(err)
			}
			depSteps := offload.DefaultDepSteps(&m.Cfg)
			units, err := UnitsOf(&m.Cfg, depSteps, m.storedDTypes())
			if err != nil {
				t.Fatal(err)
			}
			bf16 := tinyUnits(t, m, depSteps)
			// (Q4_K pads the tiny model's 64-wide rows to a 256-element
			// super-block: larger than bf16 here, a third at real shapes.)
			if dt == weights.Q8_0 && units.WeightBytes() >= bf16.WeightBytes() || units.WeightBytes() == bf16.WeightBytes() {
				t.Fatalf("%s %s: units hold %d bytes, bf16 %d", file, dt, units.WeightBytes(), bf16.WeightBytes())
			}
			quantParts := 0
			for _, u := range units.Units {
				for _, p := range u.Parts {
					if p.Stored != "" {
						quantParts++
					}
				}
			}
			if quantParts == 0 {
				t.Fatalf("%s %s: no unit part is sized as quantized", file, dt)
			}
			want, _ := runTraced(t, m, GenOptions{}, "run_pt")
			n := len(units.Units)
			alternate := make([]offload.Placement, n)
			for i := range alternate {
				alternate[i] = []offload.Placement{offload.Streamed, offload.CPU, offload.Resident}[i%3]
			}
			for _, pc := range []struct {
				name  string
				where []offload.Placement
			}{
				{"all resident", allOf(n, offload.Resident)},
				{"all streamed", allOf(n, offload.Streamed)},
				{"alternating", alternate},
			} {
				t.Run(fmt.Sprintf("%s/%s/%s", file, dt, pc.name), func(t *testing.T) {
					pl := placedFor(t, m, units, fig, pc.where)
					for i := 0; i < m.Cfg.NumLayers; i++ {
						if w := pl.layers[i].InProj; w.DType != QuantDType(w.Name, dt) {
							t.Fatalf("layer %d in_proj bound as %s", i, w.DType)
						}
					}
					got, g := runTraced(t, m, GenOptions{}, "run_pt", pl)
					if err := g.Err(); err != nil {
						t.Fatal(err)
					}
					sameRun(t, got, want)
					checkTimeline(t, pl, got, 1)
				})
			}
			p := offload.NewProblem(bf16, offload.Workload{Batch: 1}, fig, 1<<40, 0)
			plan, err := p.Evaluate(allOf(len(bf16.Units), offload.Streamed))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := NewPlaced(m, plan, offload.NewSimDevice(1<<40)); err == nil || !strings.Contains(err.Error(), "in_proj_weight is "+string(dt)+" but the plan holds it as BF16") {
				t.Errorf("%s %s: a bf16 plan over quantized weights: %v", file, dt, err)
			}
		}
	}
}

// simOptions configure newSim (the tests' simulated device; the job plans
// through infer.Device). The zero value is a device of 0 bytes (all
// CPU).
type simOptions struct {
	// Memory is the simulated device's memory in bytes; negative means
	// 141 GB. The plan is made for the device's free memory.
	Memory int64
	// HostMemory is the plan's host budget (0: unlimited).
	HostMemory int64
	// Workspace is the device memory kept for activations whenever a unit
	// runs on the device; negative means offload.DefaultWorkspace.
	Workspace int64
	// Figures are the machine figures the plan and the timeline use (nil:
	// offload.DefaultFigures, an H200 on PCIe gen5).
	Figures *offload.Figures
	// DepSteps is the number of depformer steps planned per frame (0:
	// offload.DefaultDepSteps, the agent's codebooks).
	DepSteps int
	// Verify makes the runtime check at every release that the unit's
	// device bytes still equal the host bytes.
	Verify bool
}

// newSim plans the model's units for a simulated device (offload's planner
// over the device's free memory) and starts executing the plan on it.
func newSim(m *Model, o simOptions) (*Placed, error) {
	mem := o.Memory
	if mem < 0 {
		mem = 141_000_000_000 // an H200, as offload.DefaultFigures
	}
	dev := offload.NewSimDevice(mem)
	depSteps := o.DepSteps
	if depSteps == 0 {
		depSteps = offload.DefaultDepSteps(&m.Cfg)
	}
	units, err := UnitsOf(&m.Cfg, depSteps, m.storedDTypes())
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	fig := offload.DefaultFigures()
	if o.Figures != nil {
		fig = *o.Figures
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, dev.Budget()-dev.Used(), o.HostMemory)
	if o.Workspace >= 0 {
		p.Workspace = o.Workspace
	}
	plan, err := p.Solve()
	if err != nil {
		return nil, fmt.Errorf("offload: %w", err)
	}
	pl, err := NewPlaced(m, plan, dev)
	if err != nil {
		return nil, err
	}
	pl.rt.Verify = o.Verify
	return pl, nil
}

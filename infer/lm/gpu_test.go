package lm

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// runBE is the backend runTraced computes on (the CPU's; the GPU test
// swaps it).
var runBE backend.Backend = testBE

// The CUDA backend on the tiny fixtures, against the CPU backend: with f32
// compute, every token identical under greedy decoding and the text logits
// within 1e-3 relative, on the three scenarios (saved voice embeddings, a
// voice WAV, the 8-step depformer); and the same again through an offload
// plan that streams and keeps units on the CPU (weights bound OnCPU). Skipped
// without a GPU (scripts/gpu-check.sh runs it on one).
func TestGPUMatchesCPU(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	for _, sc := range gpuScenarios {
		m := scenarioModel(t, sc.file, sc.quant)
		want, _ := runTraced(t, m, GenOptions{}, sc.scenario)
		for _, mode := range []string{"resident", "offload"} {
			t.Run(sc.scenario+sc.quant+" "+mode, func(t *testing.T) {
				o := cuda.Options{ComputeDType: "f32", CPU: testBE}
				plan := alternatePlan(t, m)
				g, err := cuda.New(o)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				runBE = g
				defer func() { runBE = testBE }()
				var w []Weights
				var pl *Placed
				if mode == "offload" {
					pl = placedOn(t, m, plan, g)
					w = append(w, pl)
				}
				got, gen := runTraced(t, m, GenOptions{}, sc.scenario, w...)
				if err := gen.Err(); err != nil {
					t.Fatal(err)
				}
				compareGPU(t, got, want)
				if pl != nil {
					finishOn(t, pl)
				}
			})
		}
	}
}

// gpuScenarios are the GPU tests' runs: the fixtures' three scenarios,
// and the tiny model quantized at load to each block format (compared with
// the quantized model on the CPU).
var gpuScenarios = []struct{ file, scenario, quant string }{
	{"model.safetensors", "run_pt", ""}, {"model.safetensors", "run_wav", ""}, {"model-dep8.safetensors", "run_dep8", ""},
	{"model.safetensors", "run_pt", "q8_0"}, {"model-dep8.safetensors", "run_dep8", "q4_k"},
}

// scenarioModel is the tiny model of file, quantized at load to quant
// ("": the shared, unquantized one).
func scenarioModel(t *testing.T, file, quant string) *Model {
	t.Helper()
	if quant == "" {
		return tinyModel(t, file)
	}
	m := loadTiny(t, file)
	dt, err := weights.ParseQuantFormat(quant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.QuantizeWeights(dt, nil); err != nil {
		t.Fatal(err)
	}
	return m
}

// alternatePlan places the tiny model's units streamed, on the CPU and
// resident in turn.
func alternatePlan(t *testing.T, m *Model) *offload.Plan {
	t.Helper()
	units, err := UnitsOf(&m.Cfg, offload.DefaultDepSteps(&m.Cfg), m.storedDTypes())
	if err != nil {
		t.Fatal(err)
	}
	where := make([]offload.Placement, len(units.Units))
	for i := range where {
		where[i] = []offload.Placement{offload.Streamed, offload.CPU, offload.Resident}[i%3]
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, testFigures(t), 1<<40, 0)
	p.Workspace = testWorkspace
	plan, err := p.Evaluate(where)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// placedOn executes plan on the CUDA backend's device: the offload
// runtime's units in device memory, the backend queued on the runtime's
// compute stream.
func placedOn(t *testing.T, m *Model, plan *offload.Plan, g *cuda.CUDA) *Placed {
	t.Helper()
	pl, err := NewPlaced(m, plan, g.OffloadDevice())
	if err != nil {
		t.Fatal(err)
	}
	pl.rt.DeviceCompute = true
	if err := g.UseRuntimeStream(pl.rt.ComputeStream()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	return pl
}

// finishOn closes pl and checks its timeline: the runtime's own check
// (order, fences, no unit copied twice in a pass) and streamed units
// copied in every pass. (The device's peak includes the backend's own
// buffers, so it is not the plan's device total as on the simulated
// device.)
func finishOn(t *testing.T, pl *Placed) {
	t.Helper()
	line, err := pl.Finish()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range pl.Timeline().Events {
		if e.Kind == offload.Transfer {
			n++
		}
	}
	if pl.Plan().Count(offload.Streamed) > 0 && n == 0 {
		t.Fatalf("streamed units were never copied: %s", line)
	}
}

func compareGPU(t *testing.T, got, want []traced) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d steps, the CPU's %d", len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.sampled, w.sampled) || !slices.Equal(g.next, w.next) || !slices.Equal(g.out, w.out) {
			t.Fatalf("step %d (offset %d): tokens %v/%v/%v, the CPU's %v/%v/%v", i, w.offset, g.sampled, g.next, g.out, w.sampled, w.next, w.out)
		}
		if (g.text == nil) != (w.text == nil) {
			t.Fatalf("step %d: text logits present %v, the CPU's %v", i, g.text != nil, w.text != nil)
		}
		if w.text != nil {
			e := relErr(floatsOf(g.text), floatsOf(w.text))
			worst = max(worst, e)
			if e > 1e-3 {
				t.Errorf("step %d: text logits rel err %.3g (> 1e-3)", i, e)
			}
		}
	}
	fmt.Printf("gpu-check: %d steps, tokens identical, text logits worst rel err %.3g\n", len(want), worst)
}

func floatsOf(b []uint32) []float32 {
	x := make([]float32, len(b))
	for i, v := range b {
		x[i] = math.Float32frombits(v)
	}
	return x
}

// The models' call patterns on the CUDA backend without a GPU: the tiny
// model's three scenarios (prompts as prefills, every user frame) on the
// dry driver, resident and through an offload placement that streams and
// keeps units on the CPU: every launch matches its kernel's signature and
// limits, nothing panics, and the memory limit holds. Values are not
// checked (TestGPUMatchesCPU does that on a GPU).
func TestGPUCallPatternsDry(t *testing.T) {
	for _, sc := range gpuScenarios {
		m := scenarioModel(t, sc.file, sc.quant)
		for _, mode := range []string{"resident", "offload"} {
			o := cuda.Options{ComputeDType: "f32", CPU: testBE}
			plan := alternatePlan(t, m)
			g, st, err := cuda.NewDry(o, 256<<20)
			if err != nil {
				t.Fatal(err)
			}
			var w []Weights
			var pl *Placed
			if mode == "offload" {
				pl = placedOn(t, m, plan, g)
				w = append(w, pl)
			}
			runBE = g
			recs, gen := runTraced(t, m, GenOptions{}, sc.scenario, w...)
			runBE = testBE
			if err := gen.Err(); err != nil {
				t.Fatalf("%s %s: %v", sc.scenario, mode, err)
			}
			if len(recs) == 0 || st.Count("attend") == 0 || st.Count("matmul_fma")+st.Count("matmul_fma_rows") == 0 {
				t.Fatalf("%s %s: %d steps, %d attention launches", sc.scenario, mode, len(recs), st.Count("attend"))
			}
			if pl != nil {
				finishOn(t, pl)
				// The units' matrices came from the runtime's device buffers
				// (or ran on the CPU): only vectors went into the resident
				// cache.
				var matrices int64
				for _, u := range plan.Units() {
					matrices += u.Bytes
				}
				if up := g.Resident(); up > matrices/10 {
					t.Fatalf("%s: %d bytes uploaded into the resident cache, of %d in the units", sc.scenario, up, matrices)
				}
			}
			if used, peak, limit := g.Memory(); used > limit || peak > limit {
				t.Fatalf("%s %s: %d used, %d peak of %d", sc.scenario, mode, used, peak, limit)
			}
			g.Close()
		}
	}
}

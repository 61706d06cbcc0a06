package lm

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/offload"
)

// runBE is the backend runTraced computes on (the CPU's; the GPU test
// swaps it).
var runBE backend.Backend = testBE

// The CUDA backend on the tiny fixtures, against the CPU backend: with f32
// compute, every token identical under greedy decoding and the text logits
// within 1e-3 relative, on the three scenarios (saved voice embeddings, a
// voice WAV, the 8-step depformer); and the same again through an offload
// plan that streams and keeps units on the CPU (Options.Place). Skipped
// without a GPU (scripts/gpu-check.sh runs it on one).
func TestGPUMatchesCPU(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	for _, sc := range []struct{ file, scenario string }{
		{"model.safetensors", "run_pt"}, {"model.safetensors", "run_wav"}, {"model-dep8.safetensors", "run_dep8"},
	} {
		m := tinyModel(t, sc.file)
		want, _ := runTraced(t, m, GenOptions{}, sc.scenario)
		units, err := Units(&m.Cfg, offload.DefaultDepSteps(&m.Cfg))
		if err != nil {
			t.Fatal(err)
		}
		alternate := map[string]offload.Placement{}
		for i, u := range units.Units {
			for _, p := range u.Parts {
				alternate[p.Tensor] = []offload.Placement{offload.Streamed, offload.CPU, offload.Resident}[i%3]
			}
		}
		for _, mode := range []string{"resident", "offload"} {
			t.Run(sc.scenario+" "+mode, func(t *testing.T) {
				o := cuda.Options{ComputeDType: "f32", CPU: testBE}
				if mode == "offload" {
					o.Stream, o.SlotBytes = true, 1<<20
					o.Place = func(name string) offload.Placement {
						if w, ok := alternate[name]; ok {
							return w
						}
						return offload.Resident
					}
				}
				g, err := cuda.New(o)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				runBE = g
				defer func() { runBE = testBE }()
				got, _ := runTraced(t, m, GenOptions{}, sc.scenario)
				compareGPU(t, got, want)
				if mode == "offload" {
					if _, staged := g.Stats(); staged == 0 {
						t.Error("the offload plan streamed nothing")
					}
				}
			})
		}
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
	for _, sc := range []struct{ file, scenario string }{
		{"model.safetensors", "run_pt"}, {"model.safetensors", "run_wav"}, {"model-dep8.safetensors", "run_dep8"},
	} {
		m := tinyModel(t, sc.file)
		for _, mode := range []string{"resident", "offload"} {
			o := cuda.Options{ComputeDType: "f32", CPU: testBE}
			if mode == "offload" {
				o.Stream, o.SlotBytes = true, 1<<16
				i := 0
				o.Place = func(string) offload.Placement {
					i++
					return []offload.Placement{offload.Streamed, offload.CPU, offload.Resident}[i%3]
				}
			}
			g, st, err := cuda.NewDry(o, 256<<20)
			if err != nil {
				t.Fatal(err)
			}
			runBE = g
			recs, _ := runTraced(t, m, GenOptions{}, sc.scenario)
			runBE = testBE
			if len(recs) == 0 || st.Count("attend") == 0 || st.Count("matmul_fma") == 0 {
				t.Fatalf("%s %s: %d steps, %d attention launches", sc.scenario, mode, len(recs), st.Count("attend"))
			}
			if used, peak, limit := g.Memory(); used > limit || peak > limit {
				t.Fatalf("%s %s: %d used, %d peak of %d", sc.scenario, mode, used, peak, limit)
			}
			g.Close()
		}
	}
}

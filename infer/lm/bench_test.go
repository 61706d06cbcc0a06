package lm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// WeightSpecs names exactly the tensors of the tiny checkpoint, with its shapes.
func TestWeightSpecs(t *testing.T) {
	cfg, err := config.Load(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := weights.Open(tiny + "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	specs := WeightSpecs(&cfg.LM, weights.BF16)
	if len(specs) != len(f.Names()) {
		t.Fatalf("%d specs, the checkpoint has %d tensors", len(specs), len(f.Names()))
	}
	for _, s := range specs {
		if _, err := f.Get(s.Name, s.Shape...); err != nil {
			t.Fatal(err)
		}
	}
	// And a random file built from them loads and runs.
	m, err := Load(&cfg.LM, weights.Random(specs, 1))
	if err != nil {
		t.Fatal(err)
	}
	g := NewGen(m, testBE, DefaultGenOptions())
	g.StepTextPrompt([]int{5, 6, 7})
	for i := 0; i < 3; i++ {
		g.Step(SineTokens[:])
	}
}

// The benchmark functions run several times (growing b.N): the random model
// is built once per shape and dropped when another shape is needed.
var bench struct {
	key   string
	m     *Model
	build time.Duration
}

func benchModel(b *testing.B, cfg *config.LM) (*Model, time.Duration) {
	key := fmt.Sprint(cfg.Dim, "d/", cfg.NumLayers, "L")
	if bench.key != key {
		bench.m = nil
		runtime.GC()
		t0 := time.Now()
		m, err := Load(cfg, weights.Random(WeightSpecs(cfg, weights.BF16), 1))
		if err != nil {
			b.Fatal(err)
		}
		bench.key, bench.m, bench.build = key, m, time.Since(t0)
	}
	return bench.m, bench.build
}

// benchStep measures one steady-state user frame (temporal transformer, text
// head, the depformer steps actually run) at the shape of cfg with random
// bf16 weights, after a short prompt. opt.Full measures the reference's work
// (all dep_q depformer steps) instead.
func benchStep(b *testing.B, cfg *config.LM, opt GenOptions) {
	m, build := benchModel(b, cfg)
	g := NewGen(m, testBE, opt)
	if err := g.StepSystemPrompts(SystemPrompt{TextIDs: []int{10, 11, 12, 13}}); err != nil {
		b.Fatal(err)
	}
	g.Step(SineTokens[:])
	g.Step(SineTokens[:])
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	var temporal, heads time.Duration
	dep := 0
	for i := 0; i < b.N; i++ {
		g.Step(SineTokens[:])
		st := g.Stats()
		bytes, dep = st.WeightBytes, st.DepSteps
		temporal += st.TemporalTime
		heads += st.HeadsTime
	}
	el := b.Elapsed()
	b.ReportMetric(float64(el.Microseconds())/1e3/float64(b.N), "ms/frame")
	b.ReportMetric(float64(temporal.Microseconds())/1e3/float64(b.N), "temporal-ms/frame")
	b.ReportMetric(float64(heads.Microseconds())/1e3/float64(b.N), "heads-ms/frame")
	b.ReportMetric(float64(bytes), "weight-bytes/frame")
	b.ReportMetric(float64(bytes)*float64(b.N)/el.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(dep), "dep-steps/frame")
	b.Logf("%s: random weights built and loaded in %v; %d depformer steps per frame, %.2f GB of weights read per frame",
		bench.key, build.Round(time.Millisecond), dep, float64(bytes)/1e9)
}

func config1B(b *testing.B) *config.LM {
	cfg, err := config.Load("../../testdata/personaplex-1b.config.json")
	if err != nil {
		b.Fatal(err)
	}
	return &cfg.LM
}

// BenchmarkStep7B: the real PersonaPlex 7B shape (≈ 16.7 GB of random bf16
// weights in RAM; the 3000-position KV rings are allocated, touched only
// where written).
func BenchmarkStep7B(b *testing.B) { benchStep(b, &config.Default().LM, GenOptions{}) }

// BenchmarkStep1B: testdata/personaplex-1b.config.json.
func BenchmarkStep1B(b *testing.B) { benchStep(b, config1B(b), GenOptions{}) }

// BenchmarkStep1BReferenceWork: the same with the reference's dead work (the
// text head and all 16 depformer steps every frame).
func BenchmarkStep1BReferenceWork(b *testing.B) { benchStep(b, config1B(b), GenOptions{Full: true}) }

// BenchmarkPrompts1B: the prompt phases (24-frame voice prompt, silences, a
// 57-token text prompt: 93 steps), as one prefill vs step by step with the
// reference's work.
func BenchmarkPrompts1B(b *testing.B) {
	cfg := config1B(b)
	m, _ := benchModel(b, cfg)
	frames := make([][]int, 25)
	for i := range frames {
		frames[i] = SilenceTokens[:]
	}
	ids := make([]int, 57)
	for i := range ids {
		ids[i] = 100 + i
	}
	for _, mode := range []struct {
		name string
		opt  GenOptions
	}{{"prefill", GenOptions{}}, {"stepwise", GenOptions{StepwisePrompts: true}}, {"reference", GenOptions{Full: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			g := NewGen(m, testBE, mode.opt)
			for i := 0; i < b.N; i++ {
				g.Reset()
				if err := g.StepSystemPrompts(SystemPrompt{VoiceFrames: frames, TextIDs: ids}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/prompt")
		})
	}
}

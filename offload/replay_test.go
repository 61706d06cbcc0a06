package offload

import (
	"math"
	"strings"
	"testing"
)

// Replay with the cost model's own durations is the prediction; with
// longer computes it is longer; Set declares figures by key.
func TestReplayAndSet(t *testing.T) {
	c := loadCfg(t, "../testdata/personaplex-7b.config.json")
	lm := newLM(t, c, DefaultDepSteps(c))
	for _, gib := range []int64{8, 12, 16, 24} {
		plan, err := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), gib<<30, 0).Solve()
		if err != nil {
			t.Fatal(err)
		}
		comp := plan.ComputeMs()
		got, err := plan.Replay(comp)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-plan.Predict.FrameMs) > 1e-9*plan.Predict.FrameMs {
			t.Fatalf("%d GiB: replay %v, prediction %v", gib, got, plan.Predict.FrameMs)
		}
		var sum float64
		for i := range comp {
			sum += comp[i]
			comp[i] *= 2
		}
		if math.Abs(sum-plan.Predict.ComputeMs) > 1e-9*sum {
			t.Fatalf("%d GiB: computes sum to %v, prediction's chain %v", gib, sum, plan.Predict.ComputeMs)
		}
		if slower, _ := plan.Replay(comp); slower < got*1.5 {
			t.Fatalf("%d GiB: twice the computes replay at %v, from %v", gib, slower, got)
		}
	}
	plan, _ := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), 8<<30, 0).Solve()
	if _, err := plan.Replay(nil); err == nil {
		t.Fatal("replay of no durations")
	}

	f := DefaultFigures()
	if err := f.Set("cpu_bandwidth=12.5, gpu_launch = 2", FromMeasured, "here"); err != nil {
		t.Fatal(err)
	}
	if f.CPUBandwidth.Value != 12.5 || f.CPUBandwidth.Source != FromMeasured || f.GPULaunch.Value != 2 || f.GPULaunch.Note != "here" || f.GPUBandwidth.Source != FromDefault {
		t.Fatalf("figures %+v", f)
	}
	for spec, want := range map[string]string{"warp=1": "unknown figure", "cpu_bandwidth": "key=value", "sync=x": "not a number", "sync=0": "positive"} {
		g := DefaultFigures()
		if err := g.Set(spec, FromDeclared, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q): %v, want %q", spec, err, want)
		}
	}
}

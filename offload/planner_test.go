package offload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func sameMs(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestSolveMatchesBruteForce: on small problems (4 layers, head, 3
// depformer steps: 3⁸ placements), the class enumeration + polish finds
// the exhaustive optimum, across random machine figures and budgets from
// nothing to everything.
func TestSolveMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lm := newLM(t, smallCfg(t, 4), 3)
	all := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), 1<<40, 0)
	pl, err := all.Solve()
	if err != nil {
		t.Fatal(err)
	}
	full := pl.Memory.GPUTotal
	cases := 0
	for trial := 0; trial < 40; trial++ {
		fig := randomFigures(r)
		work := Workload{Batch: 1 + r.IntN(2)}
		if r.IntN(4) == 0 {
			work.Prefill = 1 + r.IntN(64)
		}
		for _, frac := range []float64{0, 0.15, 0.3, 0.5, 0.7, 0.9, 1.1} {
			p := NewProblem(lm, work, fig, int64(frac*float64(full)), 0)
			p.Workspace = int64(r.IntN(64 << 10))
			got, err := p.Solve()
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.BruteForce()
			if err != nil {
				t.Fatal(err)
			}
			cases++
			if !sameMs(got.Predict.FrameMs, want.Predict.FrameMs) {
				t.Errorf("trial %d budget %.2f: Solve %.6f ms (%v), brute force %.6f ms (%v)", trial, frac,
					got.Predict.FrameMs, got.Where, want.Predict.FrameMs, want.Where)
			}
			if !got.Memory.Fits || got.Memory.GPUTotal > p.GPUBudget {
				t.Errorf("trial %d: plan does not fit: %+v", trial, got.Memory)
			}
		}
	}
	t.Logf("%d problems, each checked against 6561 placements", cases)
}

// TestKindClassesNearBruteForce: the fallback used when units of a kind
// differ and their classes would be too many to enumerate (every unit its
// own class here, forced with MaxEnum < 0: classes by kind, deep polish)
// stays close to the optimum. (Config-derived units never take this path:
// all layers are alike, all depformer steps are alike.)
func TestKindClassesNearBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	exact, n := 0, 0
	for trial := 0; trial < 30; trial++ {
		lm := newLM(t, smallCfg(t, 4), 3)
		// Distinct sizes: scale each unit.
		for i := range lm.Units {
			f := 0.5 + r.Float64()
			lm.Units[i].Bytes = int64(float64(lm.Units[i].Bytes) * f)
			lm.Units[i].MatParams = int64(float64(lm.Units[i].MatParams) * f)
		}
		fig := randomFigures(r)
		var full int64
		for _, u := range lm.Units {
			full += u.Bytes + u.KVBytes
		}
		for _, frac := range []float64{0.2, 0.5, 0.8} {
			p := NewProblem(lm, Workload{Batch: 1}, fig, int64(frac*float64(full)), 0)
			p.Workspace = 0
			p.MaxEnum = -1
			got, err := p.Solve()
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.BruteForce()
			if err != nil {
				t.Fatal(err)
			}
			gap := got.Predict.FrameMs/want.Predict.FrameMs - 1
			worst = max(worst, gap)
			n++
			if sameMs(got.Predict.FrameMs, want.Predict.FrameMs) {
				exact++
			}
		}
	}
	t.Logf("kind classes: %d/%d optimal, worst gap %.2f%%", exact, n, 100*worst)
	if worst > 0.15 || exact < n*3/4 {
		t.Errorf("kind-class fallback: %d/%d optimal, worst %.1f%% off the optimum", exact, n, 100*worst)
	}
}

const kvPerLayer7B = 2 * 3000 * 4096 * 4 // float32 K and V, full context

func solve(t *testing.T, p *Problem) *Plan {
	t.Helper()
	pl, err := p.Solve()
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestPlan7B: at the real 7B shape, plans from nothing to everything fit
// their budget, account the KV cache explicitly, get no slower as the
// budget grows, and respect the two lower bounds of any schedule.
func TestPlan7B(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	prev := math.Inf(1)
	for gib := int64(0); gib <= 24; gib += 2 {
		p := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), gib<<30, 0)
		pl := solve(t, p)
		m := pl.Memory
		if !m.Fits || m.GPUTotal > p.GPUBudget {
			t.Fatalf("%d GiB: plan does not fit: %+v", gib, m)
		}
		if m.GPUKV != int64(m.KVLayersGPU)*kvPerLayer7B || m.HostKV != int64(32-m.KVLayersGPU)*kvPerLayer7B {
			t.Errorf("%d GiB: KV accounting: %d layers on the device, device KV %d, host KV %d", gib, m.KVLayersGPU, m.GPUKV, m.HostKV)
		}
		if sum := m.GPUResident + m.GPUStaging + m.GPUKV + m.GPUDepKV + m.GPUWorkspace; sum != m.GPUTotal {
			t.Errorf("%d GiB: device items sum to %d, total %d", gib, sum, m.GPUTotal)
		}
		pr := pl.Predict
		if pr.FrameMs < math.Max(pr.ComputeMs, pr.LinkMs)*(1-1e-9) {
			t.Errorf("%d GiB: %.3f ms/frame beats its lower bound (compute %.3f, link %.3f)", gib, pr.FrameMs, pr.ComputeMs, pr.LinkMs)
		}
		if pr.FrameMs > prev*(1+1e-9) {
			t.Errorf("%d GiB: %.3f ms/frame, slower than with less memory (%.3f)", gib, pr.FrameMs, prev)
		}
		prev = pr.FrameMs
		t.Logf("%2d GiB: %-36s %8.2f ms/frame, device %s", gib, pl.Summary(), pr.FrameMs, FormatSize(m.GPUTotal))
		switch gib {
		case 0:
			if pl.Count(CPU) != len(lm.Units) || m.GPUTotal != 0 {
				t.Errorf("0 GiB: want everything on the CPU and no device memory, got %s, %d bytes", pl.Summary(), m.GPUTotal)
			}
		case 8:
			if pl.Count(Resident) == 0 || pl.Count(Streamed) == 0 {
				t.Errorf("8 GiB: want a split with resident and streamed units, got %s", pl.Summary())
			}
			b, err := Accelerate(lm, p.Work, p.Fig, p.GPUBudget)
			if err != nil {
				t.Fatal(err)
			}
			if pr.FrameMs*10 > b.FrameMs {
				t.Errorf("8 GiB: plan %.1f ms/frame vs accelerate %.1f: expected at least 10× better", pr.FrameMs, b.FrameMs)
			}
		case 24:
			if pl.Count(Resident) != len(lm.Units) || m.PCIeBytes != 0 {
				t.Errorf("24 GiB: want everything resident, got %s", pl.Summary())
			}
		}
	}
}

// TestSteadyState: the frames the cost model simulates are enough for the
// schedule to settle: the prediction equals the mean over many frames.
func TestSteadyState(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	for _, gib := range []int64{3, 6, 8, 10, 12, 14, 16} {
		p := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), gib<<30, 0)
		pl := solve(t, p)
		e := newEvaluator(p)
		e.durations(pl.Where)
		ends := simulate(e.comp, e.xfer, pl.Where, 64, nil)
		long := (ends[63] - ends[31]) / 32
		if !sameMs(long, pl.Predict.FrameMs) {
			t.Errorf("%d GiB: predicted %.6f ms/frame, %.6f over 32 later frames", gib, pl.Predict.FrameMs, long)
		}
	}
}

func TestHostBudget(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	// With no device memory everything is on the host: weights, KV,
	// tables, about 17.5 GiB. 10 GiB of host cannot hold it.
	p := NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), 0, 10<<30)
	if _, err := p.Solve(); err == nil || !strings.Contains(err.Error(), "no placement fits") {
		t.Errorf("want a no-fit error, got %v", err)
	}
	// With 8 GiB of device memory, a 10 GiB host budget forces more onto
	// the device than the unconstrained plan would keep there.
	free := solve(t, NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), 8<<30, 0))
	p = NewProblem(lm, Workload{Batch: 1}, DefaultFigures(), 8<<30, 10<<30)
	pl := solve(t, p)
	if pl.Memory.HostTotal > 10<<30 || pl.Memory.GPUTotal > 8<<30 {
		t.Errorf("plan exceeds a budget: %+v", pl.Memory)
	}
	if free.Memory.HostTotal <= 10<<30 {
		t.Fatalf("test premise: unconstrained plan uses only %s of host", FormatSize(free.Memory.HostTotal))
	}
	if pl.Predict.FrameMs < free.Predict.FrameMs {
		t.Errorf("a tighter host budget made the plan faster: %.2f < %.2f", pl.Predict.FrameMs, free.Predict.FrameMs)
	}
}

// TestPrefillComputeBound: decoding one position is bound by memory
// bandwidth, a long prefill by compute, and its per-position cost is far
// lower.
func TestPrefillComputeBound(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	fig := DefaultFigures()
	layer := &lm.Units[0]
	dec := NewProblem(lm, Workload{Batch: 1}, fig, 40<<30, 0)
	c := dec.costOf(layer)
	memMs := float64(c.readBytes) / (fig.GPUBandwidth.Value * 1e9) * 1e3
	if launch := float64(layer.Launches) * fig.GPULaunch.Value / 1e3; !sameMs(c.gpu, memMs+launch) {
		t.Errorf("decode: layer takes %.4f ms, memory-bound figure %.4f ms", c.gpu, memMs+launch)
	}
	pre := NewProblem(lm, Workload{Batch: 1, Prefill: 2000}, fig, 40<<30, 0)
	c2 := pre.costOf(layer)
	flopMs := 2000 * (2*float64(layer.MatParams) + float64(layer.KVBytes)/2) / (fig.GPUCompute.Value * 1e12) * 1e3
	if launch := float64(layer.Launches) * fig.GPULaunch.Value / 1e3; !sameMs(c2.gpu, flopMs+launch) {
		t.Errorf("prefill: layer takes %.4f ms, compute-bound figure %.4f ms", c2.gpu, flopMs+launch)
	}
	pd, pp := solve(t, dec), solve(t, pre)
	if pp.Predict.PositionMs*10 > pd.Predict.FrameMs {
		t.Errorf("prefill %.4f ms/position is not much cheaper than decode %.4f ms/frame", pp.Predict.PositionMs, pd.Predict.FrameMs)
	}
}

func TestBatchScalesKV(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	all := func(w Placement) []Placement {
		x := make([]Placement, len(lm.Units))
		for i := range x {
			x[i] = w
		}
		return x
	}
	p := NewProblem(lm, Workload{Batch: 4}, DefaultFigures(), 64<<30, 0)
	pl, err := p.Evaluate(all(Resident))
	if err != nil {
		t.Fatal(err)
	}
	if pl.Memory.GPUKV != 4*32*kvPerLayer7B {
		t.Errorf("batch 4: device KV %d, want %d", pl.Memory.GPUKV, 4*32*kvPerLayer7B)
	}
	if _, err := p.Evaluate(all(Resident)[:3]); err == nil {
		t.Error("Evaluate accepted a placement of the wrong length")
	}
	p.Work.Batch = 0
	if _, err := p.Solve(); err == nil {
		t.Error("Solve accepted batch 0")
	}
}

// TestAccelerateBaseline models the reference's --cpu-offload.
func TestAccelerateBaseline(t *testing.T) {
	lm := newLM(t, loadCfg(t, "../testdata/personaplex-7b.config.json"), 8)
	fig := DefaultFigures()
	b, err := Accelerate(lm, Workload{Batch: 1}, fig, 8<<30)
	if err != nil {
		t.Fatal(err)
	}
	var depLayer BaselineModule
	order := map[string]int{}
	for i, m := range b.Modules {
		order[m.Name] = i
		if m.Name == "depformer.layers.0" {
			depLayer = m
		}
	}
	if order["emb.0"] != 0 || order["transformer.layers.0"] > order["transformer.layers.31"] || order["out_norm"] > order["depformer.layers.0"] {
		t.Errorf("modules not in the reference's registration order: %v", order)
	}
	if depLayer.OnGPU || depLayer.Calls != 16 {
		t.Errorf("8 GiB: depformer layer 0 %+v: want offloaded and called 16 times per frame", depLayer)
	}
	// All 16 steps' weights per depformer layer: 16 × the step's slice.
	if want := int64(16*(4*1024*1024+3*2816*1024)*2 + 2*1024*2); depLayer.Bytes != want {
		t.Errorf("depformer layer bytes %d, want %d", depLayer.Bytes, want)
	}
	if b.CopyBytes < 6*16*depLayer.Bytes {
		t.Errorf("copies %d bytes per frame, want at least the depformer's 6 layers × 16 steps", b.CopyBytes)
	}
	if !b.OOM {
		t.Errorf("8 GiB: the reference's map leaves no room for its KV cache; want OOM")
	}
	if b.GPUWeights+b.LargestLayer > 8<<30 {
		t.Errorf("device map exceeds the budget: %d + %d", b.GPUWeights, b.LargestLayer)
	}
	big, _ := Accelerate(lm, Workload{Batch: 1}, fig, 40<<30)
	if big.OOM || big.CopyBytes != 0 || big.HostWeights != 0 || !sameMs(big.FrameMs, big.ComputeMs) {
		t.Errorf("40 GiB: want everything on the GPU, got %+v", big)
	}
}

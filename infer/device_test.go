package infer

import (
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/offload"
)

// The size check of a fully resident GPU job: the 7B's weights and KV
// cache do not fit an 8 GiB budget, and the message says what to do; they
// fit an H200.
func TestFits(t *testing.T) {
	cfg, err := config.Load("../testdata/personaplex-7b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	const weights7B = 16_700_000_000
	f := FitsFor(cfg, weights7B, 1, 8<<30)
	msg := f.Error()
	if msg == "" || !strings.Contains(msg, "--cpu-offload") || !strings.Contains(msg, "8.00 GiB") {
		t.Fatalf("7B in 8 GiB: %q", msg)
	}
	if msg := FitsFor(cfg, weights7B, 1, 131<<30).Error(); msg != "" {
		t.Fatalf("7B on an H200: %q", msg)
	}
	// The KV cache grows with the batch.
	if a, b := FitsFor(cfg, weights7B, 1, 0).KV, FitsFor(cfg, weights7B, 8, 0).KV; b != 8*a {
		t.Fatalf("KV at B=8: %d, at B=1: %d", b, a)
	}
}

// The placement a plan gives each tensor, by name: the units' tensors
// their unit's placement, anything else resident.
func TestPlacementOf(t *testing.T) {
	cfg, err := config.Load("../testdata/personaplex-7b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	units, err := offload.NewLM(&cfg.LM, offload.DefaultDepSteps(&cfg.LM))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := offload.NewProblem(units, offload.Workload{Batch: 1}, offload.DefaultFigures(), 8<<30, 0).Solve()
	if err != nil {
		t.Fatal(err)
	}
	place := PlacementOf(plan)
	counts := map[offload.Placement]int{}
	for i, u := range plan.Units() {
		w := place(u.Parts[0].Tensor)
		if u.Kind == offload.KindLayer && w != plan.Where[i] {
			t.Fatalf("%s (%s): placed %s", u.Name, u.Parts[0].Tensor, w)
		}
		counts[w]++
	}
	if counts[offload.Resident] == 0 || counts[offload.Resident] == len(plan.Units()) {
		t.Fatalf("an 8 GiB plan for the 7B: %v", counts)
	}
	if place("encoder_transformer.layers.0.gating.linear_in.weight") != offload.Resident {
		t.Fatal("a tensor of no unit is not resident")
	}
	if largestStreamed(plan) <= 0 && counts[offload.Streamed] > 0 {
		t.Fatal("streamed units without a slot size")
	}
}

package lm

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cuda"
)

// On a GPU every device→host copy is a wait for the queued work, so a
// lockstep step of B conversations downloads each head's logits once for
// all of them: the text head's, then each depformer step's. Counted on the
// dry driver for B = 1, 4 and 16 over the same steps (user frames; once
// the delays have passed, the agent's 8 codebooks generated): per step, 1
// + the depformer steps run downloads whatever B — 9 in a full step (it
// was 9·B) —, and no other wait for the device but the upload arena's
// wraps.
func TestStepHostWaitsIndependentOfBatch(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	user := SineTokens[:m.Cfg.NQ-AudioTokensPerStream]
	const steps = 12
	var perB [][]int
	for _, B := range []int{1, 4, 16} {
		g, st, err := cuda.NewDry(cuda.Options{ComputeDType: "f32"}, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		e := NewEngine(m, g, nil)
		gens := make([]*Gen, B)
		ins := make([]Input, B)
		for i := range gens {
			gens[i] = e.NewGen(GenOptions{Seed: uint64(i)})
			ins[i] = Input{User: user}
		}
		var counts []int
		for s := 0; s < steps; s++ {
			d0, s0 := st.HostWaits()
			w0 := g.ArenaWraps()
			if err := e.Step(gens, ins); err != nil {
				t.Fatal(err)
			}
			d1, s1 := st.HostWaits()
			// Besides downloads, the host waits only when the upload arena
			// wraps (once per 8 MiB of small uploads).
			if wraps := g.ArenaWraps() - w0; s1-s0 != d1-d0+wraps {
				t.Fatalf("B=%d step %d: %d downloads, %d arena wraps, %d waits", B, s, d1-d0, wraps, s1-s0)
			}
			counts = append(counts, d1-d0)
			if st := gens[0].Stats(); st.Transformer && d1-d0 != 1+st.DepSteps {
				t.Fatalf("B=%d step %d: %d downloads for the text head and %d depformer steps", B, s, d1-d0, st.DepSteps)
			} else if s == steps-1 && st.DepSteps != AudioTokensPerStream {
				t.Fatalf("B=%d: %d depformer steps at step %d, want the agent's %d", B, st.DepSteps, s, AudioTokensPerStream)
			}
		}
		g.Close()
		perB = append(perB, counts)
	}
	if last := perB[0][steps-1]; last != 1+AudioTokensPerStream {
		t.Fatalf("B=1: %d downloads in a full step, want %d", last, 1+AudioTokensPerStream)
	}
	for s := 0; s < steps; s++ {
		for i := range perB {
			if perB[i][s] != perB[0][s] {
				t.Fatalf("step %d: %v downloads at B = 1, 4, 16", s, []int{perB[0][s], perB[1][s], perB[2][s]})
			}
		}
	}
	t.Logf("downloads per step at B = 1, 4, 16: %v", perB)
}

// SetStageTiming adds exactly one wait a pass on an asynchronous backend
// (after the temporal transformer, so that its time is the device's, not
// the host's queueing) and nothing else; off, as in jobs, there is none.
func TestStageTimingWaitsOnceAPass(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	user := SineTokens[:m.Cfg.NQ-AudioTokensPerStream]
	var ran []bool // the step ran the temporal transformer (a pass)
	waits := func(stage bool) []int {
		ran = ran[:0]
		g, st, err := cuda.NewDry(cuda.Options{ComputeDType: "f32"}, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		e := NewEngine(m, g, nil)
		e.SetStageTiming(stage)
		gens := []*Gen{e.NewGen(GenOptions{}), e.NewGen(GenOptions{Seed: 1})}
		ins := []Input{{User: user}, {User: user}}
		var out []int
		for s := 0; s < 6; s++ {
			d0, s0 := st.HostWaits()
			w0 := g.ArenaWraps()
			if err := e.Step(gens, ins); err != nil {
				t.Fatal(err)
			}
			d1, s1 := st.HostWaits()
			out = append(out, (s1-s0)-(d1-d0)-(g.ArenaWraps()-w0))
			ran = append(ran, gens[0].Stats().Transformer)
		}
		return out
	}
	off, on := waits(false), waits(true)
	passes := 0
	for s := range off {
		want := 0
		if ran[s] {
			want, passes = 1, passes+1
		}
		if off[s] != 0 || on[s] != want {
			t.Fatalf("step %d (pass %v): %d waits besides downloads without stage timing, %d with (want 0 and %d)", s, ran[s], off[s], on[s], want)
		}
	}
	if passes == 0 {
		t.Fatal("no step ran the temporal transformer")
	}
}

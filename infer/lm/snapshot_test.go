package lm

import (
	"math"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// scenarioPrompt is the system prompt of a fixture scenario.
func scenarioPrompt(t *testing.T, scenario string) SystemPrompt {
	t.Helper()
	p := SystemPrompt{TextIDs: textPromptIDs(t, scenario)}
	if scenario == "run_wav" {
		p.VoiceFrames = codes(t, tiny+"expected/mimi/voice_prompt_encode.safetensors")
	} else {
		p.VoiceEmbeddings, p.VoiceCache = voicePT(t)
	}
	return p
}

// stepAll steps g over the fixture's user frames and returns what every
// step returned (nil where nothing).
func stepAll(g *Gen, user [][]int) [][]int {
	var outs [][]int
	for _, c := range user {
		out, ok := g.Step(c)
		if !ok {
			outs = append(outs, nil)
			continue
		}
		outs = append(outs, slices.Clone(out))
	}
	return outs
}

// kvBits is every layer's keys and values, as bits, with the ring's end and
// capacity.
func kvBits(ts *nn.TransformerState) [][]uint32 { return ringBits(ts, false) }

// heldKV is what a state's rings hold: per layer, End and the keys and
// values of the slots written (all of them once a ring has wrapped, else
// [0, End) of each head), as bits, whatever the rings' capacity.
func heldKV(ts *nn.TransformerState) [][]uint32 { return ringBits(ts, true) }

func ringBits(ts *nn.TransformerState, held bool) [][]uint32 {
	var out [][]uint32
	for _, r := range ts.Rings {
		k, v := cpu.KV(r)
		row := []uint32{uint32(r.End), uint32(r.Capacity)}
		n, stride := r.Capacity*r.Dh, r.Capacity*r.Dh
		if held {
			row = row[:1]
			n = min(r.End, r.Capacity) * r.Dh
		}
		for h := range r.Heads {
			for _, x := range k[h*stride : h*stride+n] {
				row = append(row, math.Float32bits(x))
			}
			for _, x := range v[h*stride : h*stride+n] {
				row = append(row, math.Float32bits(x))
			}
		}
		out = append(out, row)
	}
	return out
}

// A conversation restored from a snapshot of its prompt phases, taken from
// another Gen (another engine, another seed, greedy or not), runs exactly
// as one that ran its own prompt phases queued into its first pass: every
// output token and, at the end, every bit of its KV cache. With sampling,
// so the restored generator must be where the unshared run's is; the
// snapshot is restored twice (it is not changed by the conversations that
// use it) and the Gen it was taken from goes on unchanged too.
func TestSnapshotRestoreExact(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
	sampled := GenOptions{UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, Seed: 7}
	for _, scenario := range []string{"run_wav", "run_pt"} {
		p := scenarioPrompt(t, scenario)
		// The prefix is computed by a Gen of other settings, alone.
		src := NewGen(m, testBE, GenOptions{UseSampling: true, Temp: 0.9, Seed: 1234})
		if err := src.StepSystemPrompts(p); err != nil {
			t.Fatal(err)
		}
		snap := src.Snapshot()
		if snap.Offset() != src.Offset() || snap.Bytes() < src.TransformerState().Bytes() {
			t.Fatalf("snapshot offset %d bytes %d; Gen offset %d KV %d", snap.Offset(), snap.Bytes(), src.Offset(), src.TransformerState().Bytes())
		}
		srcKV := kvBits(src.TransformerState())
		for _, opt := range []GenOptions{{}, sampled, {UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, Seed: 99}} {
			want := NewGen(m, testBE, opt)
			if err := want.QueueSystemPrompts(p); err != nil {
				t.Fatal(err)
			}
			wantOuts := stepAll(want, user)
			for round := 0; round < 2; round++ {
				got := NewGen(m, testBE, opt)
				got.Restore(snap)
				if got.Pending() != 0 || got.Offset() != snap.Offset() {
					t.Fatalf("restored: %d pending, offset %d", got.Pending(), got.Offset())
				}
				gotOuts := stepAll(got, user)
				if !slices.EqualFunc(gotOuts, wantOuts, slices.Equal) {
					t.Fatalf("%s seed %d sampling %v round %d: outputs differ from the unshared run", scenario, opt.Seed, opt.UseSampling, round)
				}
				if !slices.EqualFunc(kvBits(got.TransformerState()), kvBits(want.TransformerState()), slices.Equal) {
					t.Fatalf("%s seed %d round %d: KV caches differ from the unshared run", scenario, opt.Seed, round)
				}
				if !slices.EqualFunc(got.Cache(), want.Cache(), slices.Equal) {
					t.Fatalf("%s: token caches differ", scenario)
				}
			}
		}
		if !slices.EqualFunc(kvBits(src.TransformerState()), srcKV, slices.Equal) {
			t.Fatalf("%s: the source Gen's KV changed under the conversations restored from it", scenario)
		}
	}
}

// The prompt phases draw nothing from the generator: after them (queued
// and flushed, or step by step with every head run), its next value is a
// freshly seeded generator's first. This is what lets a snapshot leave the
// generator out.
func TestPromptPhasesDrawNoRandomNumbers(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	for _, scenario := range []string{"run_wav", "run_pt"} {
		for _, opt := range []GenOptions{
			{UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, Seed: 5},
			{UseSampling: true, Temp: 0.8, TempText: 0.7, Seed: 5, StepwisePrompts: true},
			{UseSampling: true, Temp: 0.8, TempText: 0.7, Seed: 5, Full: true},
		} {
			g := NewGen(m, testBE, opt)
			if err := g.StepSystemPrompts(scenarioPrompt(t, scenario)); err != nil {
				t.Fatal(err)
			}
			if got, want := g.rng.Uint64(), ops.NewRNG(opt.Seed).Uint64(); got != want {
				t.Fatalf("%s %+v: the prompt phases moved the generator (%d, fresh %d)", scenario, opt, got, want)
			}
			// And a sampled step does draw (the check above can fail).
			g2 := NewGen(m, testBE, opt)
			if err := g2.StepSystemPrompts(scenarioPrompt(t, scenario)); err != nil {
				t.Fatal(err)
			}
			g2.Step(codes(t, tiny+"expected/mimi/mimi_encode.safetensors")[0])
			if g2.rng.Uint64() == ops.NewRNG(opt.Seed).Uint64() {
				t.Fatalf("%s: a sampled step left the generator fresh", scenario)
			}
		}
	}
}

// Restoring into a Gen of another model is refused (a programming error).
func TestRestoreOtherModelPanics(t *testing.T) {
	a, b := tinyModel(t, "model.safetensors"), tinyModel(t, "model-dep8.safetensors")
	snap := NewGen(a, testBE, GenOptions{}).Snapshot()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	NewGen(b, testBE, GenOptions{}).Restore(snap)
}

// Snapshot and Restore on the CUDA backend's dry driver: the rings are
// copied device to device into storage of their own (the snapshot's, the
// restored Gen's: no aliasing), at the source's capacity and end, the
// restored conversation steps, and the memory limit holds.
func TestSnapshotCUDADry(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	for _, scenario := range []string{"run_wav", "run_pt"} {
		g, _, err := cuda.NewDry(cuda.Options{ComputeDType: "f32", CPU: testBE}, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		src := NewGen(m, g, GenOptions{})
		if err := src.QueueSystemPrompts(scenarioPrompt(t, scenario)); err != nil {
			t.Fatal(err)
		}
		snap := src.Snapshot()
		if src.Pending() != 0 {
			t.Fatal("Snapshot left the prefill pending")
		}
		dst := NewGen(m, g, GenOptions{UseSampling: true, Temp: 0.8, Seed: 3})
		dst.Restore(snap)
		a, s, d := src.TransformerState(), snap.ts, dst.TransformerState()
		if d.Offset != a.Offset || s.Offset != a.Offset {
			t.Fatalf("offsets %d %d %d", a.Offset, s.Offset, d.Offset)
		}
		for l := range a.Rings {
			ra, rs, rd := a.Rings[l], s.Rings[l], d.Rings[l]
			for _, r := range []*backend.Ring{rs, rd} {
				if r.End != ra.End || r.Capacity != ra.Capacity || r.Heads != ra.Heads || r.Dh != ra.Dh {
					t.Fatalf("layer %d: ring end %d capacity %d, source %d %d", l, r.End, r.Capacity, ra.End, ra.Capacity)
				}
			}
			if rs.Data == ra.Data || rd.Data == ra.Data || rd.Data == rs.Data {
				t.Fatalf("layer %d: a copied ring shares the storage of another", l)
			}
		}
		for _, c := range codes(t, tiny+"expected/mimi/mimi_encode.safetensors")[:4] {
			dst.Step(c)
		}
		if dst.Offset() != snap.Offset()+4 || dst.TransformerState().Offset != s.Offset+4 {
			t.Fatalf("after 4 steps: offset %d, snapshot %d", dst.Offset(), snap.Offset())
		}
		if used, peak, limit := g.Memory(); used > limit || peak > limit {
			t.Fatalf("%d used, %d peak of %d", used, peak, limit)
		}
		g.Close()
	}
}

// A Gen renewed after a longer conversation of other settings (its rings
// larger than the next one needs and full of that conversation's keys)
// runs the next conversation exactly as a new Gen does: with its prompt
// phases queued or restored from a snapshot, greedy or sampled (the
// generator reseeded from the new seed): every output, the token cache and
// every key and value held.
func TestRenewExact(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	user := codes(t, tiny+"expected/mimi/mimi_encode.safetensors")
	sampled := GenOptions{UseSampling: true, Temp: 0.8, TempText: 0.7, TopK: 250, TopKText: 25, Seed: 7}
	for _, scenario := range []string{"run_wav", "run_pt"} {
		p := scenarioPrompt(t, scenario)
		src := NewGen(m, testBE, GenOptions{Seed: 3})
		if err := src.StepSystemPrompts(p); err != nil {
			t.Fatal(err)
		}
		snap := src.Snapshot()
		for _, opt := range []GenOptions{{}, sampled} {
			want := NewGen(m, testBE, opt)
			if err := want.QueueSystemPrompts(p); err != nil {
				t.Fatal(err)
			}
			wantOuts := stepAll(want, user)
			for _, restore := range []bool{false, true} {
				old := NewGen(m, testBE, GenOptions{UseSampling: true, Temp: 1, Seed: 11})
				if err := old.QueueSystemPrompts(p); err != nil {
					t.Fatal(err)
				}
				old.Reserve(len(user) + 40)
				stepAll(old, user)
				stepAll(old, user[:20])
				g := old
				kept, _ := cpu.KV(g.TransformerState().Rings[0])
				g.Renew(opt)
				if g.Offset() != 0 || g.Pending() != 0 || g.Options().Seed != opt.Seed || g.Options().UseSampling != opt.UseSampling {
					t.Fatalf("renewed: offset %d, %d pending, options %+v", g.Offset(), g.Pending(), g.Options())
				}
				if restore {
					g.Restore(snap)
				} else if err := g.QueueSystemPrompts(p); err != nil {
					t.Fatal(err)
				}
				g.Reserve(len(user))
				gotOuts := stepAll(g, user)
				if !slices.EqualFunc(gotOuts, wantOuts, slices.Equal) {
					t.Fatalf("%s sampling %v restore %v: outputs differ from a new Gen's", scenario, opt.UseSampling, restore)
				}
				if !slices.EqualFunc(heldKV(g.TransformerState()), heldKV(want.TransformerState()), slices.Equal) {
					t.Fatalf("%s sampling %v restore %v: KV caches differ from a new Gen's", scenario, opt.UseSampling, restore)
				}
				if !slices.EqualFunc(g.Cache(), want.Cache(), slices.Equal) {
					t.Fatalf("%s: token caches differ", scenario)
				}
				// The point of it: the rings kept their memory.
				if k, _ := cpu.KV(g.TransformerState().Rings[0]); &k[0] != &kept[0] {
					t.Fatalf("%s restore %v: the renewed Gen's rings were allocated again", scenario, restore)
				}
			}
		}
	}
}

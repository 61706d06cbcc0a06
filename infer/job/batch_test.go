package job

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/voices"
)

const tinyDir = "../../testdata/tiny/"

func tinyOptions(t *testing.T) Options {
	t.Helper()
	cfg, err := config.Load(tinyDir + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Config: cfg, Tokenizer: tinyDir + "tokenizer.model",
		MoshiWeight: tinyDir + "model.safetensors", MimiWeight: tinyDir + "mimi.safetensors",
		Device: DeviceOptions{Name: "cpu"},
	}
}

// writeInput writes the first n samples of the tiny input as a WAV.
func writeInput(t *testing.T, dir string, n int) string {
	t.Helper()
	x, err := audio.LoadMono(tinyDir+"input.wav", 24000)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("input-%d.wav", n))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := audio.EncodePCM16(f, x[:min(n, len(x))], 24000); err != nil {
		t.Fatal(err)
	}
	return p
}

// batchItems is a mix of everything a batch can hold: inputs of different
// lengths, .pt (f32 and bf16) and WAV voices, empty and non-empty text
// prompts, greedy and sampled decoding with different seeds, and two bad
// items (a missing WAV, a voice of the wrong width).
func batchItems(t *testing.T) (items []*Item, bad map[string]string) {
	dir := t.TempDir()
	full := tinyDir + "input.wav"
	short := writeInput(t, dir, 1920*9+700)
	mid := writeInput(t, dir, 1920*23)
	tiny2 := writeInput(t, dir, 1920*3)
	pt, pt16, wav := tinyDir+"voices/TINYF0.pt", tinyDir+"voices/TINYF0-bf16.pt", tinyDir+"voices/TINYF0.wav"
	p, err := voices.LoadPT(pt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Embeddings {
		p.Embeddings[i] = append(p.Embeddings[i], 0) // one value too many
	}
	wide := filepath.Join(dir, "WIDE.pt")
	if err := voices.SavePT(wide, p); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.wav")
	sampled := func(seed int64) Item {
		return Item{TempAudio: 0.8, TempText: 0.7, TopKAudio: 250, TopKText: 25, Seed: seed}
	}
	greedy := Item{Greedy: true}
	add := func(base Item, in, voice, text string) {
		it := base
		it.InputWAV, it.VoicePrompt, it.TextPrompt = in, voice, text
		it.Tag = len(items)
		items = append(items, &it)
	}
	add(greedy, full, pt, "You enjoy having a good conversation.")
	add(sampled(7), short, wav, "")
	add(sampled(42), mid, pt16, "Be brief.")
	add(greedy, missing, pt, "")
	add(greedy, tiny2, wav, "You are a helpful assistant who answers every question.")
	add(sampled(7), full, pt, "")
	add(greedy, short, pt, "Be brief.")
	add(sampled(3), mid, wav, "You enjoy having a good conversation.")
	add(greedy, full, wide, "")
	add(sampled(99), full, pt16, "Hello.")
	add(sampled(11), tiny2, pt, "")
	return items, map[string]string{missing: "missing.wav", wide: "WIDE.pt"}
}

type outcome struct {
	pcm    []uint32
	pieces []string
	err    string
}

func runBatch(t *testing.T, o Options, items []*Item) map[int]outcome {
	t.Helper()
	got := map[int]outcome{}
	err := RunItems(context.Background(), o, Items(items...), func(r ItemResult) {
		k := r.Item.Tag.(int)
		if _, dup := got[k]; dup {
			t.Errorf("item %d reported twice", k)
		}
		if r.Err != nil {
			got[k] = outcome{err: r.Err.Error()}
			return
		}
		var bits []uint32
		for _, v := range r.Result.PCM {
			bits = append(bits, math.Float32bits(v))
		}
		got[k] = outcome{pcm: bits, pieces: r.Result.Pieces}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(items) {
		t.Fatalf("%d of %d items reported", len(got), len(items))
	}
	return got
}

// Every item of a lockstep batch gives exactly (bit for bit) what it gives
// alone, whatever the batch size, its slot and the join order: mixed input
// lengths (so items leave and others join mid-batch), .pt and WAV voices,
// empty and other text prompts, greedy and sampled. A bad item fails alone,
// with a message naming its file.
func TestBatchEqualsSingleRuns(t *testing.T) {
	o := tinyOptions(t)
	items, bad := batchItems(t)
	single := map[int]outcome{}
	for _, it := range items {
		maps := runBatch(t, o, []*Item{it})
		single[it.Tag.(int)] = maps[it.Tag.(int)]
	}
	for _, it := range items {
		s := single[it.Tag.(int)]
		if name, isBad := bad[it.InputWAV]; isBad || bad[it.VoicePrompt] != "" {
			if !isBad {
				name = bad[it.VoicePrompt]
			}
			if s.err == "" || !strings.Contains(s.err, name) {
				t.Fatalf("bad item %d: error %q does not name %s", it.Tag, s.err, name)
			}
			continue
		}
		if s.err != "" || len(s.pieces) == 0 {
			t.Fatalf("item %d failed alone: %s", it.Tag, s.err)
		}
	}
	reversed := slices.Clone(items)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		name  string
		b     int
		items []*Item
	}{
		{"B=1 one engine", 1, items},
		{"B=3", 3, items},
		{"B=8", 8, items},
		{"B=3 reversed", 3, reversed},
		{"B=16 (all at once)", 16, items},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob := o
			ob.BatchSize = tc.b
			got := runBatch(t, ob, tc.items)
			for k, want := range single {
				g := got[k]
				if g.err != want.err {
					t.Fatalf("item %d: error %q, alone %q", k, g.err, want.err)
				}
				if !slices.Equal(g.pieces, want.pieces) {
					t.Fatalf("item %d: transcript differs from its single run", k)
				}
				if !slices.Equal(g.pcm, want.pcm) {
					t.Fatalf("item %d: audio differs from its single run", k)
				}
			}
		})
	}
}

// An input or voice WAV holding a NaN or infinite sample fails its item
// (one NaN once silenced 33 of 125 frames with exit 0).
func TestNonFiniteAudioRefused(t *testing.T) {
	o := tinyOptions(t)
	dir := t.TempDir()
	x, err := audio.LoadMono(tinyDir+"input.wav", 24000)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, v float32) string {
		y := slices.Clone(x)
		y[5000] = v
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := audio.EncodeFloat32(f, y, 24000); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nan, inf := write("nan.wav", float32(math.NaN())), write("inf.wav", float32(math.Inf(-1)))
	items := []*Item{
		{InputWAV: nan, VoicePrompt: tinyDir + "voices/TINYF0.pt", Greedy: true, Tag: 0},
		{InputWAV: tinyDir + "input.wav", VoicePrompt: inf, Greedy: true, Tag: 1},
		{InputWAV: tinyDir + "input.wav", VoicePrompt: tinyDir + "voices/TINYF0.pt", Greedy: true, Tag: 2},
	}
	got := runBatch(t, o, items)
	for k, want := range map[int]string{0: nan + ": sample 5000 (at 0.208 s) is NaN", 1: inf + ": sample 5000"} {
		if !strings.Contains(got[k].err, want) {
			t.Errorf("item %d: %q, want %q", k, got[k].err, want)
		}
	}
	if got[2].err != "" || len(got[2].pieces) == 0 {
		t.Errorf("the good item: %q", got[2].err)
	}
}

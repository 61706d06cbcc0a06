package lm

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Both tiny checkpoints load; the 8-step one through get_moshi_lm's two
// patches (4 "Expanding", 55 "Replacing" in the reference's log), as views:
// its step 8+i is step i of the same mapped tensor, and equals step i of the
// full checkpoint.
func TestLoadPatches(t *testing.T) {
	full := tinyModel(t, "model.safetensors")
	dep8 := tinyModel(t, "model-dep8.safetensors")
	if len(full.Expanded) != 0 || len(full.Replaced) != 0 {
		t.Fatalf("full checkpoint patched: %v %v", full.Expanded, full.Replaced)
	}
	if len(dep8.Expanded) != 4 || len(dep8.Replaced) != 55 {
		t.Fatalf("dep8: %d expanded, %d replaced; the reference logs 4 and 55", len(dep8.Expanded), len(dep8.Replaced))
	}
	same := func(a, b *backend.Weight) bool {
		return a.Rows == b.Rows && a.Cols == b.Cols && bytes.Equal(a.Host, b.Host)
	}
	alias := func(a, b *backend.Weight) bool { return len(a.Host) > 0 && &a.Host[0] == &b.Host[0] } // same memory
	d, f := dep8.Dep, full.Dep
	for i := 0; i < 8; i++ {
		for li := range d.steps[0].Layers {
			l8, l, lf := d.steps[8+i].Layers[li], d.steps[i].Layers[li], f.steps[i].Layers[li]
			checks := []struct {
				name      string
				a, b, ref *backend.Weight
			}{
				{"in_proj", l8.InProj, l.InProj, lf.InProj},
				{"out_proj", l8.OutProj, l.OutProj, lf.OutProj},
				{"gating.in", l8.GateIn, l.GateIn, lf.GateIn},
				{"gating.out", l8.GateOut, l.GateOut, lf.GateOut},
			}
			for _, c := range checks {
				if !alias(c.a, c.b) || !same(c.a, c.ref) {
					t.Fatalf("layer %d %s step %d: not an alias of step %d equal to the full checkpoint's", li, c.name, 8+i, i)
				}
			}
		}
		if !alias(d.steps[8+i].In, d.steps[i].In) || !alias(d.steps[8+i].Linear, d.steps[i].Linear) || !same(d.steps[8+i].Linear, f.steps[i].Linear) {
			t.Fatalf("depformer_in / linears step %d", 8+i)
		}
		if i < 7 && (!alias(d.Emb[8+i], d.Emb[i]) || !same(d.Emb[8+i], f.Emb[i])) {
			t.Fatalf("depformer_emb %d", 8+i)
		}
	}
	if alias(f.steps[8].Layers[0].InProj, f.steps[0].Layers[0].InProj) {
		t.Fatal("full checkpoint: step 8 aliases step 0")
	}
	// A true original 8-step checkpoint lacks depformer_emb.7, which no patch
	// provides (the reference leaves it on the meta device and crashes): refused, naming it.
	src, err := weights.Open(tiny + "model-dep8.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	var keep []*weights.Tensor
	for _, n := range src.Names() {
		if n != "depformer_emb.7.weight" {
			tt, _ := src.Get(n)
			keep = append(keep, tt)
		}
	}
	var buf bytes.Buffer
	if err := weights.Write(&buf, keep, nil); err != nil {
		t.Fatal(err)
	}
	mf, err := weights.FromBytes("moshi-dep8", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&dep8.Cfg, mf); err == nil || !strings.Contains(err.Error(), "depformer_emb.7.weight") {
		t.Fatalf("checkpoint without depformer_emb.7: %v", err)
	} else {
		t.Log(err)
	}
	// A checkpoint missing a layer is refused, naming the tensor.
	cfg, _ := config.Load(tiny + "config.json")
	c := cfg.LM
	c.DepQ = 16
	c.NumLayers = 3
	if _, err := Open(&c, tiny+"model.safetensors"); err == nil {
		t.Fatal("a 3-layer config loaded a 2-layer checkpoint")
	} else {
		t.Log(err)
	}
}

// Layer by layer against lm_trace.safetensors (run_wav's rows replayed
// teacher-forced from the reset), and the first depformer step of row 96.
func TestLMTrace(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	f, err := weights.Open(tiny + "expected/lm_trace.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	s := loadSteps(t, "run_wav")
	c := m.Cfg
	// A one-layer view of the temporal transformer gives layer 0's output.
	wf, err := weights.Open(tiny + "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	tr0, err := nn.LoadTransformer(wf, "transformer", nn.TransformerConfig{
		DModel: c.Dim, NumHeads: c.NumHeads, NumLayers: 1, DimFeedforward: c.DimFeedforward(),
		Context: c.Context, Norm: c.Norm, Gating: c.Gating, PosEmb: c.PosEmb, MaxPeriod: c.MaxPeriod,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := newHost(m)
	sc0 := tr0.NewScratch(testBE)
	st, st0 := m.Transformer.NewState(testBE), tr0.NewState(testBE)
	x, x0, h := make([]float32, c.Dim), make([]float32, c.Dim), make([]float32, c.Dim)
	logits := make([]float32, m.TextLinear.Rows)
	worst := 0.0
	check := func(name string, got, want []float32) {
		t.Helper()
		e := relErr(got, want)
		worst = math.Max(worst, e)
		if e > 1e-4 {
			t.Errorf("%s: rel err %.3g", name, e)
		}
	}
	for r := 3; r <= 134; r++ {
		if s.Offset[r] != r-2 {
			t.Fatalf("row %d: offset %d", r, s.Offset[r])
		}
		hs.embedCodes(x, s.Input[r])
		copy(x0, x)
		p := fmt.Sprintf("row%d.", r)
		rec := f.Has(p + "embedding_sum")
		if rec {
			check(p+"input_tokens", toF(s.Input[r]), toF(ints(t, f, p+"input_tokens")))
			if pos := ints(t, f, p+"rope_position")[0]; pos != st.Offset {
				t.Fatalf("%s rope position %d, state offset %d", p, pos, st.Offset)
			}
			check(p+"embedding_sum", x, floats(t, f, p+"embedding_sum"))
		}
		hs.temporal(tr0, sc0, st0, x0)
		hs.step(st, x, h, logits)
		if !rec {
			continue
		}
		check(p+"layer0_out", x0, floats(t, f, p+"layer0_out"))
		check(p+"layer1_out", x, floats(t, f, p+"layer1_out"))
		check(p+"out_norm_out", h, floats(t, f, p+"out_norm_out"))
		check(p+"text_logits", logits, floats(t, f, p+"text_logits"))
		if r == 96 {
			ds := m.Dep.Tr.NewState(testBE)
			in := make([]float32, m.Dep.Dim)
			outs := map[int][]float32{}
			dl := make([]float32, c.Card)
			hs.depStep(ds, 0, h, s.Next[96][0], in, dl, func(layer int, v []float32) { outs[layer] = v })
			check(p+"depformer0_input", in, floats(t, f, p+"depformer0_input"))
			check(p+"depformer0_layer0_out", outs[0], floats(t, f, p+"depformer0_layer0_out"))
			check(p+"depformer0_layer1_out", outs[1], floats(t, f, p+"depformer0_layer1_out"))
			check(p+"depformer0_logits", dl, floats(t, f, p+"depformer0_logits"))
		}
	}
	t.Logf("worst rel err %.3g", worst)
}

func toF(v []int) []float32 {
	out := make([]float32, len(v))
	for i, a := range v {
		out[i] = float32(a)
	}
	return out
}

// teacherForce replays a scenario's transformer inputs in execution order
// (warmup rows included, a fresh state wherever the reference reset: offset 1),
// with every depformer step fed the recorded next tokens, and hands each
// row's text logits and the logits of all dep_q depformer steps to visit.
func teacherForce(t *testing.T, m *Model, s *steps, embeddings [][]float32, visit func(r int, text []float32, audio [][]float32)) {
	c := m.Cfg
	hs := newHost(m)
	st, ds := m.Transformer.NewState(testBE), m.Dep.Tr.NewState(testBE)
	x, h := make([]float32, c.Dim), make([]float32, c.Dim)
	text := make([]float32, m.TextLinear.Rows)
	audio := make([][]float32, c.DepQ)
	for j := range audio {
		audio[j] = make([]float32, c.Card)
	}
	for r := 0; r < s.S; r++ {
		if s.Offset[r] == 1 {
			st.Reset()
		}
		if s.FromEmb[r] {
			copy(x, embeddings[s.EmbIndex[r]])
		} else {
			hs.embedCodes(x, s.Input[r])
		}
		hs.step(st, x, h, text)
		ds.Reset()
		for j := 0; j < c.DepQ; j++ {
			hs.depStep(ds, j, h, s.Next[r][j], nil, audio[j], nil)
		}
		visit(r, text, audio)
	}
}

// checkTops compares, for every row and channel, the top-1 / top-2 logits
// with the reference's (all of them: they are values, not decisions), and the
// argmax with the reference's sampled token wherever that token is used.
func checkTops(t *testing.T, s *steps, r int, text []float32, audio [][]float32, worst *float64, decisions *int) {
	t.Helper()
	for k := 0; k < s.K; k++ {
		lg := text
		if k > 0 {
			lg = audio[k-1]
		}
		arg, t1, t2 := top2(lg)
		scale := math.Max(1, math.Abs(float64(s.Top1[r][k])))
		e := math.Max(math.Abs(float64(t1-s.Top1[r][k])), math.Abs(float64(t2-s.Top2[r][k]))) / scale
		*worst = math.Max(*worst, e)
		if e > 1e-4 {
			t.Errorf("row %d channel %d: top1/top2 %g %g, reference %g %g", r, k, t1, t2, s.Top1[r][k], s.Top2[r][k])
		}
		if !s.Provided[r][k] {
			*decisions++
			if arg != s.Sampled[r][k] {
				t.Errorf("row %d channel %d: argmax %d, reference sampled %d", r, k, arg, s.Sampled[r][k])
			}
		}
	}
}

// Teacher-forced on run_pt: text logits of every row, the stored depformer
// audio logits of the 39 user steps (codebooks 0..7), top1/top2 of every
// channel, argmaxes of every used decision.
func TestTeacherForcedRunPT(t *testing.T) {
	m := tinyModel(t, "model.safetensors")
	s := loadSteps(t, "run_pt")
	embs, _ := voicePT(t)
	audioRow := map[int]int{}
	for i, r := range s.AudioStep {
		audioRow[r] = i
	}
	var textWorst, audioWorst, topWorst float64
	decisions, audioChecked := 0, 0
	teacherForce(t, m, s, embs, func(r int, text []float32, audio [][]float32) {
		e := relErr(text, s.TextLogits[r])
		textWorst = math.Max(textWorst, e)
		if e > 1e-4 {
			t.Errorf("row %d: text logits rel err %.3g", r, e)
		}
		checkTops(t, s, r, text, audio, &topWorst, &decisions)
		i, ok := audioRow[r]
		if !ok {
			return
		}
		for ci, cb := range s.AudioCodebooks {
			got := audio[cb]
			// Reference ≈ top1 + rel, rel rounded to float16: allow half an
			// f16 spacing of rel on top of the 1e-4 relative tolerance.
			var maxRef float64
			ref := make([]float32, len(got))
			for v := range got {
				ref[v] = s.AudioTop1[i][ci] + weights.HalfToFloat(s.AudioRel[i][ci][v])
				maxRef = math.Max(maxRef, math.Abs(float64(ref[v])))
			}
			var worst float64
			for v := range got {
				rel := float64(weights.HalfToFloat(s.AudioRel[i][ci][v]))
				halfULP := f16Spacing(rel) / 2
				d := math.Abs(float64(got[v])-float64(ref[v])) - halfULP
				worst = math.Max(worst, d/maxRef)
			}
			audioWorst = math.Max(audioWorst, worst)
			audioChecked++
			if worst > 1e-4 {
				t.Errorf("row %d codebook %d: audio logits rel err %.3g beyond the f16 rounding", r, cb, worst)
			}
		}
	})
	if audioChecked != 39*8 {
		t.Fatalf("checked %d audio logit rows, want %d", audioChecked, 39*8)
	}
	t.Logf("text logits rel err ≤ %.3g; audio logits rel err (beyond f16 rounding) ≤ %.3g; top1/top2 rel err ≤ %.3g; %d argmax decisions match", textWorst, audioWorst, topWorst, decisions)
}

// f16Spacing is the distance between consecutive float16 values around v.
func f16Spacing(v float64) float64 {
	a := math.Abs(v)
	if a < 6.103515625e-05 {
		return math.Ldexp(1, -24)
	}
	_, e := math.Frexp(a) // a = frac · 2^e, frac in [0.5, 1)
	return math.Ldexp(1, e-11)
}

// Teacher-forced on run_dep8 with the 8-step checkpoint: top1/top2 of every
// channel, including 9..16 which depformer steps 8..15 (the patched aliases
// of steps 0..7) predict and which differ from run_pt's.
func TestTeacherForcedRunDep8(t *testing.T) {
	m := tinyModel(t, "model-dep8.safetensors")
	s := loadSteps(t, "run_dep8")
	pt := loadSteps(t, "run_pt")
	embs, _ := voicePT(t)
	var worst float64
	decisions, differ := 0, 0
	teacherForce(t, m, s, embs, func(r int, text []float32, audio [][]float32) {
		checkTops(t, s, r, text, audio, &worst, &decisions)
		for k := 9; k < s.K; k++ {
			if s.Top1[r][k] != pt.Top1[r][k] {
				differ++
			}
		}
	})
	if differ == 0 {
		t.Fatal("run_dep8's user-stream logits equal run_pt's: the test would not see the patch")
	}
	t.Logf("top1/top2 rel err ≤ %.3g (%d user-stream values differ from run_pt); %d argmax decisions match", worst, differ, decisions)
}

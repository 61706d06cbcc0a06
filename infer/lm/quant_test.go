package lm

import (
	"bytes"
	"fmt"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// forced is the teacher-forced logits of every row: text, and the dep_q
// depformer steps' audio.
type forced struct {
	text  [][]float32
	audio [][][]float32
}

func force(t *testing.T, m *Model, s *steps, embs [][]float32) forced {
	var f forced
	teacherForce(t, m, s, embs, func(r int, text []float32, audio [][]float32) {
		f.text = append(f.text, append([]float32(nil), text...))
		a := make([][]float32, len(audio))
		for j := range audio {
			a[j] = append([]float32(nil), audio[j]...)
		}
		f.audio = append(f.audio, a)
	})
	return f
}

// quality is how far a quantized model's logits are from the float
// model's: relative L2 error per row (mean and worst) and top-1 agreement.
type quality struct {
	textRel, textRelMax, audioRel, audioRelMax float64
	textTop1, audioTop1                        float64
}

func l2Rel(a, b []float32) float64 {
	var e, r float64
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		e += d * d
		r += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(e / math.Max(r, 1e-30))
}

func argmax(x []float32) int {
	a, _, _ := top2(x)
	return a
}

func compareForced(q, base forced) quality {
	var r quality
	var nt, na, agreeT, agreeA float64
	for i := range base.text {
		e := l2Rel(q.text[i], base.text[i])
		r.textRel += e
		r.textRelMax = math.Max(r.textRelMax, e)
		nt++
		if argmax(q.text[i]) == argmax(base.text[i]) {
			agreeT++
		}
		for j := range base.audio[i] {
			e := l2Rel(q.audio[i][j], base.audio[i][j])
			r.audioRel += e
			r.audioRelMax = math.Max(r.audioRelMax, e)
			na++
			if argmax(q.audio[i][j]) == argmax(base.audio[i][j]) {
				agreeA++
			}
		}
	}
	r.textRel /= nt
	r.audioRel /= na
	r.textTop1, r.audioTop1 = agreeT/nt, agreeA/na
	return r
}

func (q quality) String() string {
	return fmt.Sprintf("text rel err %.4f (max %.4f), top-1 %.1f%%; audio rel err %.4f (max %.4f), top-1 %.1f%%",
		q.textRel, q.textRelMax, 100*q.textTop1, q.audioRel, q.audioRelMax, 100*q.audioTop1)
}

func freshTiny(t *testing.T) *Model {
	t.Helper()
	return loadTiny(t, "model.safetensors")
}

// quantPicks are the choices of tensors measured: the default
// (QuantDType), the text head kept in bf16, the text head in the format,
// and the depformer's audio heads linears.* in the format too.
var quantPicks = []struct {
	name string
	pick func(string, weights.DType) weights.DType
}{
	{"default", QuantDType},
	{"text_linear bf16", func(n string, f weights.DType) weights.DType {
		if n == "text_linear.weight" {
			return ""
		}
		return QuantDType(n, f)
	}},
	{"text_linear fmt", func(n string, f weights.DType) weights.DType {
		if n == "text_linear.weight" {
			return f
		}
		return QuantDType(n, f)
	}},
	{"+linears", func(n string, f weights.DType) weights.DType {
		if strings.HasPrefix(n, "linears.") {
			return f
		}
		return QuantDType(n, f)
	}},
}

func defaultPick(f weights.DType) func(string) weights.DType {
	return func(n string) weights.DType { return QuantDType(n, f) }
}

// Quality on the tiny fixture (run_pt, teacher-forced): the logits of q8_0
// and q4_K models against the BF16 model's, for the default choice of
// tensors and two others (text_linear quantized too; linears.* kept). The
// table in docs/QUANTIZATION.md is this test's log.
func TestQuantQualityTiny(t *testing.T) {
	s := loadSteps(t, "run_pt")
	embs, _ := voicePT(t)
	base := force(t, tinyModel(t, "model.safetensors"), s, embs)
	for _, dt := range []weights.DType{weights.Q8_0, weights.Q4_K} {
		for _, p := range quantPicks {
			m := freshTiny(t)
			rep, err := m.quantizeWeights(dt, nil, func(n string) weights.DType { return p.pick(n, dt) })
			if err != nil {
				t.Fatal(err)
			}
			q := compareForced(force(t, m, s, embs), base)
			t.Logf("tiny %s %-16s %d tensors %.2f× bytes: %v", dt, p.name, rep.Tensors, float64(rep.Bytes)/float64(rep.SourceBytes), q)
			if p.name != "default" {
				continue
			}
			lim := map[weights.DType]quality{
				weights.Q8_0: {textRel: 0.02, audioRel: 0.02, textTop1: 0.95, audioTop1: 0.9},
				weights.Q4_K: {textRel: 0.15, audioRel: 0.15, textTop1: 0.7, audioTop1: 0.6},
			}[dt]
			if q.textRel > lim.textRel || q.audioRel > lim.audioRel || q.textTop1 < lim.textTop1 || q.audioTop1 < lim.audioTop1 {
				t.Errorf("%s: %v, beyond %v", dt, q, lim)
			}
		}
	}
}

// Quantizing is deterministic, a quantized file maps to the same blocks as
// quantizing at load, and the quantized model gives the same logits on
// every kernel variant and thread count.
func TestQuantDeterministic(t *testing.T) {
	s := loadSteps(t, "run_pt")
	embs, _ := voicePT(t)
	s.S = 12 // a few rows are enough here
	for _, dt := range []weights.DType{weights.Q8_0, weights.Q4_K} {
		a, b := freshTiny(t), freshTiny(t)
		if _, err := a.QuantizeWeights(dt, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.QuantizeWeights(dt, ops.Parallel); err != nil {
			t.Fatal(err)
		}
		wa, wb := a.quantTargets(defaultPick(dt)), b.quantTargets(defaultPick(dt))
		for i := range wa {
			if wa[i].DType != QuantDType(wa[i].Name, dt) || !bytes.Equal(wa[i].Host, wb[i].Host) {
				t.Fatalf("%s: %s differs between two quantizations", dt, wa[i].Name)
			}
		}
		// A file written from the model's blocks loads to the same weights.
		path := t.TempDir() + "/q.safetensors"
		if err := writeQuantizedCopy(a, dt, tiny+"model.safetensors", path); err != nil {
			t.Fatal(err)
		}
		cfg, _ := config.Load(tiny + "config.json")
		c, err := Open(&cfg.LM, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() }) // unmapped before TempDir's removal: Windows cannot remove a mapped file
		wc := c.quantTargets(defaultPick(dt))
		for i := range wa {
			if wc[i].DType != wa[i].DType || !bytes.Equal(wa[i].Host, wc[i].Host) {
				t.Fatalf("%s: %s from the file differs", dt, wa[i].Name)
			}
		}
		var want forced
		for _, k := range ops.KernelNames() {
			for _, th := range []int{1, 2} {
				be, err := cpu.New(cpu.Options{Kernel: k, Threads: th})
				if err != nil {
					t.Fatal(err)
				}
				prev := testBE
				testBE = be
				got := force(t, c, s, embs)
				testBE = prev
				be.Close()
				if want.text == nil {
					want = got
					continue
				}
				for r := range want.text {
					if !sameBits(got.text[r], want.text[r]) {
						t.Fatalf("%s kernel %s threads %d: row %d text logits differ", dt, k, th, r)
					}
					for j := range want.audio[r] {
						if !sameBits(got.audio[r][j], want.audio[r][j]) {
							t.Fatalf("%s kernel %s threads %d: row %d step %d audio logits differ", dt, k, th, r, j)
						}
					}
				}
			}
		}
	}
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// writeQuantizedCopy writes src with the quantized weights of m (the
// tensors QuantDType picks) in their blocks: what `pp-offline quantize`
// writes, for the test.
func writeQuantizedCopy(m *Model, format weights.DType, src, dst string) error {
	f, err := weights.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	blocks := map[string]*weights.Tensor{}
	for _, w := range m.quantTargets(defaultPick(format)) {
		t, _ := f.Get(w.Name)
		if _, ok := blocks[w.Name]; ok || w.Rows*w.Cols != t.Numel() {
			continue // per-step row slices: quantized again below
		}
		blocks[w.Name] = &weights.Tensor{Name: w.Name, DType: w.DType, Shape: t.Shape, Data: w.Host}
	}
	var ts []*weights.Tensor
	for _, n := range f.Names() {
		t, _ := f.Get(n)
		if b, ok := blocks[n]; ok {
			ts = append(ts, b)
		} else if dt := QuantDType(n, format); dt != "" {
			d, err := weights.QuantizeTensor(t, dt, nil)
			if err != nil {
				return err
			}
			ts = append(ts, &weights.Tensor{Name: n, DType: dt, Shape: t.Shape, Data: d})
		} else {
			ts = append(ts, t)
		}
	}
	return weights.WriteFile(dst, ts, map[string]string{weights.MetaFormat: weights.QuantFormat})
}

// Quality at the ~1.3B shape (testdata/personaplex-1b.config.json) with
// random weights and random tokens, teacher-forced: set
// PP_OFFLINE_QUANT_1B=1 (minutes and ~6 GB of RAM; not part of the usual
// run).
func TestQuantQuality1B(t *testing.T) {
	if os.Getenv("PP_OFFLINE_QUANT_1B") == "" {
		t.Skip("set PP_OFFLINE_QUANT_1B=1 to measure the 1.3B shape")
	}
	cfg, err := config.Load("../../testdata/personaplex-1b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	lc := cfg.LM
	lc.Context = 64
	for dt, q := range randomShapeQuality(t, &lc, 6) {
		t.Logf("1.3B random %s: %v", dt, q)
	}
}

// Quality on the other-shape model of the e2e tests (TestOtherModelSizesRun:
// dim 96, 3 layers, a 1-layer depformer of 48, random weights), random
// tokens, teacher-forced. Rows of 96 and 48 are not whole q4_K
// super-blocks: they are zero-padded, so q4_k stores more than bf16 here.
func TestQuantQualityOtherShape(t *testing.T) {
	cfg, err := config.Load(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	lc := cfg.LM
	lc.Dim, lc.NumHeads, lc.NumLayers, lc.Context = 96, 6, 3, 40
	lc.DepformerDim, lc.DepformerNumHeads, lc.DepformerNumLayers, lc.DepformerDimFeedforward = 48, 3, 1, 100
	lim := map[weights.DType]quality{
		weights.Q8_0: {textRel: 0.01, audioRel: 0.01, textTop1: 0.9, audioTop1: 0.95},
		weights.Q4_K: {textRel: 0.08, audioRel: 0.12, textTop1: 0.85, audioTop1: 0.8},
	}
	for dt, q := range randomShapeQuality(t, &lc, 24) {
		t.Logf("other shape random %s: %v", dt, q)
		l := lim[dt]
		if q.textRel > l.textRel || q.audioRel > l.audioRel || q.textTop1 < l.textTop1 || q.audioTop1 < l.audioTop1 {
			t.Errorf("%s: %v, beyond %v", dt, q, l)
		}
	}
}

// randomShapeQuality compares, teacher-forced over rows random steps, the
// logits of a random-weight model of shape lc quantized to q8_0 and q4_K
// against the bf16 model's.
func randomShapeQuality(t *testing.T, lc *config.LM, rows int) map[weights.DType]quality {
	t.Helper()
	specs := WeightSpecs(lc, weights.BF16)
	load := func() *Model {
		m, err := Load(lc, weights.Random(specs, 1))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	rng := rand.New(rand.NewPCG(11, 12))
	s := &steps{S: rows, K: lc.NQ + 1}
	for r := 0; r < s.S; r++ {
		s.Offset = append(s.Offset, r+1)
		s.FromEmb = append(s.FromEmb, false)
		s.EmbIndex = append(s.EmbIndex, 0)
		in := []int{rng.IntN(lc.TextCard)}
		for k := 0; k < lc.NQ; k++ {
			in = append(in, rng.IntN(lc.Card))
		}
		s.Input = append(s.Input, in)
		next := make([]int, lc.DepQ)
		next[0] = rng.IntN(lc.TextCard)
		for j := 1; j < lc.DepQ; j++ {
			next[j] = rng.IntN(lc.Card)
		}
		s.Next = append(s.Next, next)
	}
	base := force(t, load(), s, nil)
	out := map[weights.DType]quality{}
	for _, dt := range []weights.DType{weights.Q8_0, weights.Q4_K} {
		m := load()
		rep, err := m.QuantizeWeights(dt, ops.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		out[dt] = compareForced(force(t, m, s, nil), base)
		t.Logf("%s: %d tensors, %.2f× their bytes", dt, rep.Tensors, float64(rep.Bytes)/float64(rep.SourceBytes))
	}
	return out
}

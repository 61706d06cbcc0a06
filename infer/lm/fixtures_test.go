package lm

import (
	"encoding/json"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/weights"
)

const tiny = "../../testdata/tiny/"

var (
	modelsMu sync.Mutex
	models   = map[string]*Model{}
)

// tinyModel loads (once per test binary) a tiny checkpoint.
func tinyModel(t testing.TB, file string) *Model {
	t.Helper()
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if m := models[file]; m != nil {
		return m
	}
	m := loadTiny(t, file)
	models[file] = m
	return m
}

// loadTiny loads a tiny checkpoint of its own (for tests that change it).
func loadTiny(t testing.TB, file string) *Model {
	t.Helper()
	cfg, err := config.Load(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(&cfg.LM, tiny+file)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// steps is one scenario's steps.safetensors.
type steps struct {
	S, K           int
	Phase          []int
	Offset         []int
	FromEmb        []bool
	EmbIndex       []int
	Input          [][]int
	Provided       [][]bool
	Forced         [][]int
	Sampled        [][]int
	Next           [][]int
	Output         [][]int
	Top1, Top2     [][]float32
	TextLogits     [][]float32 // run_pt only
	AudioStep      []int       // run_pt only: row of each audio-logits entry
	AudioTop1      [][]float32 // [39][8]
	AudioRel       [][][]uint16
	AudioCodebooks []int
}

func ints(t testing.TB, f *weights.File, name string) []int {
	t.Helper()
	x, err := f.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	v := x.Int64s()
	out := make([]int, len(v))
	for i, a := range v {
		out[i] = int(a)
	}
	return out
}

func rowsInt(v []int, k int) [][]int {
	out := make([][]int, len(v)/k)
	for i := range out {
		out[i] = v[i*k : (i+1)*k]
	}
	return out
}

func floats(t testing.TB, f *weights.File, name string) []float32 {
	t.Helper()
	x, err := f.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return x.Float32s()
}

func rowsF(v []float32, k int) [][]float32 {
	out := make([][]float32, len(v)/k)
	for i := range out {
		out[i] = v[i*k : (i+1)*k]
	}
	return out
}

func loadSteps(t testing.TB, scenario string) *steps {
	t.Helper()
	f, err := weights.Open(tiny + "expected/" + scenario + "/steps.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	s := &steps{}
	s.Phase = ints(t, f, "phase")
	s.S = len(s.Phase)
	s.K = 17
	s.Offset = ints(t, f, "offset")
	for _, v := range ints(t, f, "from_embeddings") {
		s.FromEmb = append(s.FromEmb, v != 0)
	}
	s.EmbIndex = ints(t, f, "embedding_index")
	s.Input = rowsInt(ints(t, f, "input_tokens"), s.K)
	var prov []bool
	for _, v := range ints(t, f, "provided") {
		prov = append(prov, v != 0)
	}
	for i := 0; i < s.S; i++ {
		s.Provided = append(s.Provided, prov[i*s.K:(i+1)*s.K])
	}
	s.Forced = rowsInt(ints(t, f, "forced_tokens"), s.K)
	s.Sampled = rowsInt(ints(t, f, "sampled_tokens"), s.K)
	s.Next = rowsInt(ints(t, f, "next_tokens"), s.K)
	s.Output = rowsInt(ints(t, f, "output_tokens"), s.K)
	s.Top1 = rowsF(floats(t, f, "top1"), s.K)
	s.Top2 = rowsF(floats(t, f, "top2"), s.K)
	if f.Has("text_logits") {
		x, _ := f.Get("text_logits")
		s.TextLogits = rowsF(x.Float32s(), x.Shape[1])
		s.AudioStep = ints(t, f, "audio_logits_step")
		s.AudioCodebooks = ints(t, f, "audio_logits_codebooks")
		s.AudioTop1 = rowsF(floats(t, f, "audio_logits_top1"), len(s.AudioCodebooks))
		rel, _ := f.Get("audio_logits_rel")
		u := rel.Uint16s()
		n, cb, card := rel.Shape[0], rel.Shape[1], rel.Shape[2]
		for i := 0; i < n; i++ {
			var r [][]uint16
			for c := 0; c < cb; c++ {
				r = append(r, u[(i*cb+c)*card:(i*cb+c+1)*card])
			}
			s.AudioRel = append(s.AudioRel, r)
		}
	}
	return s
}

// codes reads a Mimi codes tensor [1, 8, F] as F frames of 8 codes.
func codes(t testing.TB, path string) [][]int {
	t.Helper()
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	x, err := f.Get("codes")
	if err != nil {
		t.Fatal(err)
	}
	v := x.Int64s()
	Q, F := x.Shape[1], x.Shape[2]
	out := make([][]int, F)
	for fr := range out {
		out[fr] = make([]int, Q)
		for q := 0; q < Q; q++ {
			out[fr][q] = int(v[q*F+fr])
		}
	}
	return out
}

func textPromptIDs(t testing.TB, scenario string) []int {
	t.Helper()
	b, err := os.ReadFile(tiny + "expected/" + scenario + "/run_info.json")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		IDs []int `json:"text_prompt_ids"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	return info.IDs
}

// relErr is max|a−b| / max|b|.
func relErr(a, b []float32) float64 {
	var e, r float64
	for i := range b {
		e = math.Max(e, math.Abs(float64(a[i])-float64(b[i])))
		r = math.Max(r, math.Abs(float64(b[i])))
	}
	if r == 0 {
		return e
	}
	return e / r
}

func top2(x []float32) (int, float32, float32) {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	second := float32(math.Inf(-1))
	for i, v := range x {
		if i != best && v > second {
			second = v
		}
	}
	return best, x[best], second
}

package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// softmaxTopK is the reference distribution: softmax(logits/temp) over the
// top k, renormalised (float64).
func softmaxTopK(logits []float32, temp float64, k int) []float64 {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	// selection by value, ties towards the lower index
	for i := 0; i < k; i++ {
		b := i
		for j := i + 1; j < len(idx); j++ {
			if logits[idx[j]] > logits[idx[b]] || (logits[idx[j]] == logits[idx[b]] && idx[j] < idx[b]) {
				b = j
			}
		}
		idx[i], idx[b] = idx[b], idx[i]
	}
	p := make([]float64, len(logits))
	var sum float64
	mx := float64(logits[idx[0]])
	for _, i := range idx[:k] {
		p[i] = math.Exp((float64(logits[i]) - mx) / temp)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// The empirical distribution of Sample matches softmax(logits/temp) over the
// top k (chi-square), and tokens outside the top k are never drawn. Fixed
// seeds: the test is deterministic.
func TestSampleDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, k int
		temp float64
	}{
		{10, 4, 0.7}, {50, 25, 0.7}, {2048, 250, 0.8}, {300, 0, 1.0}, {16, 16, 2.0}, {100, 1, 0.8},
	} {
		logits := make([]float32, tc.n)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 2)
		}
		k := tc.k
		if k <= 0 {
			k = tc.n
		}
		p := softmaxTopK(logits, tc.temp, k)
		const draws = 100000
		counts := make([]int, tc.n)
		var s Sampler
		r := NewRNG(42)
		for i := 0; i < draws; i++ {
			counts[s.Sample(logits, true, float32(tc.temp), tc.k, r)]++
		}
		// Top-k mass: nothing outside the top k.
		for i, c := range counts {
			if p[i] == 0 && c != 0 {
				t.Fatalf("n=%d k=%d: token %d outside the top k drawn %d times", tc.n, tc.k, i, c)
			}
		}
		// Chi-square over cells with expected count ≥ 5 (the rest pooled).
		var chi2, poolE, poolO float64
		df := -1
		for i := range counts {
			e := p[i] * draws
			if p[i] == 0 {
				continue
			}
			if e < 5 {
				poolE += e
				poolO += float64(counts[i])
				continue
			}
			chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
			df++
		}
		if poolE > 0 {
			chi2 += (poolO - poolE) * (poolO - poolE) / poolE
			df++
		}
		// Wilson–Hilferty: the 0.9999 quantile of chi-square(df).
		limit := 0.0
		if df > 0 {
			z := 3.719
			d := float64(df)
			limit = d * math.Pow(1-2/(9*d)+z*math.Sqrt(2/(9*d)), 3)
		}
		if df > 0 && chi2 > limit {
			t.Fatalf("n=%d k=%d temp=%g: chi2 %.1f > %.1f (df %d)", tc.n, tc.k, tc.temp, chi2, limit, df)
		}
		if df == 0 && counts[Argmax(logits)] != draws {
			t.Fatalf("top-1 sampling drew something else than the argmax")
		}
		t.Logf("n=%d k=%d temp=%g: chi2 %.1f (df %d, limit %.1f)", tc.n, tc.k, tc.temp, chi2, df, limit)
	}
}

// Temperature sharpens / flattens as softmax(l/temp) says: with two tokens
// the draw frequency of the larger one is σ((l1−l0)/temp).
func TestSampleTemperature(t *testing.T) {
	var s Sampler
	logits := []float32{0, 1}
	for _, temp := range []float32{0.25, 0.7, 1, 3} {
		r := NewRNG(uint64(temp * 1000))
		const draws = 100000
		n := 0
		for i := 0; i < draws; i++ {
			n += s.Sample(logits, true, temp, 0, r)
		}
		want := 1 / (1 + math.Exp(-1/float64(temp)))
		sd := math.Sqrt(want * (1 - want) / draws)
		if got := float64(n) / draws; math.Abs(got-want) > 5*sd {
			t.Fatalf("temp %g: frequency %.4f, want %.4f ± %.4f", temp, got, want, 5*sd)
		}
	}
}

// Greedy is the first argmax and consumes no randomness; sampling is
// deterministic per seed.
func TestSampleGreedyAndSeed(t *testing.T) {
	var s Sampler
	logits := []float32{1, 3, 3, -2}
	r := NewRNG(5)
	if got := s.Sample(logits, false, 0.8, 250, r); got != 1 {
		t.Fatalf("greedy %d, want 1 (first max)", got)
	}
	if got := s.Sample(logits, true, 0, 250, r); got != 1 {
		t.Fatalf("temp 0 %d, want 1", got)
	}
	if r.Uint64() != NewRNG(5).Uint64() {
		t.Fatal("greedy consumed randomness")
	}
	draw := func(seed uint64) []int {
		r := NewRNG(seed)
		out := make([]int, 100)
		for i := range out {
			out[i] = s.Sample(logits, true, 1, 3, r)
		}
		return out
	}
	a, b, c := draw(9), draw(9), draw(10)
	same := func(x, y []int) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) || same(a, c) {
		t.Fatal("not deterministic per seed")
	}
	if allocs := testalloc.PerRun(t, 100, func() { s.Sample(logits, true, 1, 3, r) }); allocs != 0 {
		t.Fatalf("%v allocations per sample", allocs)
	}
}

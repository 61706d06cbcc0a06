package ops

import (
	"math"
	"math/rand/v2"
)

// Sampler draws tokens from logits as utils/sampling.py's sample_token does:
// greedy argmax when sampling is off or temp ≤ 0; else softmax(logits/temp)
// restricted to the top k logits (k ≤ 0: all), renormalised, and one draw.
// It keeps its scratch between calls (no allocation once warmed up); the
// randomness comes from the caller's generator, so one seeded generator
// drives a whole run deterministically.
type Sampler struct {
	idx []int
	w   []float64
}

// Sample returns a token index. rng is only used (one Float64 draw) when
// sampling; greedy decisions never consume randomness.
func (s *Sampler) Sample(logits []float32, useSampling bool, temp float32, topK int, rng *rand.Rand) int {
	if !useSampling || temp <= 0 {
		return Argmax(logits)
	}
	n := len(logits)
	k := topK
	if k <= 0 || k > n {
		k = n
	}
	idx := s.topK(logits, k)
	// Weights exp((l − max)/temp): the softmax numerators of the top k; the
	// softmax denominator cancels in the renormalisation of the top k.
	if cap(s.w) < k {
		s.w = make([]float64, k)
	}
	w := s.w[:k]
	lmax := logits[idx[0]]
	for _, i := range idx {
		lmax = max(lmax, logits[i])
	}
	var total float64
	for j, i := range idx {
		e := math.Exp(float64((logits[i]/temp - lmax/temp)))
		w[j] = e
		total += e
	}
	u := rng.Float64() * total
	for j, e := range w {
		u -= e
		if u < 0 {
			return idx[j]
		}
	}
	// Rounding left u ≥ 0 after the last weight: take the last non-zero one.
	for j := k - 1; j >= 0; j-- {
		if w[j] > 0 {
			return idx[j]
		}
	}
	return idx[0]
}

// topK returns the indices of the k largest logits (in no particular order;
// ties broken towards the lower index), using a size-k min-heap.
func (s *Sampler) topK(x []float32, k int) []int {
	if cap(s.idx) < k {
		s.idx = make([]int, k)
	}
	h := s.idx[:k]
	if k == len(x) {
		for i := range h {
			h[i] = i
		}
		return h
	}
	// less(a, b): a ranks below b (smaller value, or equal value and larger index).
	less := func(a, b int) bool {
		if x[a] != x[b] {
			return x[a] < x[b]
		}
		return a > b
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && less(h[r], h[l]) {
				m = r
			}
			if !less(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := 0; i < k; i++ {
		h[i] = i
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for i := k; i < len(x); i++ {
		if less(h[0], i) {
			h[0] = i
			down(0)
		}
	}
	return h
}

// NewRNG returns the deterministic generator of a run: PCG seeded from seed.
func NewRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

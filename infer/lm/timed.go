package lm

import (
	"time"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
)

// Timed is a Weights that measures the compute of every unit: the wall time
// from the return of its Acquire to its Release, on top of another Weights
// (what `pp-offline tune` compares with the cost model). Units are indexed
// as Units orders them (unitID.pos): layers 0..N−1, the head N, depformer
// step j at N+1+j.
type Timed struct {
	Weights
	cfg   *config.LM
	start time.Time
	// Total is each unit's measured time since the last Reset; Runs how
	// many times it ran.
	Total []time.Duration
	Runs  []int
}

// NewTimed measures the units of m computed from w (nil: the model's own
// weights).
func NewTimed(m *Model, w Weights) *Timed {
	if w == nil {
		w = m.HostWeights()
	}
	n := depUnit(m.Cfg.DepQ).pos(&m.Cfg)
	return &Timed{Weights: w, cfg: &m.Cfg, Total: make([]time.Duration, n), Runs: make([]int, n)}
}

// Reset forgets what was measured.
func (t *Timed) Reset() {
	clear(t.Total)
	clear(t.Runs)
}

// MeanMs is unit u's mean time per run in ms (0 when it never ran).
func (t *Timed) MeanMs(u int) float64 {
	if t.Runs[u] == 0 {
		return 0
	}
	return float64(t.Total[u].Nanoseconds()) / 1e6 / float64(t.Runs[u])
}

func (t *Timed) stop(u int) {
	t.Total[u] += time.Since(t.start)
	t.Runs[u]++
}

// AcquireLayer implements Weights.
func (t *Timed) AcquireLayer(i int) *nn.Layer {
	l := t.Weights.AcquireLayer(i)
	t.start = time.Now()
	return l
}

// ReleaseLayer implements Weights.
func (t *Timed) ReleaseLayer(i int) {
	t.stop(layerUnit(i).pos(t.cfg))
	t.Weights.ReleaseLayer(i)
}

// AcquireHead implements Weights.
func (t *Timed) AcquireHead() *Head {
	h := t.Weights.AcquireHead()
	t.start = time.Now()
	return h
}

// ReleaseHead implements Weights.
func (t *Timed) ReleaseHead() {
	t.stop(headUnit().pos(t.cfg))
	t.Weights.ReleaseHead()
}

// AcquireDepStep implements Weights.
func (t *Timed) AcquireDepStep(j int) *DepStep {
	d := t.Weights.AcquireDepStep(j)
	t.start = time.Now()
	return d
}

// ReleaseDepStep implements Weights.
func (t *Timed) ReleaseDepStep(j int) {
	t.stop(depUnit(j).pos(t.cfg))
	t.Weights.ReleaseDepStep(j)
}

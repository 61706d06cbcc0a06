package offload

import (
	"fmt"
	"strconv"
	"strings"
)

// ComputeMs is the cost model's duration of each unit's compute in the
// plan's chain (hand-overs included), in execution order: what the Runtime's
// timeline records and what Predict sums up.
func (pl *Plan) ComputeMs() []float64 {
	e := newEvaluator(pl.Problem)
	e.durations(pl.Where)
	return append([]float64(nil), e.comp...)
}

// Replay simulates the plan's schedule with other compute durations per
// unit (measured ones, say) and the plan's copies, and returns the
// steady-state frame time, as Predict.FrameMs is computed from the cost
// model's durations. Replay(ComputeMs()) == Predict.FrameMs.
func (pl *Plan) Replay(computeMs []float64) (float64, error) {
	if len(computeMs) != len(pl.Where) {
		return 0, fmt.Errorf("replay: %d durations for %d units", len(computeMs), len(pl.Where))
	}
	e := newEvaluator(pl.Problem)
	ends := simulate(computeMs, e.xfer, pl.Where, simFrames, nil)
	return (ends[simFrames-1] - ends[simFrames-1-steadyFrames]) / steadyFrames, nil
}

// Set declares figures from a list "key=value,key=value" with the keys of
// Figures.List (gpu_bandwidth, gpu_compute, gpu_launch, h2d_bandwidth,
// h2d_pageable, cpu_bandwidth, cpu_compute, sync), in the figures' units;
// each is marked with source and note. The result is validated.
func (f *Figures) Set(spec string, source Source, note string) error {
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("figure %q: want key=value", kv)
		}
		k = strings.TrimSpace(k)
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return fmt.Errorf("figure %s: %q is not a number", k, v)
		}
		var fig *Figure
		var keys []string
		for _, nf := range f.List() {
			keys = append(keys, nf.Key)
			if nf.Key == k {
				fig = nf.Figure
			}
		}
		if fig == nil {
			return fmt.Errorf("unknown figure %q (known: %s)", k, strings.Join(keys, ", "))
		}
		fig.Value, fig.Source, fig.Note = x, source, note
	}
	return f.Validate()
}

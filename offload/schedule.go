package offload

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// The schedule both the cost model and the runtime follow, per frame, units
// in execution order:
//
//   - The compute chain is serial: unit i starts when unit i−1 has finished
//     and, if streamed, when its copy has landed.
//   - Streamed units are numbered k = 0, 1, 2, … across frames; unit k is
//     copied into staging slot k mod S (S = 2 staging slots, 1 when a single
//     unit is streamed). The copy engine is serial (one PCIe link): copy k
//     starts when copy k−1 has finished and slot k mod S is free, i.e. when
//     the compute of unit k−S has finished. So while unit k computes, unit
//     k+1 is being copied into the other slot (double buffering), and the
//     first streamed units of frame f+1 are copied during the tail of
//     frame f.
//   - Each streamed unit is copied once per frame in which it runs.

// EventKind tells transfers from computes in a timeline.
type EventKind int

const (
	// Transfer is a streamed unit's copy into a staging slot.
	Transfer EventKind = iota
	// Compute is a unit's computation (including activation hand-overs).
	Compute
	// Load is a resident unit's one-time upload, before frame 0.
	Load
)

func (k EventKind) String() string {
	switch k {
	case Transfer:
		return "transfer"
	case Compute:
		return "compute"
	case Load:
		return "load"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// MarshalText writes the kind's name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is one interval of a (simulated) timeline. Times are in ms.
type Event struct {
	Kind  EventKind `json:"kind"`
	Frame int       `json:"frame"` // frame the unit runs in (−1 for loads)
	Unit  int       `json:"unit"`  // position in the plan's execution order
	Name  string    `json:"name"`
	Where Placement `json:"where"`
	Slot  int       `json:"slot"` // staging slot of a streamed unit, else −1
	Bytes int64     `json:"bytes,omitempty"`
	Start float64   `json:"start_ms"`
	End   float64   `json:"end_ms"`
	// Unused marks a prefetch for a frame that never ran (runtime closed).
	Unused bool `json:"unused,omitempty"`
}

// clock is the schedule's state: when the link, the compute chain and each
// staging slot become free.
type clock struct {
	link, chain float64
	slotFree    []float64
}

func newClock(slots int, t0 float64) *clock {
	c := &clock{link: t0, chain: t0, slotFree: make([]float64, slots)}
	for i := range c.slotFree {
		c.slotFree[i] = t0
	}
	return c
}

func (c *clock) transfer(slot int, dur float64) (start, end float64) {
	start = c.link
	if f := c.slotFree[slot]; f > start {
		start = f
	}
	end = start + dur
	c.link = end
	return start, end
}

func (c *clock) compute(ready, dur float64) (start, end float64) {
	start = c.chain
	if ready > start {
		start = ready
	}
	end = start + dur
	c.chain = end
	return start, end
}

// stagingSlots is the number of staging slots for m streamed units.
func stagingSlots(m int) int { return min(2, m) }

// simulate runs the schedule for frames frames; comp and xfer are per-unit
// durations (xfer used for streamed units), and returns the end of each
// frame. trace, when not nil, receives every event.
func simulate(comp, xfer []float64, where []Placement, frames int, trace func(Event)) []float64 {
	var s simScratch
	return append([]float64(nil), s.run(comp, xfer, where, frames, trace)...)
}

// simScratch holds simulate's buffers so that the planner's inner loop does
// not allocate.
type simScratch struct {
	sIdx    []int
	xferEnd []float64
	ends    []float64
	c       clock
}

func (sc *simScratch) run(comp, xfer []float64, where []Placement, frames int, trace func(Event)) []float64 {
	n := len(comp)
	sc.sIdx = sc.sIdx[:0]
	for i, w := range where {
		if w == Streamed {
			sc.sIdx = append(sc.sIdx, i)
		}
	}
	sIdx := sc.sIdx
	m := len(sIdx)
	S := stagingSlots(m)
	c := &sc.c
	c.link, c.chain = 0, 0
	c.slotFree = append(c.slotFree[:0], 0, 0)[:S]
	total := m * frames
	if cap(sc.xferEnd) < total {
		sc.xferEnd = make([]float64, total)
	}
	xferEnd := sc.xferEnd[:total]
	issue := func(k int) {
		if k >= total {
			return
		}
		u := sIdx[k%m]
		st, en := c.transfer(k%S, xfer[u])
		xferEnd[k] = en
		if trace != nil {
			trace(Event{Kind: Transfer, Frame: k / m, Unit: u, Where: Streamed, Slot: k % S, Start: st, End: en})
		}
	}
	for k := 0; k < S; k++ {
		issue(k)
	}
	if cap(sc.ends) < frames {
		sc.ends = make([]float64, frames)
	}
	ends := sc.ends[:frames]
	k := 0
	for f := 0; f < frames; f++ {
		for i := 0; i < n; i++ {
			ready, slot := c.chain, -1
			if where[i] == Streamed {
				ready, slot = xferEnd[k], k%S
			}
			st, en := c.compute(ready, comp[i])
			if trace != nil {
				trace(Event{Kind: Compute, Frame: f, Unit: i, Where: where[i], Slot: slot, Start: st, End: en})
			}
			if where[i] == Streamed {
				c.slotFree[slot] = en
				issue(k + S)
				k++
			}
		}
		ends[f] = c.chain
	}
	return ends
}

// Timeline is a record of transfers and computes, simulated or from a
// Runtime, with the device's memory high-water mark.
type Timeline struct {
	Events []Event `json:"events"`
	// Budget and PeakBytes are the device budget and the most device
	// memory held at once (Runtime timelines).
	Budget    int64 `json:"budget"`
	PeakBytes int64 `json:"peak_bytes"`
}

// FrameEnds returns the end of each frame's last compute, by frame.
func (t *Timeline) FrameEnds() []float64 {
	var ends []float64
	for _, e := range t.Events {
		if e.Kind != Compute || e.Frame < 0 {
			continue
		}
		for len(ends) <= e.Frame {
			ends = append(ends, math.Inf(-1))
		}
		ends[e.Frame] = math.Max(ends[e.Frame], e.End)
	}
	return ends
}

// Check verifies the invariants the offload engine promises:
//   - device memory never exceeded the budget;
//   - no unit was transferred more than once in a frame;
//   - every streamed compute started after its own transfer (same frame,
//     same unit) had finished, and read the slot that transfer filled;
//   - transfers never overlap each other (one link), nor do computes (one
//     chain);
//   - no transfer overwrote a slot before the compute reading the slot's
//     previous content had finished.
func (t *Timeline) Check() error {
	if t.Budget > 0 && t.PeakBytes > t.Budget {
		return fmt.Errorf("device held %d bytes, over its budget of %d", t.PeakBytes, t.Budget)
	}
	type key struct{ frame, unit int }
	xfers := map[key]Event{}
	var links, chain []Event
	for _, e := range t.Events {
		switch e.Kind {
		case Transfer:
			k := key{e.Frame, e.Unit}
			if _, dup := xfers[k]; dup {
				return fmt.Errorf("unit %d (%s) transferred twice in frame %d", e.Unit, e.Name, e.Frame)
			}
			xfers[k] = e
			links = append(links, e)
		case Load:
			links = append(links, e)
		case Compute:
			chain = append(chain, e)
		}
	}
	const eps = 1e-9
	for _, e := range chain {
		if e.Where != Streamed {
			continue
		}
		x, ok := xfers[key{e.Frame, e.Unit}]
		if !ok {
			return fmt.Errorf("streamed unit %d (%s) computed in frame %d without a transfer", e.Unit, e.Name, e.Frame)
		}
		if x.End > e.Start+eps {
			return fmt.Errorf("unit %d (%s) frame %d: compute starts at %.4f ms before its transfer ends at %.4f ms", e.Unit, e.Name, e.Frame, e.Start, x.End)
		}
		if x.Slot != e.Slot {
			return fmt.Errorf("unit %d (%s) frame %d: computed from slot %d, transferred into slot %d", e.Unit, e.Name, e.Frame, e.Slot, x.Slot)
		}
	}
	for _, set := range [][]Event{links, chain} {
		s := append([]Event(nil), set...)
		sort.SliceStable(s, func(i, j int) bool { return s[i].Start < s[j].Start })
		for i := 1; i < len(s); i++ {
			if s[i].Start < s[i-1].End-eps {
				return fmt.Errorf("%s of %s (frame %d) overlaps %s of %s (frame %d)", s[i].Kind, s[i].Name, s[i].Frame, s[i-1].Kind, s[i-1].Name, s[i-1].Frame)
			}
		}
	}
	// Slot reuse: on each slot, transfers and the computes reading it never
	// overlap, and every compute reads what the transfer just before it
	// filled: transfer, compute, transfer, compute, …
	slots := map[int][]Event{}
	for _, e := range t.Events {
		if e.Slot >= 0 && (e.Kind == Transfer || e.Kind == Compute && e.Where == Streamed) {
			slots[e.Slot] = append(slots[e.Slot], e)
		}
	}
	for slot, iv := range slots {
		sort.SliceStable(iv, func(a, b int) bool {
			if iv[a].Start != iv[b].Start {
				return iv[a].Start < iv[b].Start
			}
			return iv[a].End < iv[b].End
		})
		for j := 1; j < len(iv); j++ {
			if iv[j].Start < iv[j-1].End-eps {
				return fmt.Errorf("slot %d: %s of %s (frame %d) starts at %.4f ms while %s of %s (frame %d) runs until %.4f ms",
					slot, iv[j].Kind, iv[j].Name, iv[j].Frame, iv[j].Start, iv[j-1].Kind, iv[j-1].Name, iv[j-1].Frame, iv[j-1].End)
			}
			if iv[j].Kind == Compute && (iv[j-1].Kind != Transfer || iv[j-1].Unit != iv[j].Unit || iv[j-1].Frame != iv[j].Frame) {
				return fmt.Errorf("slot %d: %s (frame %d) computes from a slot last filled by %s of %s (frame %d)",
					slot, iv[j].Name, iv[j].Frame, iv[j-1].Kind, iv[j-1].Name, iv[j-1].Frame)
			}
		}
	}
	return nil
}

// OverlapMs is the time during which a transfer and a compute ran at once.
func (t *Timeline) OverlapMs() float64 {
	var total float64
	for _, x := range t.Events {
		if x.Kind != Transfer {
			continue
		}
		for _, c := range t.Events {
			if c.Kind == Compute {
				total += math.Max(0, math.Min(x.End, c.End)-math.Max(x.Start, c.Start))
			}
		}
	}
	return total
}

// Overlaps reports whether the intervals of a and b intersect (for more
// than a rounding error).
func Overlaps(a, b Event) bool { return math.Min(a.End, b.End)-math.Max(a.Start, b.Start) > 1e-9 }

// WriteText prints the timeline, one event a line, in start order.
func (t *Timeline) WriteText(w io.Writer) error {
	ev := append([]Event(nil), t.Events...)
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].Start < ev[j].Start })
	var b strings.Builder
	for _, e := range ev {
		lane := "compute"
		where := e.Where.String()
		switch e.Kind {
		case Transfer:
			lane, where = "PCIe", fmt.Sprintf("→ slot %d", e.Slot)
		case Load:
			lane, where = "PCIe", "load (resident)"
		default:
			if e.Where == Streamed {
				where = fmt.Sprintf("streamed, slot %d", e.Slot)
			}
		}
		fmt.Fprintf(&b, "%9.3f–%9.3f ms  %-7s  frame %2d  %-10s %s\n", e.Start, e.End, lane, e.Frame, e.Name, where)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

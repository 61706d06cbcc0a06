package offload

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// DefaultWorkspace is the device memory kept for activations, logits and
// library workspaces, on top of the KV cache, whenever anything runs on the
// device.
const DefaultWorkspace = 256 << 20

// Problem is one planning question: the units, the workload, the machine
// figures and the budgets.
type Problem struct {
	LM   *LM
	Work Workload
	Fig  Figures
	// GPUBudget is the device memory the plan may use, in bytes: weights,
	// staging slots, KV cache and workspace together.
	GPUBudget int64
	// HostBudget is the host memory the plan may use (0: unlimited).
	HostBudget int64
	// Workspace is reserved on the device when anything runs there.
	Workspace int64
	// MaxEnum bounds the class enumeration of Solve (0: 500000); past it,
	// or when negative, Solve groups units by kind only.
	MaxEnum int
}

// NewProblem is a Problem with the default workspace.
func NewProblem(lm *LM, w Workload, fig Figures, gpuBudget, hostBudget int64) *Problem {
	return &Problem{LM: lm, Work: w, Fig: fig, GPUBudget: gpuBudget, HostBudget: hostBudget, Workspace: DefaultWorkspace}
}

// Memory is a plan's memory, item by item.
type Memory struct {
	GPUResident  int64  `json:"gpu_resident"`   // resident weights
	StagingSlots int    `json:"staging_slots"`  // 0, 1 or 2
	GPUStaging   int64  `json:"gpu_staging"`    // slots × largest streamed unit
	KVLayersGPU  int    `json:"kv_layers_gpu"`  // temporal layers whose KV cache is on the device
	GPUKV        int64  `json:"gpu_kv"`         // their KV cache (float32, full context, batch)
	GPUDepKV     int64  `json:"gpu_dep_kv"`     // depformer KV when a step runs on the device
	GPUWorkspace int64  `json:"gpu_workspace"`  // activations, logits, workspaces
	GPUTotal     int64  `json:"gpu_total"`      // all of the above
	HostPinned   int64  `json:"host_pinned"`    // streamed units (pinned)
	HostCPU      int64  `json:"host_cpu"`       // CPU units' weights
	HostKV       int64  `json:"host_kv"`        // KV cache of the CPU layers
	HostDepKV    int64  `json:"host_dep_kv"`    // depformer KV when a step runs on the CPU
	HostTables   int64  `json:"host_tables"`    // embedding tables
	HostTotal    int64  `json:"host_total"`     // all of the above
	PCIeBytes    int64  `json:"pcie_per_frame"` // streamed bytes per frame
	Fits         bool   `json:"fits"`
	Why          string `json:"why,omitempty"` // what does not fit
}

// UnitTiming is one unit's share of a steady-state frame.
type UnitTiming struct {
	Name       string    `json:"name"`
	Where      Placement `json:"where"`
	Bytes      int64     `json:"bytes"`
	TransferMs float64   `json:"transfer_ms,omitempty"` // its copy (overlapped with earlier computes)
	ComputeMs  float64   `json:"compute_ms"`
	StallMs    float64   `json:"stall_ms,omitempty"` // chain waiting for its copy
}

// Prediction is what the cost model predicts for a plan.
type Prediction struct {
	// FrameMs is the steady-state time per frame (decode) or per pass of
	// Prefill positions.
	FrameMs float64 `json:"frame_ms"`
	// FirstFrameMs is the first frame, with nothing prefetched yet.
	FirstFrameMs float64 `json:"first_frame_ms"`
	// PositionMs is FrameMs per position (prefill).
	PositionMs float64 `json:"position_ms"`
	// ComputeMs is the sum of the computes of a frame (the chain without
	// stalls); LinkMs the sum of its copies. FrameMs ≥ max of the two.
	ComputeMs float64 `json:"compute_ms"`
	LinkMs    float64 `json:"link_ms"`
	StallMs   float64 `json:"stall_ms"`
	// RealTime is FrameMs over the 80 ms a frame lasts (decode, batch 1:
	// ≤ 1 keeps up with real time).
	RealTime float64      `json:"real_time"`
	Units    []UnitTiming `json:"units"`
}

// Plan is a placement of every unit with its memory and predicted time.
type Plan struct {
	Problem *Problem    `json:"-"`
	Where   []Placement `json:"where"`
	Memory  Memory      `json:"memory"`
	Predict Prediction  `json:"predicted"`
}

// Units are the plan's units, in execution order.
func (pl *Plan) Units() []Unit { return pl.Problem.LM.Units }

// Count returns how many units have placement w.
func (pl *Plan) Count(w Placement) int {
	n := 0
	for _, x := range pl.Where {
		if x == w {
			n++
		}
	}
	return n
}

// Summary is a one-line description: "12 resident, 13 streamed, 16 cpu".
func (pl *Plan) Summary() string {
	var parts []string
	for _, w := range Placements {
		if n := pl.Count(w); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, w))
		}
	}
	return strings.Join(parts, ", ")
}

// evaluator holds precomputed unit costs and scratch buffers.
type evaluator struct {
	p     *Problem
	costs []unitCost
	comp  []float64
	xfer  []float64
	sim   simScratch
}

const (
	simFrames    = 8
	steadyFrames = 4
)

func newEvaluator(p *Problem) *evaluator {
	n := len(p.LM.Units)
	e := &evaluator{p: p, costs: make([]unitCost, n), comp: make([]float64, n), xfer: make([]float64, n)}
	for i := range p.LM.Units {
		e.costs[i] = p.costOf(&p.LM.Units[i])
		e.xfer[i] = e.costs[i].xfer
	}
	return e
}

func (p *Problem) check() error {
	if p.LM == nil || len(p.LM.Units) == 0 {
		return fmt.Errorf("no units to place")
	}
	if p.GPUBudget < 0 || p.HostBudget < 0 || p.Workspace < 0 {
		return fmt.Errorf("budgets must not be negative")
	}
	if p.Work.Batch < 1 {
		return fmt.Errorf("batch must be at least 1")
	}
	if p.Work.Prefill < 0 || p.Work.Positions < 0 {
		return fmt.Errorf("prefill and positions must not be negative")
	}
	return p.Fig.Validate()
}

func (e *evaluator) memory(where []Placement) Memory {
	p := e.p
	B := int64(max(1, p.Work.Batch))
	var m Memory
	var maxStreamed int64
	streamed, onDev, depDev, depCPU := 0, false, false, false
	for i, w := range where {
		u := &p.LM.Units[i]
		isDep := u.Kind == KindDepStep || u.Kind == KindDepformer
		switch w {
		case Resident:
			m.GPUResident += u.Bytes
		case Streamed:
			streamed++
			maxStreamed = max(maxStreamed, u.Bytes)
			m.HostPinned += u.Bytes
			m.PCIeBytes += u.Bytes
		case CPU:
			m.HostCPU += u.Bytes
		}
		if w.OnDevice() {
			onDev = true
			m.GPUKV += B * u.KVBytes
			if u.KVBytes > 0 {
				m.KVLayersGPU++
			}
			depDev = depDev || isDep
		} else {
			m.HostKV += B * u.KVBytes
			depCPU = depCPU || isDep
		}
	}
	m.StagingSlots = stagingSlots(streamed)
	m.GPUStaging = int64(m.StagingSlots) * maxStreamed
	if depDev {
		m.GPUDepKV = B * p.LM.DepKVBytes
	}
	if depCPU {
		m.HostDepKV = B * p.LM.DepKVBytes
	}
	if onDev {
		m.GPUWorkspace = p.Workspace
	}
	m.GPUTotal = m.GPUResident + m.GPUStaging + m.GPUKV + m.GPUDepKV + m.GPUWorkspace
	m.HostTables = p.LM.TableBytes
	m.HostTotal = m.HostPinned + m.HostCPU + m.HostKV + m.HostDepKV + m.HostTables
	m.Fits = m.GPUTotal <= p.GPUBudget && (p.HostBudget == 0 || m.HostTotal <= p.HostBudget)
	return m
}

// explain fills m.Why for a placement that does not fit.
func (p *Problem) explain(m *Memory) {
	if m.GPUTotal > p.GPUBudget {
		m.Why = fmt.Sprintf("the device needs %s, over its budget of %s", FormatSize(m.GPUTotal), FormatSize(p.GPUBudget))
	} else if p.HostBudget > 0 && m.HostTotal > p.HostBudget {
		m.Why = fmt.Sprintf("the host needs %s, over its budget of %s", FormatSize(m.HostTotal), FormatSize(p.HostBudget))
	}
}

// durations fills e.comp for a placement.
func (e *evaluator) durations(where []Placement) {
	prevDev := false // the frame's input embeddings are gathered on the host
	for i, w := range where {
		e.comp[i] = e.costs[i].computeMs(w, prevDev)
		prevDev = w.OnDevice()
	}
}

// Evaluate computes the memory and the predicted time of a placement,
// whether or not it fits (Memory.Fits, Memory.Why say).
func (p *Problem) Evaluate(where []Placement) (*Plan, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if len(where) != len(p.LM.Units) {
		return nil, fmt.Errorf("placement has %d entries for %d units", len(where), len(p.LM.Units))
	}
	return newEvaluator(p).plan(where), nil
}

func (e *evaluator) plan(where []Placement) *Plan {
	p := e.p
	pl := &Plan{Problem: p, Where: append([]Placement(nil), where...), Memory: e.memory(where)}
	p.explain(&pl.Memory)
	e.durations(where)
	var tl Timeline
	ends := simulate(e.comp, e.xfer, where, simFrames, func(ev Event) { tl.Events = append(tl.Events, ev) })
	pr := &pl.Predict
	pr.FrameMs = (ends[simFrames-1] - ends[simFrames-1-steadyFrames]) / steadyFrames
	pr.FirstFrameMs = ends[0]
	pr.PositionMs = pr.FrameMs / float64(p.Work.positions())
	if p.Work.Prefill == 0 {
		pr.RealTime = pr.FrameMs / FrameMs
	}
	// Per-unit figures from the last simulated frame.
	last := simFrames - 1
	pr.Units = make([]UnitTiming, len(where))
	prevEnd := ends[last-1]
	for _, ev := range tl.Events {
		if ev.Frame != last {
			continue
		}
		ut := &pr.Units[ev.Unit]
		switch ev.Kind {
		case Transfer:
			ut.TransferMs = ev.End - ev.Start
		case Compute:
			ut.ComputeMs = ev.End - ev.Start
			ut.StallMs = ev.Start - prevEnd
			prevEnd = ev.End
		}
	}
	for i := range pr.Units {
		u := &p.LM.Units[i]
		pr.Units[i].Name, pr.Units[i].Where, pr.Units[i].Bytes = u.Name, where[i], u.Bytes
		pr.ComputeMs += pr.Units[i].ComputeMs
		pr.LinkMs += pr.Units[i].TransferMs
	}
	pr.StallMs = math.Max(0, pr.FrameMs-pr.ComputeMs)
	return pl
}

// Schedule simulates frames frames of the plan and returns the timeline the
// cost model predicts (the Runtime records the same one).
func (pl *Plan) Schedule(frames int) *Timeline {
	e := newEvaluator(pl.Problem)
	e.durations(pl.Where)
	tl := &Timeline{Budget: pl.Problem.GPUBudget}
	simulate(e.comp, e.xfer, pl.Where, frames, func(ev Event) {
		u := &pl.Problem.LM.Units[ev.Unit]
		ev.Name = u.Name
		if ev.Kind == Transfer {
			ev.Bytes = u.Bytes
		}
		tl.Events = append(tl.Events, ev)
	})
	return tl
}

// score orders candidate plans: predicted frame time first, then PCIe
// traffic, then device memory.
type score struct {
	ms        float64
	pcie, gpu int64
	feasible  bool
}

func (a score) better(b score) bool {
	if a.feasible != b.feasible {
		return a.feasible
	}
	tol := 1e-9 * math.Max(1, b.ms)
	if a.ms < b.ms-tol {
		return true
	}
	if a.ms > b.ms+tol {
		return false
	}
	if a.pcie != b.pcie {
		return a.pcie < b.pcie
	}
	return a.gpu < b.gpu
}

func (e *evaluator) score(where []Placement) score { return e.scoreBelow(where, math.Inf(1)) }

// scoreBelow is score, except that a placement whose lower bound (the
// busier of the compute chain and the link, which the frame time can never
// beat) exceeds bound is reported with that bound instead of simulated.
func (e *evaluator) scoreBelow(where []Placement, bound float64) score {
	m := e.memory(where)
	if !m.Fits {
		return score{ms: math.Inf(1)}
	}
	e.durations(where)
	var chain, link float64
	for i, w := range where {
		chain += e.comp[i]
		if w == Streamed {
			link += e.xfer[i]
		}
	}
	if lb := max(chain, link); lb > bound+1e-9*math.Max(1, bound) {
		return score{ms: lb, pcie: m.PCIeBytes, gpu: m.GPUTotal, feasible: true}
	}
	ends := e.sim.run(e.comp, e.xfer, where, simFrames, nil)
	ms := (ends[simFrames-1] - ends[simFrames-1-steadyFrames]) / steadyFrames
	return score{ms: ms, pcie: m.PCIeBytes, gpu: m.GPUTotal, feasible: true}
}

// classes groups the units that are interchangeable for the cost model
// (same kind, bytes and costs), keeping execution order within a class.
// With coarse set, units are grouped by kind only.
func (p *Problem) classes(coarse bool) [][]int {
	type sig struct {
		k                       Kind
		bytes, mat, kv          int64
		runs, in, out, launches int
	}
	idx := map[sig]int{}
	var cls [][]int
	for i := range p.LM.Units {
		u := &p.LM.Units[i]
		s := sig{u.Kind, u.Bytes, u.MatParams, u.KVBytes, u.Runs, u.InDim, u.OutDim, u.Launches}
		if coarse {
			s = sig{k: u.Kind}
		}
		j, ok := idx[s]
		if !ok {
			j = len(cls)
			idx[s] = j
			cls = append(cls, nil)
		}
		cls[j] = append(cls[j], i)
	}
	return cls
}

func combinations(cls [][]int) float64 {
	n := 1.0
	for _, c := range cls {
		k := float64(len(c))
		n *= (k + 1) * (k + 2) / 2
	}
	return n
}

// spread picks k of the n positions, evenly spaced.
func spread(n, k int) []int {
	out := make([]int, k)
	for j := 0; j < k; j++ {
		out[j] = int((float64(j) + 0.5) * float64(n) / float64(k))
	}
	return out
}

// arrange places a class: s streamed units spread evenly among its
// positions (so that their copies hide behind the computes between them),
// c CPU units spread evenly among the rest, the others resident.
func arrange(where []Placement, pos []int, s, c int) {
	n := len(pos)
	taken := make([]bool, n)
	for _, j := range spread(n, s) {
		where[pos[j]] = Streamed
		taken[j] = true
	}
	var rest []int
	for j := 0; j < n; j++ {
		if !taken[j] {
			rest = append(rest, j)
		}
	}
	isCPU := make([]bool, len(rest))
	for _, j := range spread(len(rest), c) {
		isCPU[j] = true
	}
	for j, q := range rest {
		if isCPU[j] {
			where[pos[q]] = CPU
		} else {
			where[pos[q]] = Resident
		}
	}
}

// Solve finds the placement with the least predicted frame time that fits
// the budgets, by a policy search in the manner of FlexGen's.
//
// Units of one class (all temporal layers, all depformer steps) are
// interchangeable, so a placement is mostly a choice of how many of each
// class are resident, streamed or on the CPU: Solve enumerates those counts
// for every class (for the 7B: 561 × 3 × 45 combinations, most cut short by
// a lower bound: the busier of the compute chain and the link), arranges
// each class with its streamed units spread evenly (so that every copy has
// computes to hide behind) and its CPU units spread among the rest, keeps
// the best that fits, then polishes it by local search (swapping two units'
// placements within a class, changing one unit's). Tests check it against
// exhaustive search.
//
// Should the units of a kind differ in shape (never for a config-derived
// LM) and their classes be too many to enumerate (MaxEnum), the classes are
// the kinds, and the polish also tries changing two units at once.
func (p *Problem) Solve() (*Plan, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	e := newEvaluator(p)
	limit := p.MaxEnum
	if limit == 0 {
		limit = 500000
	}
	cls := p.classes(false)
	deep := false
	if limit < 0 || combinations(cls) > float64(limit) {
		cls, deep = p.classes(true), true
	}
	best, bestScore := e.enumerate(cls)
	if !bestScore.feasible {
		all := func(w Placement) Memory {
			x := make([]Placement, len(p.LM.Units))
			for i := range x {
				x[i] = w
			}
			return e.memory(x)
		}
		host := "unlimited"
		if p.HostBudget > 0 {
			host = FormatSize(p.HostBudget)
		}
		return nil, fmt.Errorf("no placement fits a device budget of %s and a host budget of %s (everything on the CPU needs %s of host; everything resident, %s of device)",
			FormatSize(p.GPUBudget), host, FormatSize(all(CPU).HostTotal), FormatSize(all(Resident).GPUTotal))
	}
	best, _ = e.polish(best, bestScore, cls, deep)
	return e.plan(best), nil
}

func (e *evaluator) enumerate(cls [][]int) ([]Placement, score) {
	units := e.p.LM.Units
	where := make([]Placement, len(units))
	variants := make([]int, len(cls))
	bySize := make([][]int, len(cls))
	for ci, c := range cls {
		variants[ci] = 1
		for _, i := range c {
			if units[i].Bytes != units[c[0]].Bytes {
				variants[ci] = 4
			}
		}
		bySize[ci] = append([]int(nil), c...)
		sort.SliceStable(bySize[ci], func(a, b int) bool { return units[bySize[ci][a]].Bytes < units[bySize[ci][b]].Bytes })
	}
	var best []Placement
	bestScore := score{ms: math.Inf(1)}
	var rec func(ci int)
	rec = func(ci int) {
		if ci == len(cls) {
			if sc := e.scoreBelow(where, bestScore.ms); sc.better(bestScore) {
				bestScore = sc
				best = append(best[:0], where...)
			}
			return
		}
		n := len(cls[ci])
		for s := 0; s <= n; s++ {
			for c := 0; s+c <= n; c++ {
				for v := 0; v < variants[ci]; v++ {
					if v == 0 {
						arrange(where, cls[ci], s, c)
					} else {
						arrangeBySize(where, cls[ci], bySize[ci], s, c, v)
					}
					rec(ci + 1)
				}
			}
		}
	}
	rec(0)
	return best, bestScore
}

// arrangeBySize places a class whose units differ in size: the s smallest
// streamed (the staging slots are sized by the largest streamed unit), then
// c CPU units among the rest: spread by position (v = 1), the largest
// (v = 2) or the smallest (v = 3); the others resident.
func arrangeBySize(where []Placement, pos, bySize []int, s, c, v int) {
	for _, i := range pos {
		where[i] = Resident
	}
	for _, i := range bySize[:s] {
		where[i] = Streamed
	}
	rest := bySize[s:]
	switch v {
	case 1:
		var inOrder []int
		for _, i := range pos {
			if where[i] != Streamed {
				inOrder = append(inOrder, i)
			}
		}
		for _, j := range spread(len(inOrder), c) {
			where[inOrder[j]] = CPU
		}
	case 2:
		for _, i := range rest[len(rest)-c:] {
			where[i] = CPU
		}
	default:
		for _, i := range rest[:c] {
			where[i] = CPU
		}
	}
}

// polish improves a placement by local search while that helps: swap the
// placements of two units of one class, change one unit's placement, and
// with deep set, change two units' placements at once (the exchanges a
// knapsack needs: e.g. one unit from resident to streamed so that another
// fits as resident).
func (e *evaluator) polish(where []Placement, sc score, cls [][]int, deep bool) ([]Placement, score) {
	where = append([]Placement(nil), where...)
	n := len(where)
	try := func() bool {
		if s := e.scoreBelow(where, sc.ms); s.better(sc) {
			sc = s
			return true
		}
		return false
	}
	for round := 0; round < 100; round++ {
		improved := false
		for _, c := range cls {
			for a := 0; a < len(c); a++ {
				for b := a + 1; b < len(c); b++ {
					i, j := c[a], c[b]
					if where[i] == where[j] {
						continue
					}
					where[i], where[j] = where[j], where[i]
					if try() {
						improved = true
					} else {
						where[i], where[j] = where[j], where[i]
					}
				}
			}
		}
		for i := 0; i < n; i++ {
			for _, w := range Placements {
				old := where[i]
				if w == old {
					continue
				}
				where[i] = w
				if try() {
					improved = true
				} else {
					where[i] = old
				}
			}
		}
		if deep {
			for i := 0; i < n; i++ {
				for j := i + 1; j < n; j++ {
					oi, oj := where[i], where[j]
					for _, wi := range Placements {
						for _, wj := range Placements {
							if wi == oi || wj == oj {
								continue
							}
							where[i], where[j] = wi, wj
							if try() {
								improved = true
								oi, oj = wi, wj
							} else {
								where[i], where[j] = oi, oj
							}
						}
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return where, sc
}

// BruteForce tries every placement (3ⁿ: small problems only) and returns
// the best by the same order as Solve. Tests use it as the reference.
func (p *Problem) BruteForce() (*Plan, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	n := len(p.LM.Units)
	if n > 14 {
		return nil, fmt.Errorf("brute force over %d units is too large", n)
	}
	e := newEvaluator(p)
	where := make([]Placement, n)
	var best []Placement
	bestScore := score{ms: math.Inf(1)}
	total := int(math.Pow(3, float64(n)))
	for code := 0; code < total; code++ {
		x := code
		for i := range where {
			where[i] = Placement(x % 3)
			x /= 3
		}
		if s := e.score(where); s.better(bestScore) {
			bestScore = s
			best = append(best[:0], where...)
		}
	}
	if !bestScore.feasible {
		return nil, fmt.Errorf("no placement fits")
	}
	return e.plan(best), nil
}

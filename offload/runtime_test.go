package offload

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// fakeProblem is the tiny model's shape (4 layers, head, 3 depformer
// steps) with figures that make copies, GPU and CPU computes comparable.
func fakeProblem(t testing.TB, budget int64) *Problem {
	lm := newLM(t, smallCfg(t, 4), 3)
	fig := DefaultFigures()
	fig.GPUBandwidth.Value = 100
	fig.GPUCompute.Value = 0.05
	fig.GPULaunch.Value = 0.5
	fig.H2DBandwidth.Value = 2
	fig.CPUBandwidth.Value = 1.5
	fig.CPUCompute.Value = 0.005
	fig.Sync.Value = 2
	p := NewProblem(lm, Workload{Batch: 1}, fig, budget, 0)
	p.Workspace = 16 << 10
	return p
}

// hostBlobs are random bytes standing for the packed units.
func hostBlobs(p *Problem, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 7))
	host := make([][]byte, len(p.LM.Units))
	for i, u := range p.LM.Units {
		host[i] = make([]byte, u.Bytes)
		for j := range host[i] {
			host[i][j] = byte(r.Uint32())
		}
	}
	return host
}

// drive runs frames frames through rt, every unit, checking each view
// against the host bytes; it returns how many views were checked.
func drive(t *testing.T, rt *Runtime, host [][]byte, frames int, use func(frame, unit int) bool) int {
	t.Helper()
	checked := 0
	for f := 0; f < frames; f++ {
		if err := rt.BeginFrame(); err != nil {
			t.Fatal(err)
		}
		for u := range host {
			if use != nil && !use(f, u) {
				continue
			}
			w, err := rt.Acquire(u)
			if err != nil {
				t.Fatalf("frame %d unit %d: %v", f, u, err)
			}
			if !bytes.Equal(w.Host, host[u]) || w.Len != int64(len(host[u])) || (w.Buf == nil) != (rt.Where(u) == CPU) {
				t.Fatalf("frame %d unit %d (%s): the runtime's bytes differ from the host bytes", f, u, rt.Where(u))
			}
			checked++
			if err := rt.Release(u); err != nil {
				t.Fatal(err)
			}
		}
		if err := rt.EndFrame(); err != nil {
			t.Fatal(err)
		}
	}
	return checked
}

func placements(s string) []Placement {
	m := map[byte]Placement{'r': Resident, 's': Streamed, 'c': CPU}
	w := make([]Placement, len(s))
	for i := range s {
		w[i] = m[s[i]]
	}
	return w
}

// TestRuntimeBudgets drives the runtime with fake units through several
// frames at budgets where everything fits, about half fits, nothing fits,
// and with hand-made placements, and checks the engine's promises: the
// bytes handed out are the host bytes (bit-identical outputs), the device
// never exceeds its budget, no unit crosses PCIe twice in a frame, every
// streamed compute waits for its copy, and the recorded timeline is the
// one the cost model predicts.
func TestRuntimeBudgets(t *testing.T) {
	full := fakeProblem(t, 1<<30)
	fullPlan, err := full.Solve()
	if err != nil {
		t.Fatal(err)
	}
	need := fullPlan.Memory.GPUTotal
	type tc struct {
		name   string
		budget int64
		where  []Placement // nil: Solve's plan
	}
	cases := []tc{
		{"everything fits", need, nil},
		{"half", need / 2, nil},
		{"a third", need / 3, nil},
		{"nothing", 0, nil},
		{"all streamed", need, placements("ssssssss")},
		{"mixed", need, placements("rscsrcsc")},
		{"one streamed", need, placements("ccrcccsc")},
	}
	const frames = 10
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fakeProblem(t, c.budget)
			var pl *Plan
			if c.where == nil {
				pl, err = p.Solve()
			} else {
				pl, err = p.Evaluate(c.where)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !pl.Memory.Fits {
				t.Fatalf("plan does not fit: %s", pl.Memory.Why)
			}
			host := hostBlobs(p, uint64(i))
			dev := NewSimDevice(c.budget)
			rt, err := NewRuntime(pl, dev, host)
			if err != nil {
				t.Fatal(err)
			}
			rt.Verify = true
			if n := drive(t, rt, host, frames, nil); n != frames*len(host) {
				t.Fatalf("checked %d views", n)
			}
			if err := rt.Close(); err != nil {
				t.Fatal(err)
			}
			if dev.Used() != 0 || dev.Live() != 0 {
				t.Errorf("after Close: %d bytes, %d buffers still held", dev.Used(), dev.Live())
			}
			tl := rt.Timeline()
			if err := tl.Check(); err != nil {
				t.Fatal(err)
			}
			if tl.PeakBytes > c.budget {
				t.Fatalf("peak %d over budget %d", tl.PeakBytes, c.budget)
			}
			if tl.PeakBytes != pl.Memory.GPUTotal {
				t.Errorf("device peak %d, plan says %d", tl.PeakBytes, pl.Memory.GPUTotal)
			}
			streamed := pl.Count(Streamed)
			perFrame := map[int]int{}
			for _, e := range tl.Events {
				if e.Kind == Transfer && !e.Unused {
					perFrame[e.Frame]++
				}
			}
			for f := 0; f < frames; f++ {
				if perFrame[f] != streamed {
					t.Errorf("frame %d: %d transfers, %d streamed units", f, perFrame[f], streamed)
				}
			}
			// The runtime's timeline is the cost model's, shifted by the
			// resident units' upload.
			want := pl.Schedule(frames).FrameEnds()
			got := tl.FrameEnds()
			for f := range want {
				if !sameMs(got[f]-rt.Start(), want[f]) {
					t.Errorf("frame %d ends at %.6f ms, the cost model says %.6f", f, got[f]-rt.Start(), want[f])
				}
			}
			if d := (got[frames-1] - got[frames-5]) / 4; !sameMs(d, pl.Predict.FrameMs) {
				t.Errorf("the last frames took %.6f ms each, predicted %.6f", d, pl.Predict.FrameMs)
			}
			t.Logf("budget %6d: %-32s peak %6d, %.4f ms/frame predicted, %d transfers/frame", c.budget, pl.Summary(), tl.PeakBytes, pl.Predict.FrameMs, streamed)
		})
	}
	// "half" must really exercise streaming.
	half, _ := fakeProblem(t, need/2).Solve()
	if half.Count(Streamed) == 0 || half.Count(Resident) == 0 {
		t.Errorf("half budget: want resident and streamed units, got %s", half.Summary())
	}
}

// TestDoubleBuffering: with every unit streamed and copies no longer than
// computes, unit k+1's copy runs while unit k computes, so the copies hide
// behind the computes: the frame costs its computes only.
func TestDoubleBuffering(t *testing.T) {
	p := fakeProblem(t, 1<<30)
	p.Fig.H2DBandwidth.Value = 40 // copies shorter than the GPU computes
	p.Fig.GPUBandwidth.Value = 1
	pl, err := p.Evaluate(placements("ssssssss"))
	if err != nil {
		t.Fatal(err)
	}
	host := hostBlobs(p, 1)
	dev := NewSimDevice(p.GPUBudget)
	rt, err := NewRuntime(pl, dev, host)
	if err != nil {
		t.Fatal(err)
	}
	drive(t, rt, host, 4, nil)
	rt.Close()
	tl := rt.Timeline()
	if err := tl.Check(); err != nil {
		t.Fatal(err)
	}
	xfer := map[[2]int]Event{}
	comp := map[[2]int]Event{}
	for _, e := range tl.Events {
		switch e.Kind {
		case Transfer:
			xfer[[2]int{e.Frame, e.Unit}] = e
		case Compute:
			comp[[2]int{e.Frame, e.Unit}] = e
		}
	}
	n := len(host)
	for f := 0; f < 4; f++ {
		for u := 0; u < n; u++ {
			if f == 0 && u == 0 {
				continue
			}
			pf, pu := f, u-1
			if u == 0 {
				pf, pu = f-1, n-1
			}
			x, c := xfer[[2]int{f, u}], comp[[2]int{pf, pu}]
			if !Overlaps(x, c) {
				t.Errorf("frame %d: copy of %s [%.4f, %.4f] does not overlap the compute of the unit before [%.4f, %.4f]",
					f, x.Name, x.Start, x.End, c.Start, c.End)
			}
		}
	}
	if !sameMs(pl.Predict.FrameMs, pl.Predict.ComputeMs) {
		t.Errorf("copies not hidden: %.4f ms/frame, computes %.4f ms", pl.Predict.FrameMs, pl.Predict.ComputeMs)
	}
	if tl.OverlapMs() <= 0 {
		t.Error("no overlap recorded")
	}
	// Without prefetch (copy, then compute, unit after unit, as accelerate
	// does) the frame would cost both.
	serial := pl.Predict.ComputeMs + pl.Predict.LinkMs
	if pl.Predict.FrameMs >= serial {
		t.Errorf("double buffering %.4f ms/frame, serial %.4f", pl.Predict.FrameMs, serial)
	}
}

// TestRuntimeSkip: units the LM does not run in a frame are skipped; their
// prefetched copies are dropped and nothing is copied twice.
func TestRuntimeSkip(t *testing.T) {
	p := fakeProblem(t, 1<<30)
	pl, err := p.Evaluate(placements("srsscsss"))
	if err != nil {
		t.Fatal(err)
	}
	host := hostBlobs(p, 2)
	rt, err := NewRuntime(pl, NewSimDevice(p.GPUBudget), host)
	if err != nil {
		t.Fatal(err)
	}
	rt.Verify = true
	use := func(f, u int) bool { return (f+u)%3 != 0 }
	drive(t, rt, host, 7, use)
	// A frame where nothing is acquired at all.
	rt.BeginFrame()
	rt.EndFrame()
	drive(t, rt, host, 2, nil)
	rt.Close()
	if err := rt.Timeline().Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeMisuse(t *testing.T) {
	p := fakeProblem(t, 1<<30)
	pl, _ := p.Evaluate(placements("rscsrcsc"))
	host := hostBlobs(p, 3)
	dev := NewSimDevice(p.GPUBudget)
	rt, err := NewRuntime(pl, dev, host)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(err error, msg string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("got %v, want an error containing %q", err, msg)
		}
	}
	_, err = rt.Acquire(0)
	expect(err, "outside a frame")
	expect(rt.EndFrame(), "outside a frame")
	rt.BeginFrame()
	expect(rt.BeginFrame(), "has not ended")
	_, err = rt.Acquire(2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Acquire(3)
	expect(err, "while unit 2 is held")
	expect(rt.Release(3), "held unit is 2")
	expect(rt.EndFrame(), "while unit 2 is held")
	rt.Release(2)
	_, err = rt.Acquire(1)
	expect(err, "out of order")
	_, err = rt.Acquire(99)
	expect(err, "no unit 99")
	// The executor writes into a view: caught at release with Verify.
	rt.Verify = true
	w, _ := rt.Acquire(4) // resident
	w.Host[0] ^= 1
	expect(rt.Release(4), "differs from the host bytes")
	rt.EndFrame()
	rt.Close()
	_, err = rt.Acquire(0)
	expect(err, "closed")

	// A plan that does not fit the device is refused, nothing leaks.
	small := NewSimDevice(pl.Memory.GPUTotal - 1)
	_, err = NewRuntime(pl, small, host)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("want ErrOutOfMemory, got %v", err)
	}
	if small.Used() != 0 || small.Live() != 0 || small.Peak() > small.Budget() {
		t.Errorf("failed runtime left %d bytes, %d buffers, peak %d", small.Used(), small.Live(), small.Peak())
	}
	_, err = NewRuntime(pl, NewSimDevice(1<<30), host[:3])
	expect(err, "3 host blobs for 8 units")
}

func TestSimDevice(t *testing.T) {
	d := NewSimDevice(1000)
	a, err := d.Alloc("a", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc("b", 401); !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "b needs 401 B") {
		t.Errorf("over budget: %v", err)
	}
	if err := d.Reserve("kv", 401); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("reserve over budget: %v", err)
	}
	if d.Used() != 600 || d.Peak() != 600 {
		t.Errorf("a refused allocation changed the books: used %d peak %d", d.Used(), d.Peak())
	}
	if err := d.Reserve("kv", 400); err != nil {
		t.Fatal(err)
	}
	if err := d.Reserve("kv", 0); err == nil {
		t.Error("reserved a name twice")
	}
	if _, err := d.Alloc("c", 1); err == nil {
		t.Error("allocated past a full budget")
	}
	src := []byte("weights!")
	s, _ := d.NewStream()
	f, _ := d.NewFence()
	if err := d.CopyAsync(s, a, 2, src); err != nil {
		t.Fatal(err)
	}
	d.Record(f, s)
	d.Wait(f)
	if !bytes.Equal(a.(*SimBuffer).Bytes()[2:2+len(src)], src) {
		t.Error("copy did not land")
	}
	if err := d.CopyAsync(s, a, 0, make([]byte, 601)); err == nil {
		t.Error("copied past the end of a buffer")
	}
	if err := d.CopyAsync(s, a, 593, src); err == nil {
		t.Error("copied past the end of a buffer at an offset")
	}
	d.Unreserve("kv")
	u, err := d.Upload("unit", src)
	if err != nil || !bytes.Equal(u.Bytes(), src) || u.Len() != int64(len(src)) {
		t.Fatalf("upload: %v", err)
	}
	if _, err := d.Upload("too big", make([]byte, 1000)); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("upload over budget: %v", err)
	}
	d.Free(u)
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(a); err == nil {
		t.Error("freed twice")
	}
	if err := d.CopyAsync(s, a, 0, src); err == nil {
		t.Error("copied into a freed buffer")
	}
	if err := d.DestroyStream(s); err != nil || d.Streams() != 0 {
		t.Errorf("destroy stream: %v, %d streams left", err, d.Streams())
	}
	if err := d.CopyAsync(s, a, 0, src); err == nil {
		t.Error("enqueued on a destroyed stream")
	}
	if d.Used() != 0 || d.Peak() != 1000 || d.Live() != 0 {
		t.Errorf("used %d peak %d live %d", d.Used(), d.Peak(), d.Live())
	}
}

// TestTimelineCheck: Check catches each broken promise.
func TestTimelineCheck(t *testing.T) {
	ok := []Event{
		{Kind: Transfer, Frame: 0, Unit: 1, Name: "u1", Slot: 0, Start: 0, End: 1},
		{Kind: Compute, Frame: 0, Unit: 0, Name: "u0", Where: Resident, Slot: -1, Start: 0, End: 1},
		{Kind: Compute, Frame: 0, Unit: 1, Name: "u1", Where: Streamed, Slot: 0, Start: 1, End: 2},
		{Kind: Transfer, Frame: 1, Unit: 1, Name: "u1", Slot: 0, Start: 2, End: 3},
	}
	if err := (&Timeline{Events: ok}).Check(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func([]Event) ([]Event, int64){
		"transferred twice": func(e []Event) ([]Event, int64) {
			return append(e, Event{Kind: Transfer, Frame: 0, Unit: 1, Name: "u1", Slot: 1, Start: 5, End: 6}), 0
		},
		"before its transfer ends": func(e []Event) ([]Event, int64) { e[0].End = 1.5; return e, 0 },
		"without a transfer":       func(e []Event) ([]Event, int64) { e[0].Unit = 5; return e, 0 },
		"overlaps":                 func(e []Event) ([]Event, int64) { e[1].End = 1.5; return e, 0 },
		"starts at":                func(e []Event) ([]Event, int64) { e[3].Start, e[3].End = 1.5, 1.7; e[0].End = 0.5; return e, 0 },
		"over its budget":          func(e []Event) ([]Event, int64) { return e, 10 },
	}
	for msg, f := range bad {
		ev, peak := f(append([]Event(nil), ok...))
		tl := &Timeline{Events: ev, Budget: 5, PeakBytes: peak}
		if err := tl.Check(); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v", msg, err)
		}
	}
}

package offload_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/offload"
)

// Example drives the runtime the way the LM will: plan, pack the units
// (here: random bytes standing for the packed weights), then frame by
// frame Acquire each unit's view, compute, Release. The bytes handed out
// always equal the host bytes, whatever the placement, which is what keeps
// the outputs bit-identical to a CPU-only run.
func Example() {
	cfg, err := config.Load("../testdata/tiny/config.json")
	if err != nil {
		panic(err)
	}
	units, err := lm.Units(&cfg.LM, offload.DefaultDepSteps(&cfg.LM))
	if err != nil {
		panic(err)
	}
	// Force a mix of the three placements: first layer resident, second
	// streamed, head on the CPU, depformer steps alternately streamed and
	// resident.
	where := make([]offload.Placement, len(units.Units))
	for i, u := range units.Units {
		switch {
		case u.Kind == offload.KindLayer && i == 0:
			where[i] = offload.Resident
		case u.Kind == offload.KindLayer:
			where[i] = offload.Streamed
		case u.Kind == offload.KindHead:
			where[i] = offload.CPU
		case u.Index%2 == 0:
			where[i] = offload.Streamed
		default:
			where[i] = offload.Resident
		}
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, offload.DefaultFigures(), 512<<20, 0)
	plan, err := p.Evaluate(where)
	if err != nil {
		panic(err)
	}

	// Host side: one blob per unit. A real executor fills them with
	// Unit.Pack from the mapped checkpoint and keeps the spans to re-wrap
	// the views as matrices.
	r := rand.New(rand.NewPCG(1, 2))
	host := make([][]byte, len(units.Units))
	for i, u := range units.Units {
		host[i] = make([]byte, u.Bytes)
		for j := range host[i] {
			host[i][j] = byte(r.Uint32())
		}
	}

	dev := offload.NewSimDevice(p.GPUBudget)
	rt, err := offload.NewRuntime(plan, dev, host)
	if err != nil {
		panic(err)
	}
	identical := true
	for frame := 0; frame < 3; frame++ {
		rt.BeginFrame()
		for u := range plan.Units() {
			v, err := rt.Acquire(u)
			if err != nil {
				panic(err)
			}
			// ... compute unit u from v (v.Buf at v.Off on the device when
			// rt.Where(u).OnDevice(), v.Host on the CPU) ...
			identical = identical && bytes.Equal(v.Host, host[u])
			rt.Release(u)
		}
		rt.EndFrame()
	}
	rt.Close()

	tl := rt.Timeline()
	transfers := 0
	for _, e := range tl.Events {
		if e.Kind == offload.Transfer && !e.Unused {
			transfers++
		}
	}
	fmt.Println("plan:", plan.Summary())
	fmt.Println("bytes identical to the host's:", identical)
	fmt.Println("transfers in 3 frames:", transfers)
	fmt.Println("timeline check:", tl.Check())
	fmt.Println("peak within budget:", tl.PeakBytes <= dev.Budget())
	// Output:
	// plan: 5 resident, 5 streamed, 1 cpu
	// bytes identical to the host's: true
	// transfers in 3 frames: 15
	// timeline check: <nil>
	// peak within budget: true
}

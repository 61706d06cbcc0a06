package lm

import (
	"fmt"
	"strings"

	"github.com/pp-offline/pp-offline/offload"
)

// The text a run through a plan logs: the plan by placement class, and the
// timeline check's line at the end.

// Summary describes the plan in lines for a log: one per placement class
// with its units and bytes, then the device memory and the prediction.
func (p *Placed) Summary() []string {
	pl := p.plan
	pr := pl.Problem
	host := "unlimited"
	if pr.HostBudget > 0 {
		host = offload.FormatSize(pr.HostBudget)
	}
	lines := []string{fmt.Sprintf("offload plan for a simulated device of %s (plan budget %s, host %s): %s",
		offload.FormatSize(p.dev.Budget()), offload.FormatSize(pr.GPUBudget), host, pl.Summary())}
	units := pl.Units()
	for _, w := range offload.Placements {
		var names []string
		var bytes int64
		var ms float64
		for i, x := range pl.Where {
			if x == w {
				names = append(names, units[i].Name)
				bytes += units[i].Bytes
				ms += pl.Predict.Units[i].ComputeMs
			}
		}
		if len(names) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-8s %2d units, %10s: %s (%.3f ms/frame predicted)", w, len(names), offload.FormatSize(bytes), CompactNames(names), ms))
	}
	m := pl.Memory
	lines = append(lines, fmt.Sprintf("  device   %s: resident %s, %d staging slot(s) %s, KV cache %s (%d layers), workspace %s; predicted %.3f ms/frame, %s over PCIe per frame",
		offload.FormatSize(m.GPUTotal), offload.FormatSize(m.GPUResident), m.StagingSlots, offload.FormatSize(m.GPUStaging),
		offload.FormatSize(m.GPUKV+m.GPUDepKV), m.KVLayersGPU, offload.FormatSize(m.GPUWorkspace), pl.Predict.FrameMs, offload.FormatSize(m.PCIeBytes)))
	return lines
}

// Finish closes the runtime (copies in flight for a pass that will not run
// are marked unused), checks the timeline (offload.Timeline.Check: the
// device within its budget, no unit transferred twice in a pass, every
// streamed compute after its own copy, …) and describes it in one line.
func (p *Placed) Finish() (string, error) {
	if err := p.Close(); err != nil {
		return "", err
	}
	tl := p.rt.Timeline()
	if err := tl.Check(); err != nil {
		return "", fmt.Errorf("offload: timeline check failed: %w", err)
	}
	var transfers, unused int
	var bytes int64
	for _, e := range tl.Events {
		if e.Kind == offload.Transfer {
			transfers++
			bytes += e.Bytes
			if e.Unused {
				unused++
			}
		}
	}
	return fmt.Sprintf("offload timeline check passed: %d passes, %d transfers (%s, %d prefetched for a pass that never ran), device peak %s of %s, no unit transferred twice in a pass",
		p.passes, transfers, offload.FormatSize(bytes), unused, offload.FormatSize(tl.PeakBytes), offload.FormatSize(tl.Budget)), nil
}

// CompactNames joins unit names, runs of one kind as ranges:
// "layer.0..3, head, dep.0..7".
func CompactNames(names []string) string {
	var out []string
	for i := 0; i < len(names); {
		pre, n, ok := splitIndex(names[i])
		j := i + 1
		for ok && j < len(names) {
			p2, n2, ok2 := splitIndex(names[j])
			if !ok2 || p2 != pre || n2 != n+(j-i) {
				break
			}
			j++
		}
		switch {
		case j-i > 2:
			out = append(out, fmt.Sprintf("%s%d..%d", pre, n, n+j-i-1))
		case j-i == 2:
			out = append(out, names[i], names[i+1])
		default:
			out = append(out, names[i])
		}
		i = j
	}
	return strings.Join(out, ", ")
}

func splitIndex(name string) (string, int, bool) {
	k := strings.LastIndexByte(name, '.')
	if k < 0 {
		return "", 0, false
	}
	var n int
	if _, err := fmt.Sscanf(name[k+1:], "%d", &n); err != nil || fmt.Sprint(n) != name[k+1:] {
		return "", 0, false
	}
	return name[:k+1], n, true
}

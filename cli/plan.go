package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pp-offline/pp-offline/batchjob"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
	ucli "github.com/urfave/cli/v2"
)

func init() {
	defFig := offload.DefaultFigures()
	register(&ucli.Command{
		Name:  "plan",
		Usage: "print the offload plan for a device memory budget (no weights read, nothing run)",
		Description: "Splits the LM into units (each temporal layer, the output head, each depformer step\n" +
			"run per frame), places each one resident on the device, streamed from host memory ahead\n" +
			"of use, or on the CPU, so as to minimise the predicted time per frame within the budget,\n" +
			"and prints the plan: unit → where, bytes, predicted ms; the device and host memory item\n" +
			"by item (KV cache included); the figures the prediction rests on and where each came\n" +
			"from (default H200/PCIe gen5 data-sheet figures, declared by a flag, or measured here);\n" +
			"and what the reference's accelerate --cpu-offload would do at the same budget. It needs\n" +
			"no weights and no GPU. Sizes take B, KiB, MiB, GiB, TiB (1024-based) or KB, MB, GB, TB\n" +
			"(1000-based); bandwidths are GB/s (10^9 bytes/s). See docs/OFFLOAD.md.",
		HideHelpCommand: true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "config", DefaultText: "the built-in PersonaPlex 7B", Usage: "model config JSON"},
			&ucli.StringFlag{Name: "gpu-memory", Usage: "device memory the plan may use, e.g. 8GiB (required)"},
			&ucli.StringFlag{Name: "host-memory", DefaultText: "unlimited", Usage: "host memory the plan may use"},
			&ucli.StringFlag{Name: "weights", DefaultText: "bf16", Usage: "plan for weights quantized to q8_0 or q4_k (units sized by their stored format)"},
			&ucli.Float64Flag{Name: "gpu-bandwidth", Value: defFig.GPUBandwidth.Value, Usage: "device memory bandwidth, GB/s"},
			&ucli.Float64Flag{Name: "gpu-tflops", Value: defFig.GPUCompute.Value, Usage: "device bf16 throughput, TFLOP/s"},
			&ucli.Float64Flag{Name: "h2d-bandwidth", Value: defFig.H2DBandwidth.Value, Usage: "pinned host→device bandwidth, GB/s"},
			&ucli.Float64Flag{Name: "h2d-pageable-bandwidth", Value: defFig.H2DPageable.Value, Usage: "pageable host→device bandwidth (the accelerate baseline), GB/s"},
			&ucli.Float64Flag{Name: "cpu-bandwidth", Value: defFig.CPUBandwidth.Value, Usage: "host memory bandwidth as the CPU kernels read weights, GB/s"},
			&ucli.Float64Flag{Name: "cpu-tflops", Value: defFig.CPUCompute.Value, Usage: "CPU kernels' throughput, TFLOP/s"},
			&ucli.BoolFlag{Name: "measure-cpu", Usage: "measure this machine's host memory bandwidth and use it for --cpu-bandwidth"},
			&ucli.StringFlag{Name: "measure-bytes", Value: "256MiB", Hidden: true, Usage: "buffer size for --measure-cpu"},
			&ucli.IntFlag{Name: "batch", Value: 1, Usage: "streams decoded together"},
			&ucli.IntFlag{Name: "prefill", Usage: "plan a prefill of N positions per pass (0: decode, one position per frame)"},
			&ucli.IntFlag{Name: "positions", DefaultText: "the context", Usage: "attention span read per position"},
			&ucli.IntFlag{Name: "dep-steps", DefaultText: "dep_q/2, the agent's codebooks", Usage: "depformer steps run per frame"},
			&ucli.StringFlag{Name: "workspace", Value: "256MiB", Usage: "device memory kept for activations and workspaces"},
			&ucli.IntFlag{Name: "timeline", DefaultText: "none", Usage: "also print the simulated schedule of N frames"},
			&ucli.BoolFlag{Name: "json", Usage: "print the plan as JSON"},
		},
		Action: runPlan,
	})
}

func runPlan(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "plan")
	}
	out, err := makePlan(c)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return usageErrorf("plan: %s", ue.msg) // exit 2, as every bad flag value
		}
		return fmt.Errorf("plan: %w", err)
	}
	if c.Bool("json") {
		js, err := json.MarshalIndent(out.report(), "", "  ")
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		_, err = c.App.Writer.Write(append(js, '\n'))
		return err
	}
	return out.writeText(c.App.Writer, c.Int("timeline"))
}

type planOutput struct {
	configName string
	lm         *offload.LM
	plan       *offload.Plan
	base       *offload.Baseline
}

// maxTimeline bounds --timeline: the schedule is built and printed whole
// (10000 frames of the 7B are some 570000 lines, 250 MiB of memory).
const maxTimeline = 10000

// planFigureFlags are plan's machine figures and their units.
var planFigureFlags = [][2]string{{"gpu-bandwidth", "GB/s"}, {"gpu-tflops", "TFLOP/s"}, {"h2d-bandwidth", "GB/s"},
	{"h2d-pageable-bandwidth", "GB/s"}, {"cpu-bandwidth", "GB/s"}, {"cpu-tflops", "TFLOP/s"}}

// planFlags checks plan's numeric flags before the config is read: every
// bad value is a usage error (exit 2).
func planFlags(c *ucli.Context) error {
	if !c.IsSet("gpu-memory") {
		return missingFlags("", []string{"--gpu-memory"})
	}
	const maxPositions = 1 << 20 // the longest context a config may have
	switch {
	case c.Int("batch") < 1 || c.Int("batch") > batchjob.MaxBatchFlag:
		return usageErrorf("--batch must be from 1 to %d, not %d", batchjob.MaxBatchFlag, c.Int("batch"))
	case c.Int("prefill") < 0 || c.Int("prefill") > maxPositions:
		return usageErrorf("--prefill must be from 0 (decode) to %d positions, not %d", maxPositions, c.Int("prefill"))
	case c.Int("positions") < 0 || c.Int("positions") > maxPositions:
		return usageErrorf("--positions must be from 0 (the context) to %d, not %d", maxPositions, c.Int("positions"))
	case c.IsSet("dep-steps") && c.Int("dep-steps") < 0:
		return usageErrorf("--dep-steps must be from 0 to the config's dep_q, not %d", c.Int("dep-steps"))
	case c.Int("timeline") < 0 || c.Int("timeline") > maxTimeline:
		return usageErrorf("--timeline must be from 0 (none) to %d frames, not %d", maxTimeline, c.Int("timeline"))
	}
	for _, f := range planFigureFlags {
		if c.IsSet(f[0]) {
			if err := positiveFigure(c, f[0], f[1]); err != nil {
				return err
			}
		}
	}
	if c.Bool("measure-cpu") {
		if _, err := measureBytes(c, false); err != nil {
			return err
		}
	}
	return nil
}

func makePlan(c *ucli.Context) (*planOutput, error) {
	if err := planFlags(c); err != nil {
		return nil, err
	}
	out := &planOutput{configName: "built-in PersonaPlex 7B"}
	cfg := config.Default()
	if path := c.String("config"); path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
		out.configName = path
	}
	size := func(flag string) (int64, error) {
		n, err := offload.ParseSize(c.String(flag))
		if err != nil {
			return 0, usageErrorf("--%s: %v", flag, err)
		}
		return n, nil
	}
	gpu, err := size("gpu-memory")
	if err != nil {
		return nil, err
	}
	var host int64
	if c.IsSet("host-memory") {
		if host, err = size("host-memory"); err != nil {
			return nil, err
		}
		if host == 0 {
			return nil, usageErrorf("--host-memory: 0 leaves no room for the embedding tables (omit the flag for no limit)")
		}
	}
	workspace, err := size("workspace")
	if err != nil {
		return nil, err
	}
	depSteps := offload.DefaultDepSteps(&cfg.LM)
	if c.IsSet("dep-steps") {
		if depSteps = c.Int("dep-steps"); depSteps > cfg.LM.DepQ {
			return nil, usageErrorf("--dep-steps must be from 0 to the config's dep_q %d, not %d", cfg.LM.DepQ, depSteps)
		}
	}
	var stored weights.DType
	if f := c.String("weights"); f != "" && f != "bf16" {
		if stored, err = weights.ParseQuantFormat(f); err != nil {
			return nil, usageErrorf("--weights: %v", err)
		}
	}
	units, err := lm.UnitsOf(&cfg.LM, depSteps, lm.StoredAs(stored))
	if err != nil {
		return nil, err
	}
	out.lm = units

	fig := offload.DefaultFigures()
	declare := func(flag string, f *offload.Figure) {
		if c.IsSet(flag) {
			*f = offload.Figure{Value: c.Float64(flag), Unit: f.Unit, Source: offload.FromDeclared, Note: "--" + flag}
		}
	}
	declare("gpu-bandwidth", &fig.GPUBandwidth)
	declare("gpu-tflops", &fig.GPUCompute)
	declare("h2d-bandwidth", &fig.H2DBandwidth)
	declare("h2d-pageable-bandwidth", &fig.H2DPageable)
	declare("cpu-bandwidth", &fig.CPUBandwidth)
	declare("cpu-tflops", &fig.CPUCompute)
	if c.Bool("measure-cpu") {
		if c.IsSet("cpu-bandwidth") {
			return nil, usageErrorf("--measure-cpu and --cpu-bandwidth both set the CPU bandwidth: choose one")
		}
		n, err := measureBytes(c, true)
		if err != nil {
			return nil, err
		}
		bw := offload.MeasureCPUBandwidth(int(n), 200*time.Millisecond)
		fig.CPUBandwidth = offload.Figure{Value: bw, Unit: "GB/s", Source: offload.FromMeasured,
			Note: fmt.Sprintf("read of %s by all cores on this machine", offload.FormatSize(n))}
	}
	if err := fig.Validate(); err != nil {
		return nil, err
	}
	work := offload.Workload{Batch: c.Int("batch"), Prefill: c.Int("prefill"), Positions: c.Int("positions")}
	p := offload.NewProblem(units, work, fig, gpu, host)
	p.Workspace = workspace
	if out.plan, err = p.Solve(); err != nil {
		return nil, err
	}
	if out.base, err = offload.Accelerate(units, work, fig, gpu); err != nil {
		return nil, err
	}
	return out, nil
}

func ms(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func (o *planOutput) writeText(w io.Writer, timelineFrames int) error {
	var b strings.Builder
	pl, p, cfg := o.plan, o.plan.Problem, &o.lm.Cfg
	mem, pr := pl.Memory, pl.Predict
	fmt.Fprintf(&b, "offload plan for %s\n", o.configName)
	depNote := fmt.Sprintf("%d of %d steps run per frame", len(o.lm.Units)-cfg.NumLayers-1, cfg.DepQ)
	if d := len(o.lm.Skipped); d > 0 {
		depNote += fmt.Sprintf("; %s..%s skipped: the user stream's tokens are provided", o.lm.Skipped[0].Name, o.lm.Skipped[d-1].Name)
	}
	fmt.Fprintf(&b, "  model      dim %d, %d layers, text vocab %d; depformer %d × %d (%s)\n",
		cfg.Dim, cfg.NumLayers, cfg.TextCard, cfg.DepformerNumLayers, cfg.DepformerDim, depNote)
	mode := "decode, one position per frame"
	if p.Work.Prefill > 0 {
		mode = fmt.Sprintf("prefill, %d positions per pass", p.Work.Prefill)
	}
	span := cfg.Context
	if p.Work.Positions > 0 && p.Work.Positions < span {
		span = p.Work.Positions
	}
	fmt.Fprintf(&b, "  workload   %s, batch %d, attention over %d positions\n", mode, p.Work.Batch, span)
	host := "unlimited"
	if p.HostBudget > 0 {
		host = offload.FormatSize(p.HostBudget)
	}
	fmt.Fprintf(&b, "  budgets    device %s, host %s (no weights read, nothing run)\n\n", offload.FormatSize(p.GPUBudget), host)

	fmt.Fprintf(&b, "figures the prediction uses:\n")
	for _, f := range p.Fig.List() {
		fmt.Fprintf(&b, "  %-24s %9.4g %-10s %-9s %s\n", f.Label, f.Value, f.Unit, f.Source, f.Note)
	}

	fmt.Fprintf(&b, "\n%-10s %12s  %-9s %10s %11s %9s\n", "unit", "bytes", "where", "copy ms", "compute ms", "stall ms")
	for i, u := range pl.Units() {
		t := pr.Units[i]
		fmt.Fprintf(&b, "%-10s %12s  %-9s %10s %11s %9s\n", u.Name, offload.FormatSize(u.Bytes), pl.Where[i], ms(t.TransferMs), ms(t.ComputeMs), ms(t.StallMs))
	}
	if n := len(o.lm.Skipped); n > 0 {
		fmt.Fprintf(&b, "%-10s %12s  not run: no device or host memory (the file is mapped)\n",
			o.lm.Skipped[0].Name+".."+strings.TrimPrefix(o.lm.Skipped[n-1].Name, "dep."), offload.FormatSize(int64(n)*o.lm.Skipped[0].Bytes))
	}
	fmt.Fprintf(&b, "placement  %s\n", pl.Summary())

	kvLayer := int64(0)
	if len(o.lm.Units) > 0 {
		kvLayer = int64(p.Work.Batch) * o.lm.Units[0].KVBytes
	}
	line := func(label, detail string, n int64) {
		fmt.Fprintf(&b, "  %-18s %-54s %11s\n", label, detail, offload.FormatSize(n))
	}
	fmt.Fprintf(&b, "\ndevice memory (budget %s):\n", offload.FormatSize(p.GPUBudget))
	line("resident weights", fmt.Sprintf("%d units", pl.Count(offload.Resident)), mem.GPUResident)
	line("staging slots", fmt.Sprintf("%d × largest streamed unit", mem.StagingSlots), mem.GPUStaging)
	line("KV cache", fmt.Sprintf("%d layers × %s (float32 K+V, %d positions)", mem.KVLayersGPU, offload.FormatSize(kvLayer), cfg.Context), mem.GPUKV)
	line("depformer KV", fmt.Sprintf("%d positions × %d layers", cfg.DepQ, cfg.DepformerNumLayers), mem.GPUDepKV)
	line("workspace", "activations, logits, library workspaces", mem.GPUWorkspace)
	line("total", fmt.Sprintf("%.1f%% of the budget", 100*float64(mem.GPUTotal)/float64(max(1, p.GPUBudget))), mem.GPUTotal)
	fmt.Fprintf(&b, "host memory:\n")
	line("streamed (pinned)", fmt.Sprintf("%d units", pl.Count(offload.Streamed)), mem.HostPinned)
	line("CPU weights", fmt.Sprintf("%d units", pl.Count(offload.CPU)), mem.HostCPU)
	line("KV cache", fmt.Sprintf("%d layers on the CPU", cfg.NumLayers-mem.KVLayersGPU), mem.HostKV)
	line("depformer KV", "", mem.HostDepKV)
	line("embedding tables", "gathered a row per token", mem.HostTables)
	line("total", "", mem.HostTotal)

	unit := "frame"
	if p.Work.Prefill > 0 {
		unit = "pass"
	}
	fmt.Fprintf(&b, "\npredicted  %.2f ms/%s in steady state (first %s %.2f ms, nothing prefetched yet)\n", pr.FrameMs, unit, unit, pr.FirstFrameMs)
	fmt.Fprintf(&b, "           compute chain %.2f ms, PCIe link %.2f ms (%s per %s, each streamed unit once), stalls %.2f ms\n",
		pr.ComputeMs, pr.LinkMs, offload.FormatSize(mem.PCIeBytes), unit, pr.StallMs)
	if p.Work.Prefill > 0 {
		fmt.Fprintf(&b, "           %.4f ms per position\n", pr.PositionMs)
	} else if pr.RealTime <= 1 {
		fmt.Fprintf(&b, "           real-time factor %.2f: faster than the 80 ms a frame lasts\n", pr.RealTime)
	} else {
		fmt.Fprintf(&b, "           real-time factor %.2f: slower than the 80 ms a frame lasts (fine offline)\n", pr.RealTime)
	}
	bs := o.base
	fmt.Fprintf(&b, "\naccelerate --cpu-offload at the same budget (the reference, modelled with the same figures):\n")
	fmt.Fprintf(&b, "           %s of weights on the device, %s left in host memory and copied synchronously at\n"+
		"           every call (%d depformer steps per frame): %s copied per frame, %.1f ms/frame\n",
		offload.FormatSize(bs.GPUWeights), offload.FormatSize(bs.HostWeights), bs.DepSteps, offload.FormatSize(bs.CopyBytes), bs.FrameMs)
	if bs.OOM {
		left := p.GPUBudget - bs.GPUWeights
		if bs.HostWeights > 0 {
			left -= bs.LargestLayer
		}
		fmt.Fprintf(&b, "           and out of memory: its device map leaves %s for a %s KV cache (bf16) + workspace\n",
			offload.FormatSize(max(0, left)), offload.FormatSize(bs.KVNeeded))
	}
	if timelineFrames > 0 {
		fmt.Fprintf(&b, "\nsimulated schedule of %d frame(s), times in ms from the first frame's start:\n", timelineFrames)
		if err := pl.Schedule(timelineFrames).WriteText(&b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// planReport is the JSON form of a plan.
type planReport struct {
	Config   string           `json:"config"`
	Workload offload.Workload `json:"workload"`
	DepSteps int              `json:"dep_steps"`
	Budgets  struct {
		GPU       int64 `json:"gpu"`
		Host      int64 `json:"host"` // 0: unlimited
		Workspace int64 `json:"workspace"`
	} `json:"budgets"`
	Figures   offload.Figures `json:"figures"`
	Units     []planUnit      `json:"units"`
	Skipped   []planUnit      `json:"skipped"`
	Memory    offload.Memory  `json:"memory"`
	Predicted struct {
		FrameMs      float64 `json:"frame_ms"`
		FirstFrameMs float64 `json:"first_frame_ms"`
		PositionMs   float64 `json:"position_ms"`
		ComputeMs    float64 `json:"compute_ms"`
		LinkMs       float64 `json:"link_ms"`
		StallMs      float64 `json:"stall_ms"`
		RealTime     float64 `json:"real_time,omitempty"`
	} `json:"predicted"`
	Accelerate struct {
		GPUWeights  int64   `json:"gpu_weights"`
		HostWeights int64   `json:"host_weights"`
		CopyBytes   int64   `json:"copy_bytes_per_frame"`
		FrameMs     float64 `json:"frame_ms"`
		OOM         bool    `json:"oom"`
	} `json:"accelerate"`
}

type planUnit struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind"`
	Bytes      int64   `json:"bytes"`
	Where      string  `json:"where,omitempty"`
	KVBytes    int64   `json:"kv_bytes,omitempty"`
	TransferMs float64 `json:"transfer_ms,omitempty"`
	ComputeMs  float64 `json:"compute_ms,omitempty"`
	StallMs    float64 `json:"stall_ms,omitempty"`
}

func (o *planOutput) report() *planReport {
	pl, p := o.plan, o.plan.Problem
	r := &planReport{Config: o.configName, Workload: p.Work, Figures: p.Fig, Memory: pl.Memory}
	r.DepSteps = len(o.lm.Units) - o.lm.Cfg.NumLayers - 1
	r.Budgets.GPU, r.Budgets.Host, r.Budgets.Workspace = p.GPUBudget, p.HostBudget, p.Workspace
	for i, u := range pl.Units() {
		t := pl.Predict.Units[i]
		r.Units = append(r.Units, planUnit{Name: u.Name, Kind: u.Kind.String(), Bytes: u.Bytes, Where: pl.Where[i].String(),
			KVBytes: int64(p.Work.Batch) * u.KVBytes, TransferMs: t.TransferMs, ComputeMs: t.ComputeMs, StallMs: t.StallMs})
	}
	r.Skipped = []planUnit{}
	for _, u := range o.lm.Skipped {
		r.Skipped = append(r.Skipped, planUnit{Name: u.Name, Kind: u.Kind.String(), Bytes: u.Bytes})
	}
	pr := pl.Predict
	r.Predicted.FrameMs, r.Predicted.FirstFrameMs, r.Predicted.PositionMs = pr.FrameMs, pr.FirstFrameMs, pr.PositionMs
	r.Predicted.ComputeMs, r.Predicted.LinkMs, r.Predicted.StallMs, r.Predicted.RealTime = pr.ComputeMs, pr.LinkMs, pr.StallMs, pr.RealTime
	r.Accelerate.GPUWeights, r.Accelerate.HostWeights = o.base.GPUWeights, o.base.HostWeights
	r.Accelerate.CopyBytes, r.Accelerate.FrameMs, r.Accelerate.OOM = o.base.CopyBytes, o.base.FrameMs, o.base.OOM
	return r
}

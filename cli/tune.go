package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/sysmem"
	"github.com/pp-offline/pp-offline/offload"
)

// tuneTolerance is how far predicted and measured may disagree before tune
// refuses to recommend.
const tuneTolerance = 0.15

func init() {
	register(&ucli.Command{
		Name:  "tune",
		Usage: "measure this machine, run a few LM frames and check the offload cost model against them",
		UsageText: "pp-offline tune [--config C] [--moshi-weight W] [--frames N] [--threads T]\n" +
			"pp-offline tune --device sim --gpu-memory 8GiB [...]   (the simulated device, docs/OFFLOAD.md)",
		Description: "Measures the host memory read bandwidth, plans the LM for the device (here the CPU:\n" +
			"every unit on the CPU), runs a few frames through the plan timing every unit, and prints\n" +
			"predicted against measured ms/frame per placement class and in total. When they agree\n" +
			"within 15% it prints the figures to plan with; otherwise it refuses to recommend (exit 1)\n" +
			"and says what the measurement implies. Without --moshi-weight it uses random bf16\n" +
			"weights at the config's shape (the 7B needs ~15 GB of RAM, the 1B ~3 GB). On the\n" +
			"simulated device (--device sim) the device's units run at its declared figures and\n" +
			"only the CPU's are measured. See docs/OFFLOAD.md.",
		HideHelpCommand: true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "config", DefaultText: "the built-in PersonaPlex 7B", Usage: "model config JSON"},
			&ucli.StringFlag{Name: "moshi-weight", DefaultText: "random bf16 weights at the config's shape", Usage: "LM checkpoint (.safetensors)"},
			&ucli.StringFlag{Name: "device", Value: "auto", Usage: "auto, cpu, cuda or sim (auto: a usable GPU, else the CPU; sim: the simulated device of docs/OFFLOAD.md)"},
			&ucli.IntFlag{Name: "frames", Value: 8, Usage: "frames measured"},
			&ucli.IntFlag{Name: "warmup", Value: 2, Usage: "frames run before measuring"},
			&ucli.IntFlag{Name: "threads", DefaultText: "all cores", Usage: "CPU threads"},
			&ucli.StringFlag{Name: "measure-bytes", Value: "256MiB", Usage: "buffer for the memory-bandwidth measurement"},
			&ucli.Float64Flag{Name: "cpu-bandwidth", DefaultText: "measured", Usage: "declare the CPU bandwidth (GB/s) instead of measuring it"},
			&ucli.StringFlag{Name: "gpu-memory", Hidden: true, Usage: "--device sim: the simulated device's memory"},
			&ucli.StringFlag{Name: "host-memory", Hidden: true, Usage: "--device sim: host budget of the plan"},
			&ucli.StringFlag{Name: "workspace", Hidden: true, Usage: "--device sim: device workspace"},
			&ucli.StringFlag{Name: "sim-figures", Hidden: true, Usage: "--device sim: the device's figures, key=value,..."},
		},
		Action: runTune,
	})
}

// tuneFigures are the plan's machine figures: the CPU's read bandwidth
// measured on the engine (or --cpu-bandwidth), the rest declared.
func tuneFigures(c *ucli.Context, eng *ops.Engine, log *logger) (offload.Figures, error) {
	fig := offload.DefaultFigures()
	if c.IsSet("cpu-bandwidth") {
		fig.CPUBandwidth = offload.Figure{Value: c.Float64("cpu-bandwidth"), Unit: "GB/s", Source: offload.FromDeclared, Note: "--cpu-bandwidth"}
	} else {
		n, err := measureBytes(c, true)
		if err != nil {
			return fig, err
		}
		log.Infof("measuring the memory read bandwidth (%s, %d threads)", offload.FormatSize(n), eng.Threads())
		bw := eng.MeasureReadBandwidth(int(n))
		fig.CPUBandwidth = offload.Figure{Value: bw, Unit: "GB/s", Source: offload.FromMeasured,
			Note: fmt.Sprintf("read of %s by %d threads here (best pass)", offload.FormatSize(n), eng.Threads())}
	}
	if c.IsSet("sim-figures") {
		if err := fig.Set(c.String("sim-figures"), offload.FromDeclared, "--sim-figures"); err != nil {
			return fig, fmt.Errorf("--sim-figures: %w", err)
		}
	}
	return fig, fig.Validate()
}

// measureBytes is --measure-bytes (tune, plan --measure-cpu): the buffer
// of a memory-bandwidth measurement, from 1 MiB to 1 TiB as bench's
// --memory-mib (a usage error, exit 2, checked before anything runs). With
// alloc, the buffer will be allocated: one that the memory left to the
// process cannot hold is refused as bench's memory estimate refuses one
// (exit 1, one line), not left to crash the runtime.
func measureBytes(c *ucli.Context, alloc bool) (int64, error) {
	const lo, hi = 1 << 20, maxMemoryMiB << 20
	n, err := offload.ParseSize(c.String("measure-bytes"))
	if err != nil {
		return 0, usageErrorf("--measure-bytes: %v", err)
	}
	if n < lo || n > hi {
		return 0, usageErrorf("--measure-bytes must be from %s to %s, not %s", offload.FormatSize(lo), offload.FormatSize(hi), c.String("measure-bytes"))
	}
	if m := sysmem.Read(); alloc && m.OK && n > m.Bytes {
		return 0, fmt.Errorf("not enough memory: --measure-bytes %s is more than %s leaves (%s); use a smaller --measure-bytes",
			offload.FormatSize(n), m.Source, offload.FormatSize(m.Bytes))
	}
	return n, nil
}

// positiveFigure checks a declared machine figure (--cpu-bandwidth, ...):
// a finite number above 0, else a usage error (exit 2).
func positiveFigure(c *ucli.Context, flag, unit string) error {
	if v := c.Float64(flag); !(v > 0) || math.IsInf(v, 0) {
		return usageErrorf("--%s must be a positive number of %s, not %v", flag, unit, v)
	}
	return nil
}

// tuneResult is what a tune run measured, for printing.
type tuneResult struct {
	configName, weightsName string
	device                  job.DeviceKind
	frames, threads         int
	kernel                  string
	plan                    *offload.Plan
	predicted, measured     []float64 // per unit, ms per run
	wallMs                  []float64 // per unit, ms per run on this CPU
	predictedMs, measuredMs float64   // per frame, steady state
	stepMs                  float64   // whole LM step, per frame
	depSteps                int
}

func runTune(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "tune")
	}
	r, err := tune(c)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return usageErrorf("tune: %s", ue.msg) // exit 2, as every bad flag value
		}
		return fmt.Errorf("tune: %w", err)
	}
	return r.report(c.App.Writer, c)
}

func tune(c *ucli.Context) (*tuneResult, error) {
	// Every bad value is a usage error (exit 2), found before the config
	// is read or a device looked for.
	switch {
	case c.Int("frames") < 1:
		return nil, usageErrorf("--frames must be from 1 to %d, not %d", 1<<20, c.Int("frames"))
	case c.Int("warmup") < 0:
		return nil, usageErrorf("--warmup must be from 0 to %d, not %d", 1<<20, c.Int("warmup"))
	case c.Int("threads") < 0:
		return nil, usageErrorf("--threads must be from 0 (all cores) to %d, not %d", maxThreads, c.Int("threads"))
	}
	if c.IsSet("cpu-bandwidth") {
		if err := positiveFigure(c, "cpu-bandwidth", "GB/s"); err != nil {
			return nil, err
		}
	} else if _, err := measureBytes(c, true); err != nil {
		return nil, err
	}
	// Bounded before they size anything (the sum cannot overflow).
	if c.Int("frames") > 1<<20 || c.Int("warmup") > 1<<20 || c.Int("frames")+c.Int("warmup") > 1<<20 || c.Int("threads") > maxThreads {
		return nil, usageErrorf("--frames + --warmup must be at most %d and --threads at most %d, not %d + %d and %d", 1<<20, maxThreads, c.Int("frames"), c.Int("warmup"), c.Int("threads"))
	}
	log := &logger{w: c.App.ErrWriter}
	r := &tuneResult{configName: "built-in PersonaPlex 7B", frames: c.Int("frames")}
	cfg := config.Default()
	if p := c.String("config"); p != "" {
		var err error
		if cfg, err = config.Load(p); err != nil {
			return nil, err
		}
		r.configName = p
	}
	devOpts, err := deviceFlags(c, log)
	if err != nil {
		return nil, err
	}
	sim := devOpts.Kind() == job.DeviceSim
	r.device = devOpts.Kind()
	if !sim {
		for _, f := range []string{"gpu-memory", "host-memory", "workspace", "sim-figures"} {
			if c.IsSet(f) {
				return nil, usageErrorf("--%s needs a device (--device sim)", f)
			}
		}
	}
	if !sim {
		// tune times the CPU's units and declares the device's: without
		// the simulated device it runs on the CPU, whatever --device says.
		devOpts = job.DeviceOptions{Threads: devOpts.Threads, Kernel: devOpts.Kernel, ComputeDType: devOpts.ComputeDType, KVDType: devOpts.KVDType}
	}
	// The KV cache is sized to the frames run, as in bench: no position
	// falls out of the context, and a 7B float32 cache of 3000 steps would
	// cost 3 GB for nothing.
	silence := int(0.5 * cfg.Mimi.FrameRate)
	lmCfg := cfg.LM
	lmCfg.Context = min(lmCfg.Context, silence+c.Int("warmup")+r.frames+4)

	// Figures: the CPU's measured (or declared); the device's declared.
	// The device is opened when they are known (the simulated device plans
	// with them); its CPU engine, made now, is what measures and runs.
	cpuDev, err := job.OpenDevice(job.DeviceOptions{Threads: devOpts.Threads, Kernel: devOpts.Kernel, ComputeDType: devOpts.ComputeDType, KVDType: devOpts.KVDType}, job.JobShape{Config: cfg}, log)
	if err != nil {
		return nil, err
	}
	defer cpuDev.Close()
	eng := cpuDev.CPU().Engine()
	r.threads, r.kernel = eng.Threads(), eng.KernelName()
	fig, err := tuneFigures(c, eng, log)
	if err != nil {
		return nil, err
	}

	var model *lm.Model
	if p := c.String("moshi-weight"); p != "" {
		if model, err = lm.Open(&lmCfg, p); err != nil {
			return nil, err
		}
		defer model.Close()
		r.weightsName = p
	} else {
		log.Infof("building random bf16 LM weights (dim %d, %d layers)", lmCfg.Dim, lmCfg.NumLayers)
		f := weights.RandomMapped(lm.WeightSpecs(&lmCfg, weights.BF16), 1)
		defer f.Close()
		if model, err = lm.Load(&lmCfg, f); err != nil {
			return nil, err
		}
		r.weightsName = "random bf16 weights"
	}

	d := cpuDev
	if sim {
		devOpts.Offload.Figures, devOpts.Offload.Verify = &fig, false
		if d, err = job.OpenDevice(devOpts, job.JobShape{Config: cfg}, log); err != nil {
			return nil, err
		}
		defer d.Close()
	}
	w, err := d.Place(model, 1)
	if err != nil {
		return nil, err
	}
	if r.plan = d.Plan(); r.plan == nil {
		units, err := lm.Units(&lmCfg, offload.DefaultDepSteps(&lmCfg))
		if err != nil {
			return nil, err
		}
		if r.plan, err = offload.NewProblem(units, offload.Workload{Batch: 1}, fig, 0, 0).Solve(); err != nil {
			return nil, err
		}
	}

	timed := lm.NewTimed(model, w)
	lmEng := lm.NewEngine(model, d.Backend(), timed)
	gen := lmEng.NewGen(lm.GenOptions{})
	gen.Reset()
	gen.StepSilence() // a prompt phase first, its prefill run now: every measured step is a frame
	gen.Flush()
	user := lm.SineTokens[:lmCfg.NQ-lm.AudioTokensPerStream]
	sess := job.NewSession(lmEng, nil)
	sess.Join(&job.Conversation{Gen: gen, Codes: func(int) []int { return user }})
	var stepTime time.Duration
	for f := 0; f < c.Int("warmup")+r.frames; f++ {
		if f == c.Int("warmup") {
			timed.Reset()
			stepTime = 0
		}
		_, st, err := sess.Step()
		if err != nil {
			return nil, err
		}
		stepTime += st.LM
		r.depSteps = gen.Stats().DepSteps
	}
	r.stepMs = float64(stepTime.Nanoseconds()) / 1e6 / float64(r.frames)

	// Measured: the CPU's units as timed here; the device's at its declared
	// figures (what the runtime's timeline records).
	r.predicted = r.plan.ComputeMs()
	r.measured = make([]float64, len(r.predicted))
	r.wallMs = make([]float64, len(r.predicted))
	for u := range r.predicted {
		r.wallMs[u] = timed.MeanMs(u)
		r.measured[u] = r.predicted[u]
		if r.plan.Where[u] == offload.CPU {
			r.measured[u] = r.wallMs[u]
		}
		if timed.Runs[u] == 0 {
			return nil, fmt.Errorf("unit %s never ran in the measured frames", r.plan.Units()[u].Name)
		}
	}
	r.predictedMs = r.plan.Predict.FrameMs
	if r.measuredMs, err = r.plan.Replay(r.measured); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *tuneResult) report(w io.Writer, c *ucli.Context) error {
	var b strings.Builder
	pl := r.plan
	fmt.Fprintf(&b, "pp-offline tune: %s, %s, device %s, %d frames measured, %d threads, kernel %s\n",
		r.configName, r.weightsName, r.device, r.frames, r.threads, r.kernel)
	fmt.Fprintf(&b, "figures:\n")
	for _, f := range pl.Problem.Fig.List() {
		if r.device != job.DeviceSim && f.Key != "cpu_bandwidth" && f.Key != "cpu_compute" {
			continue
		}
		fmt.Fprintf(&b, "  %-24s %9.4g %-10s %-9s %s\n", f.Label, f.Value, f.Unit, f.Source, f.Note)
	}
	fmt.Fprintf(&b, "plan: %s (%d depformer steps per frame ran, %d planned)\n", pl.Summary(), r.depSteps, len(pl.Units())-pl.Problem.LM.Cfg.NumLayers-1)
	fmt.Fprintf(&b, "\n%-10s %5s %12s %14s %14s %8s\n", "class", "units", "bytes", "predicted ms", "measured ms", "diff")
	worst, worstWhat := 0.0, ""
	var cpuBytes int64
	var cpuMs float64
	for _, where := range offload.Placements {
		var n int
		var bytes int64
		var pred, meas float64
		for u, x := range pl.Where {
			if x != where {
				continue
			}
			n++
			bytes += pl.Units()[u].Bytes
			pred += r.predicted[u]
			meas += r.measured[u]
		}
		if n == 0 {
			continue
		}
		note := "measured here"
		if where != offload.CPU {
			var wall float64
			for u, x := range pl.Where {
				if x == where {
					wall += r.wallMs[u]
				}
			}
			note = fmt.Sprintf("simulated at the declared figures (%.3f ms on this CPU)", wall)
		} else {
			cpuBytes, cpuMs = bytes, meas
		}
		d := diff(pred, meas)
		if math.Abs(d) > worst {
			worst, worstWhat = math.Abs(d), where.String()
		}
		fmt.Fprintf(&b, "%-10s %5d %12s %14.3f %14.3f %+7.1f%%  %s\n", where, n, offload.FormatSize(bytes), pred, meas, 100*d, note)
	}
	d := diff(r.predictedMs, r.measuredMs)
	if math.Abs(d) > worst {
		worst, worstWhat = math.Abs(d), "total"
	}
	fmt.Fprintf(&b, "%-10s %5d %12s %14.3f %14.3f %+7.1f%%  per frame, steady state (copies overlapped)\n",
		"total", len(pl.Where), offload.FormatSize(pl.Problem.LM.WeightBytes()), r.predictedMs, r.measuredMs, 100*d)
	fmt.Fprintf(&b, "whole LM step here: %.3f ms/frame (the units plus embeddings and sampling)\n", r.stepMs)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if worst > tuneTolerance {
		msg := fmt.Sprintf("predicted and measured disagree by %.1f%% (%s), more than %.0f%%: the cost model does not describe this machine with these figures; not recommending",
			100*worst, worstWhat, 100*tuneTolerance)
		if cpuMs > 0 {
			eff := float64(cpuBytes) / (cpuMs / 1e3) / 1e9
			msg += fmt.Sprintf(" (the CPU units read their weights at an effective %.3g GB/s here: try --cpu-bandwidth %.3g)", eff, eff)
		}
		return fmt.Errorf("tune: %s", msg)
	}
	var flags []string
	if c.String("config") != "" {
		flags = append(flags, "--config "+c.String("config"))
	}
	budget := "<budget>"
	if c.IsSet("gpu-memory") {
		budget = c.String("gpu-memory")
	}
	flags = append(flags, "--gpu-memory "+budget)
	// The figures that are not the defaults, as plan's flags.
	planFlag := map[string]string{"gpu_bandwidth": "--gpu-bandwidth", "gpu_compute": "--gpu-tflops", "h2d_bandwidth": "--h2d-bandwidth",
		"h2d_pageable": "--h2d-pageable-bandwidth", "cpu_bandwidth": "--cpu-bandwidth", "cpu_compute": "--cpu-tflops"}
	for _, f := range pl.Problem.Fig.List() {
		if flag, ok := planFlag[f.Key]; ok && f.Source != offload.FromDefault {
			flags = append(flags, fmt.Sprintf("%s %.4g", flag, f.Value))
		}
	}
	_, err := fmt.Fprintf(w, "\nrecommendation: the cost model holds here (worst disagreement %.1f%%, within %.0f%%); plan with\n  pp-offline plan %s\n",
		100*worst, 100*tuneTolerance, strings.Join(flags, " "))
	return err
}

// diff is (measured − predicted) / predicted.
func diff(pred, meas float64) float64 {
	if pred == 0 {
		if meas == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (meas - pred) / pred
}

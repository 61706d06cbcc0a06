package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/batchjob"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/job"
)

func init() {
	register(&ucli.Command{
		Name:      "bench",
		Usage:     "measure the frame loop (Mimi encode, LM step, Mimi decode) against the memory-bandwidth roofline",
		UsageText: "pp-offline bench [--config C] [--frames N] [--threads T] [--batch-size B] [--json] [--moshi-weight W --mimi-weight M]",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "config", Usage: "model config JSON (default: the built-in PersonaPlex 7B)"},
			&ucli.StringFlag{Name: "moshi-weight", Usage: "real LM checkpoint (default: random bf16 weights at the config's shape)"},
			&ucli.StringFlag{Name: "mimi-weight", Usage: "real Mimi checkpoint (default: random weights)"},
			&ucli.IntFlag{Name: "frames", Value: 20, Usage: "frames measured (rounded up to whole codec calls: the codec codes 16 / batch-size frames of each conversation a call)"},
			&ucli.IntFlag{Name: "warmup", Value: 3, Usage: "frames run before measuring (rounded up likewise)"},
			&ucli.IntFlag{Name: "threads", DefaultText: "all cores", Usage: "CPU threads"},
			&ucli.IntFlag{Name: "batch-size", Value: 1, Usage: "conversations run in lockstep (each weight read once per step for all of them)"},
			&ucli.StringFlag{Name: "compute-dtype", Value: "f32", Usage: "f32 or bf16 (see the main job's flag)"},
			kvDTypeFlag(),
			&ucli.StringFlag{Name: "weights", Usage: "quantize the LM at load: q8_0 or q4_k (see the main job's flag)"},
			&ucli.IntFlag{Name: "memory-mib", Value: 1024, Usage: "buffer size for the memory-bandwidth measurement"},
			&ucli.IntFlag{Name: "kv-fill", Usage: "pretend this many positions are already in the KV cache (synthetic), to time attention at long contexts (the real model's context is 3000)"},
			&ucli.BoolFlag{Name: "json", Usage: "end with one line of JSON (the figures, for scripts)"},
			&ucli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to this file (go tool pprof)"},
			&ucli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no per-frame log"},
			&ucli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu, cuda or auto (a usable GPU, else the CPU)"},
			&ucli.BoolFlag{Name: "cpu-offload", Usage: "--device cuda: run the LM through the offload plan for --gpu-memory"},
			&ucli.StringFlag{Name: "gpu-memory", Usage: "--device cuda: device memory pp-offline may allocate, e.g. 8GiB (default: the free memory)"},
		},
		Action: runBench,
	})
}

// maxMemoryMiB bounds bench's --memory-mib (1 TiB) and, in bytes, the
// --measure-bytes of tune and plan: the buffers of the memory-bandwidth
// measurements. Then the memory available says whether it fits.
const maxMemoryMiB = 1 << 20

func runBench(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "bench")
	}
	// Bounded before they size anything, and before the config is read
	// (the sums below cannot overflow; the memory estimate then says
	// whether the rest fits). Every bad value is a usage error: exit 2.
	const maxPositions = 1 << 20
	switch {
	case c.Int("frames") < 1:
		return usageErrorf("--frames must be from 1 to %d, not %d", maxPositions, c.Int("frames"))
	case c.Int("warmup") < 0:
		return usageErrorf("--warmup must be from 0 to %d, not %d", maxPositions, c.Int("warmup"))
	case c.Int("kv-fill") < 0:
		return usageErrorf("--kv-fill must be from 0 to %d, not %d", maxPositions, c.Int("kv-fill"))
	case c.Int("batch-size") < 1:
		return usageErrorf("--batch-size must be from 1 to %d, not %d", batchjob.MaxBatchFlag, c.Int("batch-size"))
	case c.Int("memory-mib") < 1:
		return usageErrorf("--memory-mib must be from 1 to %d (1 TiB), not %d", maxMemoryMiB, c.Int("memory-mib"))
	case c.Int("threads") < 0:
		return usageErrorf("--threads must be from 0 (all cores) to %d, not %d", maxThreads, c.Int("threads"))
	case c.Int("frames") > maxPositions || c.Int("warmup") > maxPositions || c.Int("kv-fill") > maxPositions ||
		c.Int("frames")+c.Int("warmup")+c.Int("kv-fill") > maxPositions:
		return usageErrorf("--frames + --warmup + --kv-fill must be at most %d positions (the longest context a config may have), not %d + %d + %d", maxPositions, c.Int("frames"), c.Int("warmup"), c.Int("kv-fill"))
	case c.Int("batch-size") > batchjob.MaxBatchFlag:
		return usageErrorf("--batch-size must be from 1 to %d, not %d", batchjob.MaxBatchFlag, c.Int("batch-size"))
	case c.Int("memory-mib") > maxMemoryMiB:
		return usageErrorf("--memory-mib must be from 1 to %d (1 TiB), not %d", maxMemoryMiB, c.Int("memory-mib"))
	case c.Int("threads") > maxThreads:
		return usageErrorf("--threads must be at most %d, not %d", maxThreads, c.Int("threads"))
	}
	cfg := config.Default()
	if p := c.String("config"); p != "" {
		var err error
		if cfg, err = config.Load(p); err != nil {
			return err
		}
	}
	if err := checkWeightsFlag("weights", c.String("weights")); err != nil {
		return err
	}
	log := &logger{quiet: c.Bool("quiet"), w: c.App.ErrWriter}
	dev, err := deviceFlags(c, log)
	if err != nil {
		return err
	}
	if dev.Kind() == job.DeviceSim {
		return fmt.Errorf("bench --device sim: use pp-offline tune --device sim")
	}
	if p := c.String("cpuprofile"); p != "" {
		// Streamed as it is made (not atomic), but never over an input,
		// a device or a read-only file.
		if err := checkOutputs([]string{p}, []string{c.String("config"), c.String("moshi-weight"), c.String("mimi-weight")}); err != nil {
			return err
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := job.Bench(job.BenchOptions{
		Config: cfg, MoshiWeight: c.String("moshi-weight"), MimiWeight: c.String("mimi-weight"),
		Frames: c.Int("frames"), Warmup: c.Int("warmup"),
		MemoryBytes: c.Int("memory-mib") << 20, KVFill: c.Int("kv-fill"), BatchSize: c.Int("batch-size"), Log: log,
		Quantize: c.String("weights"),
		Device:   dev,
	})
	if err != nil {
		return err
	}
	r.Config = c.String("config")
	w := c.App.Writer
	fmt.Fprintf(w, "pp-offline bench: %s, %d frames, %d threads, kernel %s, %s/%d CPUs\n", r.Weights, r.Frames, r.Threads, r.KernelPath, r.GoArch, r.NumCPU)
	fmt.Fprintf(w, "  batch            %9d conversations in lockstep (figures below are per step: one 80 ms frame of each)\n", r.BatchSize)
	fmt.Fprintf(w, "  KV cache         %9d positions attended\n", r.KVPositions)
	fmt.Fprintf(w, "  LM step          %9.2f ms/frame  (temporal %.2f, text head + %d depformer steps %.2f)\n", r.LMMsPerFrame, r.TemporalMsPerFrame, r.DepformerSteps, r.DepformerMsPerFrame)
	fmt.Fprintf(w, "  Mimi encode      %9.2f ms/frame\n", r.CodecEncodeMsPerFrame)
	fmt.Fprintf(w, "  Mimi decode      %9.2f ms/frame  (codec %.2f ms per step)\n", r.CodecDecodeMsPerFrame, r.CodecMsPerStep)
	fmt.Fprintf(w, "  total            %9.2f ms/frame  (real-time factor %.2f at 80 ms/frame)\n", r.TotalMsPerFrame, r.RealTimeFactor)
	fmt.Fprintf(w, "  weights read     %9.3f GB/frame\n", float64(r.WeightBytesPerFrame)/1e9)
	fmt.Fprintf(w, "  KV cache read    %9.3f GB/frame (%s)\n", float64(r.KVBytesPerFrame)/1e9, r.KVDType)
	fmt.Fprintf(w, "  arithmetic       %9.2f GFLOP a step (LM %.2f, codec %.2f; weight products only): LM %.0f GFLOP/s, whole step %.0f GFLOP/s\n",
		r.LMGFLOPPerStep+r.CodecGFLOPPerStep, r.LMGFLOPPerStep, r.CodecGFLOPPerStep, r.LMGFLOPs, r.FrameGFLOPs)
	fmt.Fprintf(w, "  achieved         %9.2f GB/s of weights (LM step), %.2f GB/s with the KV cache\n", r.AchievedGBps, r.MemoryBoundGBps)
	fmt.Fprintf(w, "  throughput       %9.2f frames/s (LM alone %.2f), peak RSS %.2f GiB\n", r.FramesPerSecond, r.LMFramesPerSecond, float64(r.PeakRSSBytes)/(1<<30))
	if r.RooflineFraction > 0 {
		fmt.Fprintf(w, "  memory read bw   %9.2f GB/s (measured)  → %.0f%% of the roofline\n", r.MemoryGBps, 100*r.RooflineFraction)
	} else {
		fmt.Fprintf(w, "  memory read bw   %9.2f GB/s (the host's, measured; not the LM's bound on this device)\n", r.MemoryGBps)
	}
	if r.Device != "" && dev.Kind() == job.DeviceCUDA {
		fmt.Fprintf(w, "  device           %s, peak %.2f GiB of %.2f GiB, %.3f GB streamed\n", r.Device, float64(r.DevicePeakBytes)/(1<<30), float64(r.DeviceLimit)/(1<<30), float64(r.StreamedBytes)/1e9)
	}
	if r.PlanSummary != "" {
		fmt.Fprintf(w, "  offload plan     %9.2f ms/frame predicted (%s)\n", r.PlanFrameMs, r.PlanSummary)
	}
	if c.Bool("json") {
		js, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, string(js))
	}
	return nil
}

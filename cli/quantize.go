package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/job"
)

func init() {
	register(&ucli.Command{
		Name:      "quantize",
		Usage:     "write a quantized copy of an LM checkpoint (q8_0 or q4_k blocks), which the main job maps directly",
		UsageText: "pp-offline quantize --moshi-weight model.safetensors --format q8_0|q4_k --output model-q8_0.safetensors",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "moshi-weight", Usage: "the float LM checkpoint (.safetensors, bf16/f16/f32), required"},
			&ucli.StringFlag{Name: "format", Usage: "q8_0 (about half the bytes per frame) or q4_k (under a third); see docs/QUANTIZATION.md; required"},
			&ucli.StringFlag{Name: "output", Usage: "quantized checkpoint to write (.safetensors), required"},
			&ucli.IntFlag{Name: "threads", Usage: "CPU threads (default: all cores)"},
			&ucli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "log errors only"},
		},
		Action: runQuantize,
	})
}

func runQuantize(c *ucli.Context) error {
	// Usage errors first (exit 2, one line), before any file is read. The
	// required flags are checked here rather than with Required, which
	// makes urfave/cli print the whole help before the error.
	if c.NArg() > 0 {
		return unexpectedArgs(c, "quantize")
	}
	var missing []string
	for _, n := range []string{"moshi-weight", "format", "output"} {
		if c.String(n) == "" {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return missingFlags("quantize", missing)
	}
	if t := c.Int("threads"); t < 0 || t > maxThreads {
		return usageErrorf("--threads must be from 0 (all cores) to %d, not %d", maxThreads, t)
	}
	if err := checkWeightsFlag("format", c.String("format")); err != nil {
		return err
	}
	if err := checkReadable(c.String("moshi-weight"), "the checkpoint"); err != nil {
		return err
	}
	// Never over the checkpoint it reads (another path or a link to it
	// included), a device, a FIFO or a read-only file: exit 2.
	if err := checkOutputs([]string{c.String("output")}, []string{c.String("moshi-weight")}); err != nil {
		return err
	}
	log := &logger{quiet: c.Bool("quiet"), w: c.App.ErrWriter}
	r, err := job.QuantizeFile(job.QuantizeOptions{
		MoshiWeight: c.String("moshi-weight"), Output: c.String("output"), Format: c.String("format"),
		ToolVersion: versionString(), Threads: c.Int("threads"), Log: log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s: %d tensors quantized to %s (%.2f GB → %.2f GB), %d kept; %.2f GB written (source sha256 %s)\n",
		c.String("output"), r.Quantized, c.String("format"), float64(r.SourceBytes)/1e9, float64(r.QuantBytes)/1e9, r.Kept, float64(r.FileBytes)/1e9, r.SHA256)
	return nil
}

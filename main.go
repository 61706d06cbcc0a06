// Command pp-offline runs NVIDIA PersonaPlex offline: user WAV in, agent WAV
// and transcript out. See README.md and docs/ARCHITECTURE.md.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// commands collects the subcommands; each cmd_*.go file registers its own in
// an init function so that the commands can be written independently.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and commit"}
	app := &cli.App{
		Name:  "pp-offline",
		Usage: "run NVIDIA PersonaPlex offline (speech in, speech and text out)",
		UsageText: "pp-offline --input-wav in.wav --voice-prompt NATF2.pt --output-wav out.wav --output-text out.json [flags]\n" +
			"pp-offline command [command flags]   (see the commands below; README.md maps offline.py's flags)",
		Commands:               commands,
		Flags:                  mainFlags(),
		Action:                 runMain,
		Version:                versionString(),
		UseShortOptionHandling: false,
		HideHelpCommand:        true,
		Writer:                 os.Stdout,
		ErrWriter:              os.Stderr,
		// main prints errors and picks exit codes (exitCode), for every command.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	// Usage errors: one line with a hint, exit 2 (usage.go).
	installUsageHandlers(app)
	return app
}

func main() {
	// PP_OFFLINE_KERNEL forces a matrix-kernel variant (avx512, avx2, portable):
	// every variant computes the same bits, this is for tests and debugging.
	if k := os.Getenv("PP_OFFLINE_KERNEL"); k != "" && !ops.SetKernel(k) {
		fmt.Fprintf(os.Stderr, "pp-offline: PP_OFFLINE_KERNEL=%s: unknown or unsupported here (have %s)\n", k, strings.Join(ops.KernelNames(), ", "))
		os.Exit(1)
	}
	if err := newApp().Run(os.Args); err != nil {
		err = asUsageError(err)
		fmt.Fprintln(os.Stderr, "pp-offline: "+err.Error())
		os.Exit(exitCode(err))
	}
}

// exitCoder lets a command choose its exit status (compare uses 1 and 2,
// usage errors 2).
type exitCoder interface{ ExitCode() int }

func exitCode(err error) int {
	if ec, ok := err.(exitCoder); ok && ec.ExitCode() != 0 {
		return ec.ExitCode()
	}
	return 1
}

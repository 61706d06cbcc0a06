// Package cli is pp-offline's command line: the main job and every
// subcommand, their flags, usage errors and exit codes. main.go at the
// repository root only calls Main. See README.md and docs/ARCHITECTURE.md.
package cli

import (
	"fmt"
	"log"
	"os"
	"slices"
	"sort"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// commands collects the subcommands; each cmd_*.go file registers its own in
// an init function so that the commands can be written independently.
var commands []*ucli.Command

func register(c *ucli.Command) { commands = append(commands, c) }

func newApp() *ucli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	ucli.VersionFlag = &ucli.BoolFlag{Name: "version", Usage: "print the version and commit"}
	app := &ucli.App{
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
		ExitErrHandler: func(*ucli.Context, error) {},
	}
	// Usage errors: one line with a hint, exit 2 (usage.go).
	installUsageHandlers(app)
	return app
}

// Main runs the program with its command line and returns the exit status.
// version and commit name the build (main sets them from -ldflags; an empty
// commit is taken from Go's build info).
func Main(args []string, version, commit string) int {
	buildVersion, buildCommit = version, commit
	// PP_OFFLINE_KERNEL forces a matrix-kernel variant (avx512, avx2, neon, portable)
	// on the CPU backend of every command that computes (deviceFlags): every
	// variant computes the same bits, this is for tests and debugging.
	if k := os.Getenv("PP_OFFLINE_KERNEL"); k != "" && !slices.Contains(ops.KernelNames(), k) {
		fmt.Fprintf(os.Stderr, "pp-offline: PP_OFFLINE_KERNEL=%s: unknown or unsupported here (have %s)\n", k, strings.Join(ops.KernelNames(), ", "))
		return 1
	}
	// The standard library's own messages (net/http's) in the log format.
	log.SetFlags(0)
	log.SetOutput(stdLog{&logger{w: os.Stderr}})
	app := newApp()
	if err := app.Run(args); err != nil {
		err = withHint(asUsageError(err), app, args)
		fmt.Fprintln(os.Stderr, "pp-offline: "+err.Error())
		return exitCode(err)
	}
	return 0
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

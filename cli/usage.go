package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pp-offline/pp-offline/internal/suggest"
	ucli "github.com/urfave/cli/v2"
)

// Usage errors: a wrong flag, a missing value, an unknown command. They exit
// with status 2 and print the one line that is wrong with a hint (the closest
// flag or command name), not the whole help; --help prints the help.

// exitUsage is the exit status of a usage error.
const exitUsage = 2

// usageError is a command-line mistake; main exits 2 on it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
func (e usageError) ExitCode() int { return exitUsage }

func usageErrorf(format string, args ...any) error {
	return usageError{strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " ")}
}

// installUsageHandlers gives the app and every command (recursively) the same
// usage-error handler, each with its own flag names for suggestions.
func installUsageHandlers(app *ucli.App) {
	app.OnUsageError = usageHandler("", app.Flags, app.Name+" --help")
	var walk func(prefix string, cmds []*ucli.Command)
	walk = func(prefix string, cmds []*ucli.Command) {
		for _, c := range cmds {
			path := strings.TrimSpace(prefix + " " + c.Name)
			c.OnUsageError = usageHandler(path, c.Flags, app.Name+" "+path+" --help")
			if len(c.Subcommands) > 0 && c.Action == nil {
				// Without an action urfave/cli answers a mistyped
				// subcommand with "No help topic" (exit 3).
				c.Action = subcommandAction(path, c.Subcommands)
			}
			walk(path, c.Subcommands)
		}
	}
	walk("", app.Commands)
}

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	reNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	reBadValue  = regexp.MustCompile(`^invalid value "(.*)" for flag -+([^:]+): (.*)$`)
)

// usageHandler rewrites urfave/cli's flag-parsing errors into one line with
// a hint; cmd is the command path ("" for the main job) that prefixes it.
func usageHandler(cmd string, flags []ucli.Flag, help string) ucli.OnUsageErrorFunc {
	prefix := ""
	if cmd != "" {
		prefix = cmd + ": "
	}
	return func(_ *ucli.Context, err error, _ bool) error {
		msg := err.Error()
		if m := reUndefined.FindStringSubmatch(msg); m != nil {
			name := strings.SplitN(m[1], "=", 2)[0]
			if s := suggest.Closest(name, flagNames(flags)); s != "" {
				return usageErrorf("%sunknown flag --%s; did you mean --%s? (see %s)", prefix, name, s, help)
			}
			return usageErrorf("%sunknown flag --%s (see %s)", prefix, name, help)
		}
		if m := reNeedsArg.FindStringSubmatch(msg); m != nil {
			return usageErrorf("%sflag --%s needs a value (see %s)", prefix, m[1], help)
		}
		if m := reBadValue.FindStringSubmatch(msg); m != nil {
			return usageErrorf("%sinvalid value %q for --%s: %s (see %s)", prefix, m[1], m[2], badValueReason(m[3]), help)
		}
		return usageErrorf("%s%s (see %s)", prefix, msg, help)
	}
}

// badValueReason shortens strconv's "parse error" into what the user did.
func badValueReason(s string) string {
	switch {
	case strings.Contains(s, "parse error"), strings.Contains(s, "invalid syntax"):
		return "not a number"
	case strings.Contains(s, "out of range"):
		return "out of range"
	}
	return s
}

// flagNames lists the names and aliases of the visible flags.
func flagNames(flags []ucli.Flag) []string {
	var out []string
	for _, f := range flags {
		if vf, ok := f.(ucli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		out = append(out, f.Names()...)
	}
	return append(out, "help")
}

// commandNames lists the visible commands and their aliases.
func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Names()...)
		}
	}
	return out
}

// unexpectedArgs is the usage error for stray positional arguments: an
// unknown command (with the closest one) at the top level, else the argument.
func unexpectedArgs(c *ucli.Context, cmd string) error {
	arg := c.Args().First()
	if cmd == "" {
		if !strings.HasPrefix(arg, "-") && !strings.ContainsAny(arg, "./\\") {
			if s := suggest.Closest(arg, commandNames(c.App.Commands)); s != "" {
				return usageErrorf("unknown command %q; did you mean %q? (see %s --help)", arg, s, c.App.Name)
			}
			return usageErrorf("unknown command %q (see %s --help for the commands)", arg, c.App.Name)
		}
		return usageErrorf("unexpected argument %q (flags take the form --name value; see %s --help)", arg, c.App.Name)
	}
	return usageErrorf("%s: unexpected argument %q (see %s %s --help)", cmd, arg, c.App.Name, cmd)
}

// subcommandAction shows a parent command's help, or names the closest
// subcommand to a mistyped one.
func subcommandAction(path string, subs []*ucli.Command) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		if c.NArg() == 0 {
			return ucli.ShowSubcommandHelp(c)
		}
		arg := c.Args().First()
		if s := suggest.Closest(arg, commandNames(subs)); s != "" {
			return usageErrorf("%s: unknown command %q; did you mean %q? (see %s %s --help)", path, arg, s, c.App.Name, path)
		}
		return usageErrorf("%s: unknown command %q (see %s %s --help)", path, arg, c.App.Name, path)
	}
}

var reRequired = regexp.MustCompile(`^Required flags? "(.+)" not set$`)

// asUsageError turns urfave/cli's missing-required-flag error (returned from
// Run, not through OnUsageError) into a usage error.
func asUsageError(err error) error {
	if m := reRequired.FindStringSubmatch(err.Error()); m != nil {
		names := strings.Split(m[1], ", ")
		for i, n := range names {
			names[i] = "--" + strings.Trim(n, `"`)
		}
		return missingFlags("", names)
	}
	return err
}

// missingFlags is the usage error naming every missing required flag
// (names: "--input-wav", ...) of the command at path ("" for the main job)
// at once, in one line.
func missingFlags(path string, names []string) error {
	prefix, s := "", ""
	if path != "" {
		prefix = path + ": "
	}
	if len(names) > 1 {
		s = "s"
	}
	return usageErrorf("%smissing required flag%s %s", prefix, s, strings.Join(names, ", "))
}

// helpTopic answers `pp-offline help [command [subcommand]]`: the full help,
// a command's help, or a usage error naming the closest command.
func helpTopic(c *ucli.Context) error {
	args := c.Args().Slice()[1:]
	if len(args) == 0 {
		return ucli.ShowAppHelp(c)
	}
	cmds, path := c.App.Commands, ""
	for _, a := range args {
		var next *ucli.Command
		for _, sub := range cmds {
			if sub.HasName(a) {
				next = sub
			}
		}
		if next == nil {
			where := strings.TrimSpace("pp-offline " + path)
			if s := suggest.Closest(a, commandNames(cmds)); s != "" {
				return usageErrorf("help: unknown command %q; did you mean %q? (see %s --help)", a, s, where)
			}
			return usageErrorf("help: unknown command %q (see %s --help for the commands)", a, where)
		}
		cmds, path = next.Subcommands, strings.TrimSpace(path+" "+next.Name)
	}
	return helpOf(c, path)
}

// helpOf prints the help of the command at path (as `pp-offline path
// --help` does) by running it with --help.
func helpOf(c *ucli.Context, path string) error {
	argv := append([]string{c.App.Name}, strings.Fields(path)...)
	return c.App.Run(append(argv, "--help"))
}

// withHint ends a usage error that names no help with where to look: the
// help of the command the arguments name (args is os.Args).
func withHint(err error, app *ucli.App, args []string) error {
	ue, ok := err.(usageError)
	if !ok || strings.Contains(ue.msg, "--help") {
		return err
	}
	help := app.Name + " --help"
	if len(args) > 1 {
		for _, c := range app.Commands {
			if c.HasName(args[1]) {
				help = app.Name + " " + c.Name + " --help"
			}
		}
	}
	ue.msg += " (see " + help + ")"
	return ue
}

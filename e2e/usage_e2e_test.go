package e2e

import (
	"os"
	"strings"
	"testing"
)

// Every bad flag value exits 2 with one line and a hint, before the device
// is looked for or anything loads, on any machine (issue 23, item 5).
func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--device", "tpu"}, `pp-offline: --device must be auto, cpu, cuda or sim, not "tpu" (see pp-offline --help)`},
		{[]string{"--compute-dtype", "fp16"}, `--compute-dtype: ops: unknown compute dtype "fp16" (want f32 or bf16) (see pp-offline --help)`},
		{[]string{"--kv-dtype", "f16"}, `pp-offline: --kv-dtype must be f32 or bf16, not "f16" (see pp-offline --help)`},
		{[]string{"--weights", "q2"}, `pp-offline: --weights: unknown weight format "q2" (have q8_0, q4_k) (see pp-offline --help)`},
		{[]string{"--gpu-memory", "banana"}, `pp-offline: --gpu-memory: size "banana": want a number then a unit`},
		{[]string{"--host-memory", "12XB"}, `--host-memory: size "12XB": unknown unit "XB"`},
		{[]string{"--cpu-offload", "--gpu-memory", "8G"}, `--gpu-memory: size "8G" is ambiguous`},
		{[]string{"--threads", "-3"}, `--threads must be from 0 (all cores) to 4096, not -3 (see pp-offline --help)`},
		{[]string{"--output-text-format", "xml"}, `--output-text-format must be list or rich, not "xml" (see pp-offline --help)`},
	} {
		t.Run(strings.Join(tc.extra, " "), func(t *testing.T) {
			dir := t.TempDir()
			stdout, stderr, code := run(t, tinyArgs(dir, tc.extra...)...) // --device cpu, then the case's flags
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help)") {
				t.Fatalf("stderr %q, want one line containing %q and a hint", stderr, tc.want)
			}
			if stdout != "" {
				t.Fatalf("stdout %q", stdout)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("left %d files", len(entries))
			}
		})
	}
}

// Missing required flags are all named in one line.
func TestMissingFlagsInOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-wav", "a.wav"}, "pp-offline: missing required flags --output-wav, --output-text, --voice-prompt (see pp-offline --help)"},
		{[]string{"--greedy"}, "pp-offline: missing required flags --input-wav, --output-wav, --output-text, --voice-prompt (see pp-offline --help)"},
		{[]string{"--input-wav", "a", "--output-wav", "b", "--output-text", "c"}, "pp-offline: missing required flag --voice-prompt (see pp-offline --help)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, tc.args...)
			if code != exitUsage || stderr != tc.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// `help <command>` prints what `<command> --help` prints; a mistyped topic is
// a usage error naming the closest command.
func TestHelpCommand(t *testing.T) {
	for _, topic := range [][]string{{"compare"}, {"batch"}, {"download"}, {"codec", "encode"}} {
		want, _, code := run(t, append(topic, "--help")...)
		if code != 0 || !strings.Contains(want, "USAGE:") {
			t.Fatalf("%s --help: exit %d:\n%s", topic, code, want)
		}
		got, stderr, code := run(t, append([]string{"help"}, topic...)...)
		if code != 0 || got != want || stderr != "" {
			t.Fatalf("help %s: exit %d, stderr %q, stdout differs from --help:\n%s", topic, code, stderr, got)
		}
	}
	for args, want := range map[string]string{
		"help comapre":      `pp-offline: help: unknown command "comapre"; did you mean "compare"? (see pp-offline --help)`,
		"help codec encdoe": `pp-offline: help: unknown command "encdoe"; did you mean "encode"? (see pp-offline codec --help)`,
		"help xyzzy":        `pp-offline: help: unknown command "xyzzy" (see pp-offline --help for the commands)`,
	} {
		stdout, stderr, code := run(t, strings.Fields(args)...)
		if code != exitUsage || stderr != want+"\n" || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want %d and %q", args, code, stderr, stdout, exitUsage, want)
		}
	}
}

// The other commands' bad values and missing flags exit 2 the same way.
func TestOtherCommandsUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"voice"}, "pp-offline: voice: missing required flags --input-wav, --output (see pp-offline voice --help)"},
		{[]string{"bench", "--weights", "q2"}, `pp-offline: --weights: unknown weight format "q2"`},
		{[]string{"quantize", "--format", "q2", "--moshi-weight", "testdata/tiny/model.safetensors", "--output", "x.st"}, `pp-offline: --format: unknown weight format "q2"`},
		{[]string{"plan", "--gpu-memory", "banana"}, `pp-offline: plan: --gpu-memory: size "banana"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, tc.args...)
			if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help)") {
				t.Fatalf("exit %d, stderr %q; want %d and one line containing %q and a hint", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

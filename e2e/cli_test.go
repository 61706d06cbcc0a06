package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// Usage errors exit 2 with one line naming what is wrong and a hint.
func TestUsageErrors(t *testing.T) {
	job := []string{"--input-wav", "a.wav", "--output-wav", "b.wav", "--output-text", "c.json", "--voice-prompt", "d.pt"}
	with := func(extra ...string) []string { return append(append([]string(nil), job...), extra...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-wave", "x.wav"}, "pp-offline: unknown flag --input-wave; did you mean --input-wav? (see pp-offline --help)"},
		{[]string{"--input-wave=x.wav"}, "did you mean --input-wav?"},
		{[]string{"--temp-txt", "1"}, "did you mean --temp-text?"},
		{[]string{"--grredy"}, "did you mean --greedy?"},
		{[]string{"--zzzzzz"}, "pp-offline: unknown flag --zzzzzz (see pp-offline --help)"},
		{[]string{"compar"}, `pp-offline: unknown command "compar"; did you mean "compare"?`},
		{[]string{"vocie"}, `did you mean "voice"?`},
		{[]string{"xyzzy"}, `pp-offline: unknown command "xyzzy" (see pp-offline --help for the commands)`},
		{[]string{"in.wav"}, `unexpected argument "in.wav"`},
		{[]string{"codec", "encdoe"}, `pp-offline: codec: unknown command "encdoe"; did you mean "encode"?`},
		{[]string{"compare", "--refrence", "a.wav"}, "pp-offline: compare: unknown flag --refrence; did you mean --reference?"},
		{[]string{"tune", "--frame", "3"}, "pp-offline: tune: unknown flag --frame; did you mean --frames?"},
		{[]string{"voice", "--output", "x.pt"}, "pp-offline: voice: missing required flag --input-wav"},
		{[]string{"--output-wav"}, "pp-offline: flag --output-wav needs a value"},
		{[]string{"--temp-text", "warm"}, `pp-offline: invalid value "warm" for --temp-text: not a number`},
		{[]string{"--input-wav", "a.wav"}, "pp-offline: missing required flags --output-wav, --output-text, --voice-prompt"},
		{with("--temp-text", "-0.1"), "pp-offline: --temp-text must be a number >= 0 (0: argmax), not -0.1"},
		{with("--temp-audio", "NaN"), "--temp-audio must be a number >= 0"},
		{with("--temp-audio", "+Inf"), "--temp-audio must be a number >= 0"},
		{with("--topk-text", "0"), "pp-offline: --topk-text must be >= 1, not 0"},
		{with("--topk-audio", "-5"), "pp-offline: --topk-audio must be >= 1, not -5"},
		{with("--seed", "-2"), "pp-offline: --seed must be >= 0 (or -1: draw one), not -2"},
		{with("--output-format", "mp3"), "--output-format must be pcm16, float32 or flac"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := run(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr %q, want one line containing %q", stderr, tc.want)
			}
			if stdout != "" {
				t.Fatalf("stdout %q (the help?)", stdout)
			}
		})
	}
}

// --help stays the full help; the nits of issue 17 stay fixed.
func TestHelpIsFull(t *testing.T) {
	stdout, _, code := run(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"--input-wav", "--output-wav", "--output-text", "--voice-prompt", "--temp-audio", "--topk-text", "--seed", "--threads", "--device", "COMMANDS:", "compare", "voice"} {
		if !strings.Contains(stdout, f) {
			t.Errorf("--help lacks %s", f)
		}
	}
	if n := strings.Count(stdout, "\n"); n < 40 {
		t.Errorf("--help is %d lines", n)
	}
	if !strings.Contains(stdout, "--threads value") || regexp.MustCompile(`--threads.*\(default.*\(default`).MatchString(stdout) || !strings.Contains(stdout, "CPU threads (default: all cores)") {
		t.Errorf("--threads default shown wrong:\n%s", grepLine(stdout, "--threads"))
	}
	help, _, _ := run(t, "help")
	if help != stdout {
		t.Error("`pp-offline help` differs from --help")
	}
	voice, _, _ := run(t, "voice", "--help")
	if !strings.Contains(voice, "DESCRIPTION:") {
		t.Error("voice --help has no description")
	}
	tune, _, _ := run(t, "tune", "--help")
	if !strings.Contains(tune, "--device sim") || !strings.Contains(grepLine(tune, "--device value"), "sim") {
		t.Errorf("tune's usage names --device sim but the flag does not list it:\n%s", grepLine(tune, "--device value"))
	}
	for _, cmd := range []string{"bench", "tune"} {
		h, _, _ := run(t, cmd, "--help")
		if strings.Contains(grepLine(h, "--threads"), "(default: 0)") {
			t.Errorf("%s --threads: %s", cmd, grepLine(h, "--threads"))
		}
	}
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// The binary's stderr is a pipe here, as in CI: every log line is stamped.
func TestLogsOffTerminalAreStamped(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := run(t, tinyArgs(dir, "--greedy")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[(info|warn)\] `)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for _, l := range lines {
		if !stamp.MatchString(l) {
			t.Fatalf("log line without a timestamp: %q", l)
		}
	}
	if last := grepLine(stderr, "frame 39/39"); !strings.Contains(last, "real-time factor") || !strings.Contains(last, "ETA 0 s") {
		t.Fatalf("no final progress line with RTF and ETA:\n%s", stderr)
	}
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
)

// The commands beside the main job keep its promises (README "exit codes",
// docs/RELIABILITY.md "Command line"): a bad flag value or a missing flag
// exits 2 with one line (every missing flag named at once), a bad input
// exits 1 with one line naming the file, and no value sizes anything before
// it is bounded: no Go trace, not even the runtime's out-of-memory one.
// Every case fails before a model runs, under the 4 GiB address-space
// ceiling of the bad-input matrix.
func TestUsageAudit(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, x []float32, float bool) string {
		var b bytes.Buffer
		if float {
			audio.EncodeFloat32(&b, x, 24000)
		} else {
			audio.EncodePCM16(&b, x, 24000)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tone := make([]float32, 4000)
	for i := range tone {
		tone[i] = float32(0.3 * math.Sin(float64(i)*0.05))
	}
	withNaN := append([]float32(nil), tone...)
	withNaN[100] = float32(math.NaN())
	withInf := append([]float32(nil), tone...)
	withInf[3000] = float32(math.Inf(-1))
	nanWAV, infWAV, emptyWAV := write("nan.wav", withNaN, true), write("inf.wav", withInf, true), write("empty.wav", nil, false)
	codes := filepath.Join(dir, "codes.safetensors")
	quantOut := filepath.Join(dir, "q.safetensors")
	cfg := tiny + "config.json"

	encode := func(in string) []string {
		return []string{"codec", "encode", "--config", cfg, "--mimi-weight", tiny + "mimi.safetensors", "--input-wav", in, "--output", codes}
	}
	quantize := func(extra ...string) []string {
		return append([]string{"quantize", "--moshi-weight", tiny + "model.safetensors", "--format", "q8_0", "--output", quantOut}, extra...)
	}
	bench := func(extra ...string) []string { return append([]string{"bench", "--config", cfg}, extra...) }
	tune := func(extra ...string) []string {
		return append([]string{"tune", "--config", cfg, "--threads", "1", "--frames", "1"}, extra...)
	}
	plan := func(extra ...string) []string {
		return append([]string{"plan", "--config", cfg, "--gpu-memory", "8GiB"}, extra...)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		// codec: usage errors, then the main command's checks of the input.
		{"codec encode missing flags", []string{"codec", "encode", "--input-wav", "x.wav"}, 2, "codec encode: missing required flags --mimi-weight, --output (see pp-offline codec encode --help)"},
		{"codec decode missing flags", []string{"codec", "decode"}, 2, "codec decode: missing required flags --mimi-weight, --codes, --output-wav"},
		{"codec encode extra argument", []string{"codec", "encode", "extra", "--input-wav", "x.wav"}, 2, `codec encode: unexpected argument "extra"`},
		{"codec encode NaN", encode(nanWAV), 1, "nan.wav: sample 100 (at 0.004 s) is NaN: not usable audio"},
		{"codec encode Inf", encode(infWAV), 1, "inf.wav: sample 3000 (at 0.125 s) is -Inf: not usable audio"},
		{"codec encode empty", encode(emptyWAV), 1, "empty.wav: no audio samples"},
		// tokenize
		{"tokenize no tokenizer", []string{"tokenize", "hello"}, 2, "tokenize: missing required flag --tokenizer"},
		{"tokenize two texts", []string{"tokenize", "--tokenizer", tiny + "tokenizer.model", "a", "b"}, 2, "want exactly one TEXT argument, got 2"},
		{"tokenize no text", []string{"tokenize", "--tokenizer", tiny + "tokenizer.model"}, 2, "want exactly one TEXT argument, got 0"},
		// quantize
		{"quantize missing flags", []string{"quantize", "--moshi-weight", "X"}, 2, "quantize: missing required flags --format, --output"},
		{"random-weights missing flags", []string{"random-weights", "--config", cfg}, 2, "random-weights: missing required flags --tokenizer, --output"},
		{"quantize threads -1", quantize("--threads", "-1"), 2, "--threads must be from 0 (all cores) to 4096, not -1"},
		{"quantize threads 99999999", quantize("--threads", "99999999"), 2, "--threads must be from 0 (all cores) to 4096, not 99999999"},
		{"quantize extra argument", append(quantize(), "extra"), 2, `quantize: unexpected argument "extra"`},
		// bench
		{"bench frames 0", bench("--frames", "0"), 2, "--frames must be from 1 to"},
		{"bench warmup -1", bench("--warmup", "-1"), 2, "--warmup must be from 0 to"},
		{"bench batch-size 0", bench("--batch-size", "0"), 2, "--batch-size must be from 1 to 4096, not 0"},
		{"bench memory-mib 0", bench("--memory-mib", "0"), 2, "--memory-mib must be from 1 to"},
		{"bench kv-fill -1", bench("--kv-fill", "-1"), 2, "--kv-fill must be from 0 to"},
		{"bench threads -1", bench("--threads", "-1"), 2, "--threads must be from 0 (all cores) to 4096, not -1"},
		// tune: checked before any device is looked for.
		{"tune frames 0", tune("--frames", "0"), 2, "tune: --frames must be from 1 to"},
		{"tune warmup -1", tune("--warmup", "-1"), 2, "tune: --warmup must be from 0 to"},
		{"tune threads -1", tune("--threads", "-1"), 2, "tune: --threads must be from 0 (all cores) to 4096, not -1"},
		{"tune measure-bytes -1GiB", tune("--measure-bytes", "-1GiB"), 2, "tune: --measure-bytes: "},
		{"tune measure-bytes 0", tune("--measure-bytes", "0"), 2, "tune: --measure-bytes must be from 1.00 MiB to 1.00 TiB, not 0"},
		{"tune measure-bytes 1B", tune("--measure-bytes", "1B"), 2, "tune: --measure-bytes must be from 1.00 MiB to 1.00 TiB, not 1B"},
		{"tune measure-bytes 2TiB", tune("--measure-bytes", "2TiB"), 2, "tune: --measure-bytes must be from 1.00 MiB to 1.00 TiB, not 2TiB"},
		{"tune measure-bytes 64GiB", tune("--measure-bytes", "64GiB"), 1, "tune: not enough memory: --measure-bytes 64.00 GiB is more than"},
		{"tune measure-bytes 1TiB", tune("--measure-bytes", "1TiB"), 1, "tune: not enough memory: --measure-bytes 1.00 TiB is more than"},
		{"tune cpu-bandwidth NaN", tune("--cpu-bandwidth", "NaN"), 2, "tune: --cpu-bandwidth must be a positive number of GB/s, not NaN"},
		{"tune cpu-bandwidth 0", tune("--cpu-bandwidth", "0"), 2, "tune: --cpu-bandwidth must be a positive number of GB/s, not 0"},
		{"tune cpu-bandwidth -1", tune("--cpu-bandwidth", "-1"), 2, "tune: --cpu-bandwidth must be a positive number of GB/s, not -1"},
		{"tune cpu-bandwidth Inf", tune("--cpu-bandwidth", "Inf"), 2, "tune: --cpu-bandwidth must be a positive number of GB/s, not +Inf"},
		{"tune extra argument", append(tune(), "extra"), 2, `tune: unexpected argument "extra"`},
		// plan
		{"plan missing gpu-memory", []string{"plan", "--config", cfg}, 2, "plan: missing required flag --gpu-memory"},
		{"plan timeline 99999999999", plan("--timeline", "99999999999"), 2, "plan: --timeline must be from 0 (none) to 10000 frames"},
		{"plan timeline -1", plan("--timeline", "-1"), 2, "plan: --timeline must be from 0 (none) to 10000 frames, not -1"},
		{"plan batch 0", plan("--batch", "0"), 2, "plan: --batch must be from 1 to 4096, not 0"},
		{"plan batch 2^63-1", plan("--batch", "9223372036854775807"), 2, "plan: --batch must be from 1 to 4096"},
		{"plan gpu-bandwidth NaN", plan("--gpu-bandwidth", "NaN"), 2, "plan: --gpu-bandwidth must be a positive number of GB/s, not NaN"},
		{"plan gpu-bandwidth 0", plan("--gpu-bandwidth", "0"), 2, "plan: --gpu-bandwidth must be a positive number of GB/s, not 0"},
		{"plan gpu-bandwidth -1", plan("--gpu-bandwidth", "-1"), 2, "plan: --gpu-bandwidth must be a positive number of GB/s, not -1"},
		{"plan gpu-bandwidth Inf", plan("--gpu-bandwidth", "Inf"), 2, "plan: --gpu-bandwidth must be a positive number of GB/s, not +Inf"},
		{"plan cpu-tflops 0", plan("--cpu-tflops", "0"), 2, "plan: --cpu-tflops must be a positive number of TFLOP/s, not 0"},
		{"plan prefill -1", plan("--prefill", "-1"), 2, "plan: --prefill must be from 0 (decode) to"},
		{"plan positions -1", plan("--positions", "-1"), 2, "plan: --positions must be from 0 (the context) to"},
		{"plan dep-steps -1", plan("--dep-steps", "-1"), 2, "plan: --dep-steps must be from 0 to"},
		{"plan dep-steps 1000", plan("--dep-steps", "1000"), 2, "plan: --dep-steps must be from 0 to the config's dep_q"},
		{"plan host-memory 0", plan("--host-memory", "0"), 2, "plan: --host-memory: 0"},
		{"plan measure-bytes 1B", plan("--measure-cpu", "--measure-bytes", "1B"), 2, "plan: --measure-bytes must be from 1.00 MiB to 1.00 TiB, not 1B"},
		{"plan measure-bytes 64GiB", plan("--measure-cpu", "--measure-bytes", "64GiB"), 1, "plan: not enough memory: --measure-bytes 64.00 GiB is more than"},
		{"plan extra argument", append(plan(), "extra"), 2, `plan: unexpected argument "extra"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runLimitedOut(t, c.args...)
			if stdout != "" {
				t.Errorf("%v: stdout (usage errors go to stderr, not as help):\n%s", c.args, stdout)
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != c.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "pp-offline: ") || !strings.Contains(lines[0], c.want) {
				t.Errorf("%v: exit %d (want %d), stderr:\n%s\nwant one line containing %q", c.args, code, c.code, stderr, c.want)
			}
			for _, bad := range []string{"goroutine", "fatal error", "panic"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("%v: stderr holds %q:\n%s", c.args, bad, stderr)
				}
			}
			for _, p := range []string{codes, quantOut} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%v: %s was written", c.args, p)
					os.Remove(p)
				}
			}
		})
	}
}

// runLimitedOut is runLimitedEnv (the binary under the 4 GiB address-space
// ceiling) that returns stdout too.
func runLimitedOut(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, memoryCeilingKB), binPath}, args...)...)
	stdout, stderr, code = runCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("still running after 2 minutes: %v", args)
	}
	return stdout, stderr, code
}

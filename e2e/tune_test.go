package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tune on the tiny config: it prints predicted against measured per
// placement class and in total, recommends when they agree and refuses
// (exit 1, a clear message) when they do not.
func TestTune(t *testing.T) {
	cfg := "testdata/tiny/config.json"
	row := regexp.MustCompile(`(?m)^(cpu|resident|streamed|total)\s+(\d+)\s+\S+ \S+\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+|\+Inf)%`)
	rows := func(t *testing.T, out string) map[string][2]float64 {
		t.Helper()
		m := map[string][2]float64{}
		for _, r := range row.FindAllStringSubmatch(out, -1) {
			p, _ := strconv.ParseFloat(r[3], 64)
			q, _ := strconv.ParseFloat(r[4], 64)
			m[r[1]] = [2]float64{p, q}
		}
		if _, ok := m["total"]; !ok {
			t.Fatalf("no total row in:\n%s", out)
		}
		return m
	}

	t.Run("cpu, measured, random weights", func(t *testing.T) {
		out, stderr, code := run(t, "tune", "--config", cfg, "--frames", "4", "--measure-bytes", "16MiB")
		r := rows(t, out)
		if _, ok := r["cpu"]; !ok || len(r) != 2 {
			t.Fatalf("rows %v:\n%s", r, out)
		}
		if !strings.Contains(out, "CPU memory bandwidth") || !strings.Contains(out, "measured") || !strings.Contains(out, "random bf16 weights") {
			t.Fatalf("figures not shown as measured:\n%s", out)
		}
		// Either verdict is legitimate on a given machine; each must be explicit.
		switch code {
		case 0:
			if !strings.Contains(out, "recommendation:") {
				t.Fatalf("exit 0 without a recommendation:\n%s", out)
			}
		case 1:
			if !strings.Contains(stderr, "not recommending") {
				t.Fatalf("exit 1 without the refusal:\n%s", stderr)
			}
		default:
			t.Fatalf("exit %d: %s", code, stderr)
		}
		t.Logf("exit %d\n%s%s", code, out, stderr)
	})

	t.Run("refuses when they disagree", func(t *testing.T) {
		// A CPU declared 10⁶ GB/s fast predicts next to nothing.
		out, stderr, code := run(t, "tune", "--config", cfg, "--moshi-weight", "testdata/tiny/model.safetensors", "--frames", "3", "--cpu-bandwidth", "1e6")
		r := rows(t, out)
		if code != 1 || r["total"][1] < 2*r["total"][0] {
			t.Fatalf("exit %d, rows %v\n%s%s", code, r, out, stderr)
		}
		last := strings.TrimSpace(stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:])
		for _, want := range []string{"pp-offline: tune: predicted and measured disagree by", "more than 15%", "not recommending", "try --cpu-bandwidth"} {
			if !strings.Contains(last, want) {
				t.Fatalf("last line %q lacks %q", last, want)
			}
		}
		if strings.Contains(out, "recommendation:") {
			t.Fatal("recommended anyway")
		}
	})

	t.Run("sim device recommends", func(t *testing.T) {
		// Everything resident on the simulated device: its units run at the
		// declared figures, which the prediction uses too.
		out, stderr, code := run(t, "tune", "--config", cfg, "--moshi-weight", "testdata/tiny/model.safetensors", "--frames", "3",
			"--cpu-bandwidth", "0.01", "--device", "sim", "--gpu-memory", "64MiB", "--workspace", "64KiB")
		r := rows(t, out)
		if code != 0 || len(r) != 2 || r["resident"] != r["total"] || !strings.Contains(out, "plan: 11 resident") {
			t.Fatalf("exit %d, rows %v\n%s%s", code, r, out, stderr)
		}
		if !strings.Contains(out, "recommendation: the cost model holds here") || !strings.Contains(out, "pp-offline plan --config "+cfg+" --gpu-memory 64MiB --cpu-bandwidth 0.01") {
			t.Fatalf("no recommendation:\n%s", out)
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
			code int
		}{
			{[]string{"--gpu-memory", "1GiB"}, "--gpu-memory needs a device (--device sim)", exitUsage},
			{[]string{"--frames", "0"}, "--frames must be from 1 to", exitUsage},
			{[]string{"--device", "sim", "--gpu-memory", "8G"}, "ambiguous", exitUsage},
			{[]string{"--device", "tpu"}, "--device must be", exitUsage},
		} {
			_, stderr, code := run(t, append([]string{"tune", "--config", cfg, "--cpu-bandwidth", "10"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "pp-offline: tune: ") {
				t.Errorf("%v: exit %d, %s", c.args, code, stderr)
			}
		}
	})
	// A value out of bounds is a usage error: exit 2, through tune's prefix.
	t.Run("out of bounds", func(t *testing.T) {
		_, stderr, code := run(t, "tune", "--config", cfg, "--cpu-bandwidth", "10", "--frames", "2000000")
		if code != exitUsage || !strings.Contains(stderr, "pp-offline: tune: --frames + --warmup must be at most") {
			t.Errorf("exit %d, %s", code, stderr)
		}
	})
}

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/offload"
)

// The whole job through the simulated device (--device sim): at budgets
// where everything fits, about half, a streamed-heavy one and nothing, the
// output files are byte-identical to the CPU-only run's, greedy and
// sampling; the log shows the plan and a passed timeline check (the device
// within its budget, no unit transferred twice in a pass).

// simFigures make the device attractive for the tiny model, whose units are
// so small that with the default figures kernel launches would keep them
// all on the CPU.
const simFigures = "cpu_bandwidth=0.01,gpu_launch=0.001,sync=0.001"

// tinyBudgets derives device budgets from the tiny model's units.
func tinyBudgets(t *testing.T) (all, half, streamed int64) {
	t.Helper()
	cfg, err := config.Load(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	units, err := lm.Units(&cfg.LM, offload.DefaultDepSteps(&cfg.LM))
	if err != nil {
		t.Fatal(err)
	}
	fig := offload.DefaultFigures()
	if err := fig.Set(simFigures, offload.FromDeclared, "test"); err != nil {
		t.Fatal(err)
	}
	p := offload.NewProblem(units, offload.Workload{Batch: 1}, fig, 1<<40, 0)
	p.Workspace = 64 << 10
	where := make([]offload.Placement, len(units.Units))
	pl, err := p.Evaluate(where) // all resident
	if err != nil {
		t.Fatal(err)
	}
	var maxUnit int64
	for _, u := range units.Units {
		maxUnit = max(maxUnit, u.Bytes)
	}
	fixed := pl.Memory.GPUTotal - pl.Memory.GPUResident
	return pl.Memory.GPUTotal, fixed + 2*maxUnit + pl.Memory.GPUResident/2, fixed + 2*maxUnit + maxUnit/2
}

func TestSimDeviceOutputsIdentical(t *testing.T) {
	all, half, streamed := tinyBudgets(t)
	classes := regexp.MustCompile(`\[info\]   (resident|streamed|cpu)\s+(\d+) units`)
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"greedy", []string{"--greedy"}},
		{"sampling", []string{"--seed", "4242"}},
	} {
		refDir := t.TempDir()
		if _, stderr, code := run(t, tinyArgs(refDir, mode.args...)...); code != 0 {
			t.Fatalf("cpu run: exit %d: %s", code, stderr)
		}
		refWav, _ := os.ReadFile(filepath.Join(refDir, "out.wav"))
		refJSON, _ := os.ReadFile(filepath.Join(refDir, "out.json"))
		for _, b := range []struct {
			name   string
			budget int64
			want   map[string]bool // placement classes present
		}{
			{"everything", all, map[string]bool{"resident": true}},
			{"half", half, map[string]bool{"resident": true, "streamed": true}},
			{"streamed-heavy", streamed, map[string]bool{"streamed": true}},
			{"nothing", 0, map[string]bool{"cpu": true}},
		} {
			t.Run(mode.name+"/"+b.name, func(t *testing.T) {
				dir := t.TempDir()
				args := tinyArgs(dir, mode.args...)
				stderr := runSim(t, args, dir, b.budget, refWav, refJSON)
				got := map[string]bool{}
				units := 0
				for _, m := range classes.FindAllStringSubmatch(stderr, -1) {
					got[m[1]] = true
					var n int
					fmt.Sscan(m[2], &n)
					units += n
				}
				if fmt.Sprint(got) != fmt.Sprint(b.want) || units != 11 {
					t.Fatalf("plan classes %v (%d units), want %v:\n%s", got, units, b.want, stderr)
				}
				if !strings.Contains(stderr, fmt.Sprintf("offload plan for a simulated device of %s", offload.FormatSize(b.budget))) ||
					// One pass per frame: the prompt prefill runs in the first frame's pass.
					!strings.Contains(stderr, "offload timeline check passed: 39 passes") ||
					!strings.Contains(stderr, "no unit transferred twice in a pass") {
					t.Fatalf("log lacks the plan or the timeline check:\n%s", stderr)
				}
				t.Logf("%s", stderr)
			})
		}
	}
}

// runSim runs args (writing into dir) on a simulated device of budget
// bytes and checks that the outputs equal the CPU-only run's; it returns
// the log.
func runSim(t *testing.T, args []string, dir string, budget int64, refWav, refJSON []byte) string {
	t.Helper()
	args = setFlag(args, "--device", "sim")
	args = append(args, "--gpu-memory", fmt.Sprint(budget), "--workspace", "64KiB", "--sim-figures", simFigures)
	_, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wav, _ := os.ReadFile(filepath.Join(dir, "out.wav"))
	js, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	if !bytes.Equal(wav, refWav) || !bytes.Equal(js, refJSON) {
		t.Fatalf("outputs differ from the CPU-only run\n%s", stderr)
	}
	return stderr
}

func TestSimDeviceFlags(t *testing.T) {
	// --cpu-offload with --device sim plans from the device's free memory.
	dir := t.TempDir()
	args := append(setFlag(tinyArgs(dir, "--greedy"), "--device", "sim"), "--cpu-offload")
	_, stderr, code := run(t, args...)
	if code != 0 || !strings.Contains(stderr, "--cpu-offload: planning for the simulated device's free memory") ||
		!strings.Contains(stderr, "offload plan for a simulated device of 131.32 GiB") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	want, _ := os.ReadFile(tiny + "expected/run_pt/output.json")
	if !bytes.Equal(got, want) {
		t.Fatal("transcript differs from the reference's")
	}
	// Without a GPU, --cpu-offload on auto and cuda: one line, then the CPU.
	for _, dev := range []string{"auto", "cuda"} {
		dir := t.TempDir()
		_, stderr, code := run(t, append(setFlag(tinyArgs(dir, "--greedy"), "--device", dev), "--cpu-offload")...)
		if code != 0 || !strings.Contains(stderr, "no usable GPU") || strings.Contains(stderr, "offload plan") {
			t.Fatalf("--device %s --cpu-offload: exit %d:\n%s", dev, code, stderr)
		}
	}
	// The simulated device is not advertised (the --cpu-offload budgets are).
	out, _, _ := run(t, "--help")
	if !strings.Contains(out, "--gpu-memory") || !strings.Contains(out, "--host-memory") {
		t.Errorf("--help lacks the --cpu-offload budgets")
	}
	for _, hidden := range []string{"--workspace", "--sim-figures"} {
		if strings.Contains(out, hidden) {
			t.Errorf("--help mentions %s", hidden)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--device") && strings.Contains(line, "sim") {
			t.Errorf("--help offers the simulated device: %s", line)
		}
	}
	// Budgets that fit nothing, and bad sizes: one line, no output.
	for _, c := range []struct {
		extra []string
		want  string
		code  int // bad values are usage errors
	}{
		{[]string{"--host-memory", "1KiB"}, "no placement fits", 1},
		{[]string{"--gpu-memory", "8G"}, "--gpu-memory: size \"8G\" is ambiguous", exitUsage},
		{[]string{"--sim-figures", "warp=9"}, "unknown figure", exitUsage},
	} {
		dir := t.TempDir()
		_, stderr, code := run(t, append(setFlag(tinyArgs(dir, "--greedy"), "--device", "sim"), c.extra...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != c.code || !strings.Contains(lines[len(lines)-1], c.want) {
			t.Errorf("%v: exit %d, %s", c.extra, code, stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v: left %d files", c.extra, len(entries))
		}
	}
	// On the CPU the device flags say they do nothing.
	dir = t.TempDir()
	_, stderr, code = run(t, tinyArgs(dir, "--greedy", "--gpu-memory", "1GiB")...)
	if code != 0 || !strings.Contains(stderr, "--gpu-memory has no effect on the CPU") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// Quantized weights through the simulated device's plans — quantized at
// load (--weights) and a file from pp-offline quantize: the output files
// equal the quantized CPU-only run's at budgets that keep some units
// resident and stream others, and the plan sizes the units as blocks
// (q8_0's whole plan takes less device memory than bf16's).
func TestSimDeviceQuantized(t *testing.T) {
	all, half, _ := tinyBudgets(t)
	qfile := filepath.Join(t.TempDir(), "model-q8_0.safetensors")
	if _, stderr, code := run(t, "quantize", "--moshi-weight", tiny+"model.safetensors", "--format", "q8_0", "--output", qfile, "-q"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	planned := regexp.MustCompile(`offload plan for a simulated device of [^:]*: .*`)
	for _, w := range []struct {
		name string
		args []string
	}{
		{"q8_0 at load", []string{"--weights", "q8_0"}},
		{"q4_k at load", []string{"--weights", "q4_k"}},
		{"q8_0 file", []string{"--moshi-weight", qfile}},
	} {
		ref := t.TempDir()
		refArgs := tinyArgs(ref, "--greedy")
		for i := 0; i < len(w.args); i += 2 {
			refArgs = setFlag(refArgs, w.args[i], w.args[i+1])
		}
		if _, stderr, code := run(t, refArgs...); code != 0 {
			t.Fatalf("%s on the CPU: exit %d: %s", w.name, code, stderr)
		}
		refWav, _ := os.ReadFile(filepath.Join(ref, "out.wav"))
		refJSON, _ := os.ReadFile(filepath.Join(ref, "out.json"))
		for _, budget := range []int64{all, half} {
			t.Run(fmt.Sprintf("%s/%d", w.name, budget), func(t *testing.T) {
				dir := t.TempDir()
				args := tinyArgs(dir, "--greedy")
				for i := 0; i < len(w.args); i += 2 {
					args = setFlag(args, w.args[i], w.args[i+1])
				}
				stderr := runSim(t, args, dir, budget, refWav, refJSON)
				if !strings.Contains(stderr, "offload timeline check passed") || !planned.MatchString(stderr) {
					t.Fatalf("log lacks the plan or the timeline check:\n%s", stderr)
				}
				t.Logf("%s", planned.FindString(stderr))
			})
		}
	}
}

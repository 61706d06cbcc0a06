package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/offload"
)

func runPlanCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"pp-offline", "plan"}, args...))
	return out.String(), err
}

func TestPlanText7B(t *testing.T) {
	out, err := runPlanCmd(t, "--config", "testdata/personaplex-7b.config.json", "--gpu-memory", "8GiB")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"offload plan for testdata/personaplex-7b.config.json",
		"budgets    device 8.00 GiB, host unlimited",
		"8 of 16 steps run per frame",
		"GPU memory bandwidth", "4800 GB/s", "default", "H200",
		"host→device, pinned", "PCIe gen5",
		"layer.0 ", "layer.31 ", "head ", "dep.0 ", "dep.7 ",
		"dep.8..15      1.24 GiB  not run",
		"KV cache", "93.75 MiB (float32 K+V, 3000 positions)",
		"staging slots", "workspace", "embedding tables",
		"ms/frame in steady state",
		"accelerate --cpu-offload", "out of memory",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, w := range []string{"resident", "streamed", "cpu"} {
		if !strings.Contains(out, "  "+w+" ") {
			t.Errorf("8 GiB at the 7B shape: no unit is %s", w)
		}
	}
	if strings.Contains(out, "dep.8 ") {
		t.Error("a skipped depformer step is listed as a unit")
	}
	if testing.Verbose() {
		t.Log("\n" + out)
	}
}

func planJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := runPlanCmd(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return m
}

func TestPlanJSON(t *testing.T) {
	m := planJSON(t, "--config", "testdata/personaplex-7b.config.json", "--gpu-memory", "8GiB", "--h2d-bandwidth", "25")
	units := m["units"].([]any)
	if len(units) != 41 || len(m["skipped"].([]any)) != 8 {
		t.Fatalf("%d units, %d skipped", len(units), len(m["skipped"].([]any)))
	}
	mem := m["memory"].(map[string]any)
	if gpu := mem["gpu_total"].(float64); gpu > 8<<30 || gpu <= 0 {
		t.Errorf("device total %v", gpu)
	}
	if mem["gpu_kv"].(float64) != mem["kv_layers_gpu"].(float64)*2*3000*4096*4 {
		t.Errorf("KV %v for %v layers", mem["gpu_kv"], mem["kv_layers_gpu"])
	}
	fig := m["figures"].(map[string]any)
	h2d := fig["h2d_bandwidth"].(map[string]any)
	if h2d["source"] != "declared" || h2d["value"].(float64) != 25 || h2d["note"] != "--h2d-bandwidth" {
		t.Errorf("h2d figure %v", h2d)
	}
	if fig["gpu_bandwidth"].(map[string]any)["source"] != "default" {
		t.Errorf("gpu figure %v", fig["gpu_bandwidth"])
	}
	where := map[string]int{}
	for _, u := range units {
		where[u.(map[string]any)["where"].(string)]++
	}
	if where["resident"]+where["streamed"]+where["cpu"] != 41 {
		t.Errorf("placements %v", where)
	}

	// The prediction is the planner's, from the figures shown.
	cfg, err := config.Load("testdata/personaplex-7b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	lmUnits, err := lm.Units(&cfg.LM, 8)
	if err != nil {
		t.Fatal(err)
	}
	figs := offload.DefaultFigures()
	figs.H2DBandwidth.Value = 25
	pl, err := offload.NewProblem(lmUnits, offload.Workload{Batch: 1}, figs, 8<<30, 0).Solve()
	if err != nil {
		t.Fatal(err)
	}
	got := m["predicted"].(map[string]any)["frame_ms"].(float64)
	if math.Abs(got-pl.Predict.FrameMs) > 1e-9*got {
		t.Errorf("CLI predicts %v ms/frame, planner %v", got, pl.Predict.FrameMs)
	}
	// A slower link makes the frame slower than with the default figures.
	def := planJSON(t, "--config", "testdata/personaplex-7b.config.json", "--gpu-memory", "8GiB")
	if d := def["predicted"].(map[string]any)["frame_ms"].(float64); d >= got {
		t.Errorf("25 GB/s link: %v ms/frame, not slower than 55 GB/s: %v", got, d)
	}
}

func TestPlanBudgets(t *testing.T) {
	prev := math.Inf(1)
	for _, b := range []string{"0", "8GiB", "12GiB", "16GiB", "24GiB"} {
		m := planJSON(t, "--gpu-memory", b) // built-in 7B
		ms := m["predicted"].(map[string]any)["frame_ms"].(float64)
		if ms > prev {
			t.Errorf("%s: %v ms/frame, slower than a smaller budget", b, ms)
		}
		prev = ms
	}
	// The 1B config, a host budget, a prefill, a batch, 16 depformer steps.
	m := planJSON(t, "--config", "testdata/personaplex-1b.config.json", "--gpu-memory", "2GB", "--host-memory", "16GiB",
		"--prefill", "100", "--batch", "2", "--dep-steps", "16", "--cpu-bandwidth", "20", "--gpu-tflops", "400")
	if n := len(m["units"].([]any)); n != 16+1+16 {
		t.Errorf("1B with 16 depformer steps: %d units", n)
	}
	mem := m["memory"].(map[string]any)
	if mem["gpu_total"].(float64) > 2e9 || mem["host_total"].(float64) > 16<<30 {
		t.Errorf("budgets exceeded: %v", mem)
	}
	if m["predicted"].(map[string]any)["position_ms"].(float64) <= 0 {
		t.Error("prefill: no per-position time")
	}
	if m["figures"].(map[string]any)["cpu_bandwidth"].(map[string]any)["source"] != "declared" {
		t.Error("--cpu-bandwidth not marked declared")
	}
}

func TestPlanMeasureAndTimeline(t *testing.T) {
	out, err := runPlanCmd(t, "--gpu-memory", "4GiB", "--measure-cpu", "--measure-bytes", "4MiB", "--timeline", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"measured", "read of 4.00 MiB by all cores", "simulated schedule of 2 frame(s)", "→ slot 1", "frame  1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "plan: missing required flag --gpu-memory"},
		{[]string{"--gpu-memory", "8G"}, "ambiguous: write 8GiB"},
		{[]string{"--gpu-memory", "lots"}, "--gpu-memory"},
		{[]string{"--gpu-memory", "8GiB", "--host-memory", "1GiB"}, "no placement fits"},
		{[]string{"--gpu-memory", "8GiB", "--host-memory", "0"}, "--host-memory: 0"},
		{[]string{"--gpu-memory", "8GiB", "--gpu-bandwidth", "-1"}, "--gpu-bandwidth must be a positive number"},
		{[]string{"--gpu-memory", "8GiB", "--h2d-bandwidth", "0"}, "--h2d-bandwidth must be a positive number"},
		{[]string{"--gpu-memory", "8GiB", "--dep-steps", "17"}, "--dep-steps must be from 0 to the config's dep_q 16, not 17"},
		{[]string{"--gpu-memory", "8GiB", "--batch", "0"}, "--batch must be from 1 to 4096, not 0"},
		{[]string{"--gpu-memory", "8GiB", "--config", "testdata/nope.json"}, "testdata/nope.json"},
		{[]string{"--gpu-memory", "8GiB", "--measure-cpu", "--cpu-bandwidth", "9"}, "choose one"},
		{[]string{"--gpu-memory", "8GiB", "extra"}, "unexpected argument"},
		{[]string{"--gpu-memory", "8GiB", "--bogus"}, "plan: unknown flag --bogus"},
	} {
		_, err := runPlanCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("plan %v: got %v, want an error containing %q", c.args, err, c.msg)
		}
	}
}

// --weights plans units at their stored size: a q8_0 layer is its blocks'
// bytes (34 per 32 weights), and under the same budget more of a quantized
// model stays resident than of the bf16 one.
func TestPlanWeights(t *testing.T) {
	resident := map[string]int{}
	layerBytes := map[string]float64{}
	for _, w := range []string{"bf16", "q8_0", "q4_k"} {
		m := planJSON(t, "--config", "testdata/personaplex-7b.config.json", "--gpu-memory", "8GiB", "--weights", w)
		for _, u := range m["units"].([]any) {
			u := u.(map[string]any)
			if u["where"] == "resident" {
				resident[w]++
			}
			if u["name"] == "layer.0" {
				layerBytes[w] = u["bytes"].(float64)
			}
		}
	}
	if !(resident["bf16"] < resident["q8_0"] && resident["q8_0"] < resident["q4_k"]) {
		t.Fatalf("resident units %v", resident)
	}
	// layer.0: in/out projections and gating (all q8_0) + two 4096-float bf16 norms.
	D, H := 4096.0, 11264.0
	want := (4*D*D+3*H*D)/32*34 + 2*D*2
	if layerBytes["q8_0"] != want {
		t.Fatalf("q8_0 layer.0 is %v bytes, want %v", layerBytes["q8_0"], want)
	}
	if _, err := runPlanCmd(t, "--gpu-memory", "8GiB", "--weights", "q3"); err == nil {
		t.Fatal("--weights q3 accepted")
	}
}

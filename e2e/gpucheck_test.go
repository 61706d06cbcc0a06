package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// scripts/gpu-check.sh's own logic, with stand-in binaries: every step
// runs, a failing step and a hanging one (killed at its timeout) are
// reported as such, the later steps still run, and the one table is
// printed and written to $OUT.
func TestGPUCheckDryRun(t *testing.T) {
	for _, tool := range []string{"bash", "timeout", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("scripts/gpu-check.sh", "--dry-run")
	cmd.Env = append(os.Environ(), "OUT="+out, "GPU_CHECK_FAIL=job:run_wav", "GPU_CHECK_HANG=bench:16GiB", "GPU_CHECK_MAX_STEP=2")
	stdout, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v (want 1: a step failed)\n%s", err, stdout)
	}
	table, err := os.ReadFile(filepath.Join(out, "gpu-check.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stdout), string(table)) {
		t.Fatalf("the table printed is not the one written:\n%s", stdout)
	}
	want := map[string]string{
		"conformance": "ok", "parity": "ok", "job:run_pt": "ok", "job:run_wav": "FAIL(1)", "job:run_dep8": "ok",
		"bench:B1": "ok", "bench:B8": "ok", "bench:8GiB": "ok", "bench:B1-bf16": "ok", "bench:B8-bf16": "ok", "bench:B16": "ok", "bench:16GiB": "TIMEOUT", "bench:24GiB": "ok", "bench:8GiB-q8_0": "ok",
	}
	rows := 0
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if st, ok := want[f[0]]; ok {
			rows++
			if f[1] != st {
				t.Errorf("%s: %s, want %s", f[0], f[1], st)
			}
			if f[0] == "bench:8GiB" && (len(f) < 8 || f[5] != "50.00" || f[6] != "0.17") {
				t.Errorf("bench:8GiB's plan columns: %q", line)
			}
		}
	}
	if rows != len(want) {
		t.Fatalf("%d of %d steps in the table:\n%s", rows, len(want), table)
	}
	log, _ := os.ReadFile(filepath.Join(out, "gpu-check.log"))
	if !strings.Contains(string(log), "== bench:16GiB: TIMEOUT") {
		t.Fatalf("the log does not record the timeout:\n%s", log)
	}
}

// The A/B mode (GPU_CHECK_OLD): every job by both builds with f32 and
// bf16 compute, compared byte for byte (a differing old build is
// DIFFERS), and the alternated benches, before the table's own.
func TestGPUCheckDryRunAB(t *testing.T) {
	for _, tool := range []string{"bash", "timeout", "awk", "cmp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("scripts/gpu-check.sh", "--dry-run")
	cmd.Env = append(os.Environ(), "OUT="+out, "GPU_CHECK_OLD=old", "GPU_CHECK_DIFF=ab:run_wav-bf16", "GPU_CHECK_MAX_STEP=5")
	stdout, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v (want 1: a step differs)\n%s", err, stdout)
	}
	table, err := os.ReadFile(filepath.Join(out, "gpu-check.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ab:run_pt-f32": "ok", "ab:run_pt-bf16": "ok", "ab:run_wav-f32": "ok", "ab:run_wav-bf16": "DIFFERS",
		"ab:run_dep8-f32": "ok", "ab:run_dep8-bf16": "ok", "ab:bench-B1": "ok", "ab:bench-B8": "ok", "ab:bench-B1-bf16": "ok",
	}
	var order []string
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		order = append(order, f[0])
		if st, ok := want[f[0]]; ok {
			delete(want, f[0])
			if f[1] != st {
				t.Errorf("%s: %s, want %s", f[0], f[1], st)
			}
			if f[0] == "ab:bench-B1" && !strings.Contains(line, "old 8.50,8.50; new 8.50,8.50") {
				t.Errorf("ab:bench-B1's figures: %q", line)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("steps missing from the table: %v\n%s", want, table)
	}
	if i, j := slices.Index(order, "ab:bench-B1-bf16"), slices.Index(order, "bench:B1"); i < 0 || j < 0 || i > j {
		t.Errorf("the A/B benches do not come before the table's: %v", order)
	}
}

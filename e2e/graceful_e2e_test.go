package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A first SIGTERM with a grace period: no new item starts, the
// conversations in flight run to their end and are written, exactly as a
// clean run writes them; exit 143 and the report as before; a rerun
// resumes with the rest.
func TestBatchGracefulStop(t *testing.T) {
	const n = 6
	manifest, out, want := longJob(t, n, 20)
	rep := filepath.Join(filepath.Dir(manifest), "report.json")
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--report", rep, "--batch-size", "2", "--grace", "10m")
	cmd, e := startUntil(t, args, out, 2)
	// Items 2 and 3 join as soon as 0 and 1 are written: give them the
	// moment it takes (this orders the events; nothing is timed).
	time.Sleep(100 * time.Millisecond)
	before, _ := filepath.Glob(filepath.Join(out, "in*.json"))
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	log := e.String()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 || !strings.Contains(log, "rerun to resume") {
		t.Fatalf("exit %v:\n%s", err, log)
	}
	m := regexp.MustCompile(`finishing the (\d+) conversations in flight`).FindStringSubmatch(log)
	if !strings.Contains(log, "terminated: no new items start") || m == nil {
		t.Fatalf("no graceful stop in the log:\n%s", log)
	}
	k := atoi(m[1])
	r := readReport(t, rep)
	if r.Interrupted != "terminated" || k < 1 || r.Counts.OK < len(before)+k || r.Counts.NotRun < 1 || r.Counts.OK+r.Counts.NotRun != n {
		t.Fatalf("report %+v: %d written before the signal, %d in flight", r.Counts, len(before), k)
	}
	// What was written equals a clean run; nothing else is there.
	got := outputsOf(t, out)
	if len(got) != 2*r.Counts.OK {
		t.Fatalf("%d ok items but files %v", r.Counts.OK, got)
	}
	for _, it := range r.Items {
		if it.Status == "ok" {
			checkPair(t, it.OutputWAV, it.OutputText, want)
		}
	}
	firstOK := r.Counts.OK
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, n, want)
	if r := readReport(t, rep); r.Counts.Skipped != firstOK || r.Counts.OK != n-firstOK {
		t.Fatalf("rerun report %+v", r.Counts)
	}
}

// A second signal stops at once (130 / 143, one line), whatever is in
// flight; the rerun still finishes the job exactly.
func TestBatchSecondSignalStopsAtOnce(t *testing.T) {
	// Items of 60 s (a few seconds each here): the first signal must come
	// once the second pair is in flight (half a second after the first
	// pair's outputs: a signal while the first pair is being written
	// finds nothing in flight, and the job stops at once anyway), and the
	// second signal while that pair still runs.
	const n = 6
	manifest, out, want := longJob(t, n, 60)
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", "2", "--grace", "10m")
	cmd, e := startUntil(t, args, out, 2)
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond) // two signals, not one coalesced
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(e.String(), "interrupt again: stopped at once") || strings.Contains(e.String(), "goroutine ") {
		t.Fatalf("exit %v:\n%s", err, e.String())
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, n, want)
}

// With --grace 0 the first signal stops at once, as before: the items in
// flight are not written.
func TestBatchGraceZeroStopsAtOnce(t *testing.T) {
	manifest, out, _ := longJob(t, 4, 20)
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", "2", "--grace", "0")
	cmd, e := startUntil(t, args, out, 2)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 || strings.Contains(e.String(), "finishing the") {
		t.Fatalf("exit %v:\n%s", err, e.String())
	}
}

// checkPair: an item's two outputs are the expected bytes.
func checkPair(t *testing.T, wav, text string, want [2][]byte) {
	t.Helper()
	w, _ := os.ReadFile(wav)
	j, _ := os.ReadFile(text)
	if !bytes.Equal(w, want[0]) || !bytes.Equal(j, want[1]) {
		t.Fatalf("%s: output differs from the single run", wav)
	}
}

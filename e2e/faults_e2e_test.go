package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// mountTmpfs mounts a tmpfs of size bytes at a new folder (root only; the
// test skips itself otherwise) and unmounts it at the end.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// noTemporaries fails when a temporary file or lock is left under dir.
func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.Name() == fileio.TempDir || strings.HasSuffix(d.Name(), ".lock") || strings.Contains(d.Name(), ".tmp")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// ENOSPC on the output folder: the main job ends with one line naming the
// output and "no space left on device", exit 1; nothing is left there (no
// partial output, no temporary file, no lock), and a run with room
// afterwards succeeds.
func TestOutputDiskFull(t *testing.T) {
	dir := mountTmpfs(t, "64k") // the WAV (~146 kB) cannot fit
	args := setFlag(setFlag(tinyArgs(dir, "--greedy"), "--output-wav", filepath.Join(dir, "out.wav")), "--output-text", filepath.Join(dir, "out.json"))
	_, stderr, code := run(t, args...)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "pp-offline: ") || !strings.Contains(last, "no space left on device") || !strings.Contains(last, "out.wav") {
		t.Fatalf("exit %d, last line %q", code, last)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left in the full folder: %v", ents)
	}
}

// ENOSPC under a batch: the items that do not fit fail alone, named, with
// the error; the ones that fit are whole; nothing partial or temporary is
// left; a rerun with room finishes the job.
func TestBatchDiskFull(t *testing.T) {
	dir := mountTmpfs(t, "400k")
	manifest, _, want := longJob(t, 4, 3) // 4 items of ~144 kB + JSON
	out := filepath.Join(dir, "out")
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", "1")
	_, stderr, code := run(t, args...)
	if code != 1 || !strings.Contains(stderr, "no space left on device") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	noTemporaries(t, dir)
	for _, p := range outputsOf(t, out) {
		b, _ := os.ReadFile(filepath.Join(out, p))
		if w := want[0]; strings.HasSuffix(p, ".json") {
			w = want[1]
			if string(b) != string(w) {
				t.Fatalf("%s differs from a clean run", p)
			}
		} else if string(b) != string(w) {
			t.Fatalf("%s is partial", p)
		}
	}
	// Room again: the rerun resumes and completes.
	if err := exec.Command("mount", "-o", "remount,size=4m", dir).Run(); err != nil {
		t.Skipf("cannot grow the tmpfs: %v", err)
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, 4, want)
	noTemporaries(t, dir)
}

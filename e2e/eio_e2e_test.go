package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EIO is injected with strace's syscall tampering (ptrace: no device-mapper,
// FUSE or root needed, and it works on Go's raw syscalls, which an
// LD_PRELOAD shim would not see). The tests skip themselves without strace
// or where ptrace is not allowed.

// straceRun runs the binary under strace with the given tampering
// arguments (e.g. "-e", "inject=fsync:error=EIO").
func straceRun(t *testing.T, tamper []string, args ...string) (stderr string, code int) {
	t.Helper()
	st, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	if out, err := exec.Command(st, "-qq", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v %s", err, out)
	}
	full := append([]string{"-f", "-qq", "-o", "/dev/null"}, tamper...)
	full = append(full, "--", binPath)
	_, stderr, code = runCmd(t, exec.Command(st, append(full, args...)...))
	return stderr, code
}

// lastLine is the last line of stderr; it fails on a Go trace.
func lastLine(t *testing.T, stderr string) string {
	t.Helper()
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic:") {
		t.Fatalf("a Go trace:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return lines[len(lines)-1]
}

// EIO while making an output durable (fsync of the temporary file: a disk
// or network file system that lost the data) or while renaming it into
// place: the main job ends with one line naming the output and the error,
// exit 1, and nothing is left in the output folder: no output, no
// temporary file, no lock.
func TestOutputEIO(t *testing.T) {
	for _, c := range []struct{ name, inject string }{
		{"fsync", "inject=fsync,fdatasync:error=EIO"},
		{"rename", "inject=rename,renameat,renameat2:error=EIO"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			stderr, code := straceRun(t, []string{"-e", c.inject}, tinyArgs(dir, "--greedy")...)
			last := lastLine(t, stderr)
			if code != 1 || !strings.HasPrefix(last, "pp-offline: ") || !strings.Contains(last, "input/output error") || !strings.Contains(last, "out.wav") {
				t.Fatalf("exit %d, last line %q", code, last)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("left in the output folder: %v", ents)
			}
		})
	}
}

// EIO reading an input (a bad sector under the user's recording, the voice
// prompt, the tokenizer, the config or the manifest): one line naming that
// file and the error, a non-zero exit, no output.
func TestInputEIO(t *testing.T) {
	wd, _ := os.Getwd()
	abs := func(p string) string { return filepath.Join(wd, p) }
	dir := t.TempDir()
	manifest := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(manifest, []byte(`{"input_wav": "`+abs(tiny+"input.wav")+`", "greedy": true}`+"\n"), 0o644)
	for _, c := range []struct {
		name, path string
		args       []string
	}{
		{"input_wav", abs(tiny + "input.wav"), tinyArgs(dir, "--greedy")},
		{"voice", abs(tiny + "voices/TINYF0.pt"), tinyArgs(dir, "--greedy")},
		{"tokenizer", abs(tiny + "tokenizer.model"), tinyArgs(dir, "--greedy")},
		{"config", abs(tiny + "config.json"), tinyArgs(dir, "--greedy")},
		{"manifest", manifest, batchArgs("--manifest", manifest, "--output-dir", filepath.Join(dir, "out"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := make([]string, len(c.args))
			for i, a := range c.args {
				if strings.HasPrefix(a, tiny) {
					a = abs(a)
				}
				args[i] = a
			}
			if c.name != "manifest" {
				// The voice is named by the folder: give it absolute too.
				args = setFlag(args, "--voice-prompt-dir", abs(tiny+"voices"))
			}
			stderr, code := straceRun(t, []string{"-P", c.path, "-e", "inject=read,pread64,readv,preadv:error=EIO"}, args...)
			last := lastLine(t, stderr)
			base := filepath.Base(c.path)
			if code == 0 || !strings.HasPrefix(last, "pp-offline: ") || !strings.Contains(last, "input/output error") || !strings.Contains(last, base) {
				t.Fatalf("exit %d, last line %q", code, last)
			}
			for _, o := range []string{"out.wav", "out.json", "out"} {
				if _, err := os.Stat(filepath.Join(dir, o)); err == nil && o != "out" {
					t.Fatalf("%s written", o)
				}
			}
			noTemporaries(t, dir)
		})
	}
}

// EIO at one item's rename in a batch (strace counts calls per thread, so
// the fault is aimed at the item by its output's name, not by a count):
// that item alone fails, named, with the error; the others are whole and
// equal their single runs; nothing partial or temporary is left; a rerun
// without the fault finishes the job with every output equal to a clean
// run.
func TestBatchEIO(t *testing.T) {
	const n = 3
	manifest, out, want := longJob(t, n, 1)
	args := batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", "1")
	stderr, code := straceRun(t, []string{"-P", filepath.Join(out, "in1.wav"), "-e", "inject=rename,renameat,renameat2:error=EIO"}, args...)
	if code != 1 || !strings.Contains(stderr, "input/output error") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(grepLine(stderr, "input/output error"), "in1") {
		t.Fatalf("the failed item is not named:\n%s", stderr)
	}
	noTemporaries(t, out)
	got := outputsOf(t, out)
	if len(got) != 2*(n-1) || strings.Contains(strings.Join(got, " "), "in1.") {
		t.Fatalf("want the outputs of in0 and in2 only, have %v", got)
	}
	for _, p := range got {
		b, _ := os.ReadFile(filepath.Join(out, p))
		w := want[0]
		if strings.HasSuffix(p, ".json") {
			w = want[1]
		}
		if !bytes.Equal(b, w) {
			t.Fatalf("%s differs from a clean run", p)
		}
	}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, stderr)
	}
	checkAllOutputs(t, out, n, want)
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// besideModel is a folder holding the tiny LM weights (a link) and a copy
// of its config.json: the config read without --config. It returns the
// folder and the main command's arguments without --config.
func besideModel(t *testing.T) (dir string, args []string) {
	t.Helper()
	wd, _ := os.Getwd()
	dir = t.TempDir()
	if err := os.Symlink(filepath.Join(wd, tiny, "model.safetensors"), filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(tiny + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, withoutConfig(setFlag(tinyArgs(t.TempDir(), "--greedy", "--quiet"), "--moshi-weight", filepath.Join(dir, "model.safetensors")))
}

// withoutConfig drops --config and its value from args.
func withoutConfig(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--config" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// runBounded runs the binary with a deadline: a run that blocks (on a
// FIFO) fails the test instead of stalling the suite.
func runBounded(t *testing.T, limit time.Duration, args ...string) (stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var e bytes.Buffer
	cmd.Stderr = &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("still running after %v (blocked?): %v\n%s", limit, args, e.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return e.String(), 0
}

// oneLine checks that stderr is one line "pp-offline: ..." that says want
// and names path.
func oneLine(t *testing.T, stderr, want, path string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "pp-offline: ") || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], path) {
		t.Fatalf("want one line saying %q and naming %s, got:\n%s", want, path, stderr)
	}
}

// Without --config the config.json beside the weights is read: it is an
// input of the run like --config's file, so no output replaces it (the
// main command's --output-text, a batch manifest's output_text): exit 2,
// one line, the config untouched.
func TestBesideConfigIsAnInput(t *testing.T) {
	t.Run("main", func(t *testing.T) {
		dir, args := besideModel(t)
		cfg := filepath.Join(dir, "config.json")
		before, _ := os.ReadFile(cfg)
		stderr, code := runBounded(t, 2*time.Minute, setFlag(args, "--output-text", cfg)...)
		if code != exitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stderr)
		}
		oneLine(t, stderr, "is an input", cfg)
		if after, _ := os.ReadFile(cfg); !bytes.Equal(before, after) {
			t.Fatal("the config beside the weights was written over")
		}
	})
	t.Run("batch", func(t *testing.T) {
		dir, _ := besideModel(t)
		cfg := filepath.Join(dir, "config.json")
		before, _ := os.ReadFile(cfg)
		jobs := t.TempDir()
		writeClip(t, filepath.Join(jobs, "a.wav"), 1920*3)
		manifest := filepath.Join(jobs, "jobs.jsonl")
		os.WriteFile(manifest, []byte(fmt.Sprintf(`{"input_wav": "a.wav", "output_text": %q}`+"\n", cfg)), 0o644)
		args := setFlag(withoutConfig(batchArgs("--manifest", manifest, "--output-dir", t.TempDir(), "--greedy", "--quiet")), "--moshi-weight", filepath.Join(dir, "model.safetensors"))
		stderr, code := runBounded(t, 2*time.Minute, args...)
		if code != exitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stderr)
		}
		oneLine(t, stderr, "never written over inputs", cfg)
		if after, _ := os.ReadFile(cfg); !bytes.Equal(before, after) {
			t.Fatal("the config beside the weights was written over")
		}
	})
}

// A config.json beside the weights is read as --config's file is: a named
// pipe there is refused at once in one line (it blocked forever), a file
// over the bound is refused unread.
func TestBesideConfigNotAFile(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		dir, args := besideModel(t)
		cfg := filepath.Join(dir, "config.json")
		os.Remove(cfg)
		if err := mkfifo(cfg); err != nil {
			t.Skip(err)
		}
		stderr, code := runBounded(t, 30*time.Second, args...)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, stderr)
		}
		oneLine(t, stderr, "is a pipe", cfg)
	})
	t.Run("too large", func(t *testing.T) {
		dir, args := besideModel(t)
		cfg := filepath.Join(dir, "config.json")
		f, err := os.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(300 << 20) // sparse: nothing is written
		f.Close()
		stderr, code := runBounded(t, 30*time.Second, args...)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, stderr)
		}
		oneLine(t, stderr, "more than the", cfg)
	})
}

// The --hf-repo snapshot's config.json (the weights' folder) is an input
// too: an output naming it (through the snapshot's link) is refused.
func TestBesideConfigHubIsAnInput(t *testing.T) {
	s := tinyHub(t)
	home := t.TempDir()
	env := hubEnv(s, home)
	if _, stderr, code := runWithEnv(t, env, append(hubArgs(t.TempDir()), "--quiet")...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	cfgs, _ := filepath.Glob(filepath.Join(home, "hub", "models--*", "snapshots", "*", "config.json"))
	if len(cfgs) != 1 {
		t.Fatalf("the snapshot's config.json: %v", cfgs)
	}
	cfg := cfgs[0]
	before, _ := os.ReadFile(cfg)
	t.Run("main", func(t *testing.T) {
		_, stderr, code := runWithEnv(t, env, append(setFlag(hubArgs(t.TempDir()), "--output-text", cfg), "--quiet")...)
		if code != exitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stderr)
		}
		oneLine(t, stderr, "is an input", cfg)
	})
	t.Run("batch", func(t *testing.T) {
		jobs := t.TempDir()
		writeClip(t, filepath.Join(jobs, "a.wav"), 1920*3)
		manifest := filepath.Join(jobs, "jobs.jsonl")
		os.WriteFile(manifest, []byte(fmt.Sprintf(`{"input_wav": "a.wav", "output_text": %q}`+"\n", cfg)), 0o644)
		_, stderr, code := runWithEnv(t, env, "batch", "--manifest", manifest, "--output-dir", t.TempDir(), "--voice-prompt", "TINYF0.pt", "--device", "cpu", "--greedy", "--quiet")
		if code != exitUsage {
			t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stderr)
		}
		oneLine(t, stderr, "is an input", cfg)
	})
	if after, _ := os.ReadFile(cfg); !bytes.Equal(before, after) {
		t.Fatal("the snapshot's config.json was written over")
	}
}

// A --text-prompt-file that is a named pipe is refused in one line that
// names it and speaks of the text prompt, not of audio.
func TestTextPromptFilePipeMessage(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "prompt.txt")
	if err := mkfifo(fifo); err != nil {
		t.Skip(err)
	}
	for _, args := range [][]string{
		tinyArgs(t.TempDir(), "--quiet", "--text-prompt-file", fifo),
		batchArgs("--input-dir", t.TempDir(), "--output-dir", t.TempDir(), "--quiet", "--text-prompt-file", fifo),
	} {
		stderr, code := runBounded(t, 30*time.Second, args...)
		if code == 0 || strings.Contains(stderr, "audio") {
			t.Fatalf("%s: exit %d, want an error without \"audio\":\n%s", args[0], code, stderr)
		}
		oneLine(t, stderr, "is a pipe, not a file: write the text prompt to a file first", fifo)
	}
}

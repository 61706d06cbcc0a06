package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/job"
)

// The pure-Go binary (CGO_ENABLED=0, the default build) on a machine
// without a usable GPU: with no driver library at all (PP_OFFLINE_LIBCUDA
// names a missing one) and with the machine's own driver state (here,
// the NVIDIA userspace driver with no device, or none), --device auto
// and --cpu-offload run on the CPU after one line saying why, and
// --device cuda is a one-line error that writes nothing.
func TestNoGPUFallback(t *testing.T) {
	if job.CUDAAvailable() {
		t.Skip("a GPU is present (scripts/gpu-check.sh covers it)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pp-offline-nocgo")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(tiny + "expected/run_pt/output.json")
	for _, env := range []string{"PP_OFFLINE_LIBCUDA=/nonexistent/libcuda.so.1", ""} {
		for _, c := range []struct {
			name  string
			flags []string
			line  string // the one line about the device
			fails bool
		}{
			{"auto", []string{"--device", "auto"}, "device: no usable GPU (", false},
			{"cpu-offload", []string{"--device", "cuda", "--cpu-offload"}, "--cpu-offload: no usable GPU (", false},
			{"auto cpu-offload", []string{"--device", "auto", "--cpu-offload"}, "--cpu-offload: no usable GPU (", false},
			{"cuda", []string{"--device", "cuda"}, "pp-offline: --device cuda: no usable GPU: ", true},
		} {
			t.Run(c.name+" "+env, func(t *testing.T) {
				out := t.TempDir()
				args := append(setFlag(tinyArgs(out, "--greedy"), "--device", c.flags[1]), c.flags[2:]...)
				cmd := exec.Command(bin, args...)
				if env != "" {
					cmd.Env = append(os.Environ(), env)
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				if (err != nil) != c.fails {
					t.Fatalf("exit: %v\n%s", err, stderr.String())
				}
				lines := 0
				for _, l := range strings.Split(stderr.String(), "\n") {
					if strings.Contains(l, "no usable GPU") {
						lines++
						if !strings.Contains(l, c.line) {
							t.Errorf("line %q, want %q", l, c.line)
						}
						if env != "" && !strings.Contains(l, "no NVIDIA driver") {
							t.Errorf("line %q does not say the driver is missing", l)
						}
					}
				}
				if lines != 1 {
					t.Fatalf("%d lines about the GPU:\n%s", lines, stderr.String())
				}
				if strings.Contains(stderr.String(), "panic") {
					t.Fatalf("panicked:\n%s", stderr.String())
				}
				got, _ := os.ReadFile(filepath.Join(out, "out.json"))
				if c.fails {
					if entries, _ := os.ReadDir(out); len(entries) != 0 {
						t.Fatalf("--device cuda without a GPU left %d files", len(entries))
					}
					if l := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(l) != 1 {
						t.Fatalf("%d lines of errors:\n%s", len(l), stderr.String())
					}
				} else if !bytes.Equal(got, want) {
					t.Fatal("the CPU fallback's transcript differs from the reference's")
				}
			})
		}
	}
}

// -tags nocuda builds a fully static binary without the CUDA binding (for
// systems without glibc's dynamic loader): --device cuda says so in one
// line, --device auto runs on the CPU.
func TestNoCUDABuild(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pp-offline-static")
	build := exec.Command("go", "build", "-tags", "nocuda", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nocuda: %v\n%s", err, out)
	}
	out := t.TempDir()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, setFlag(tinyArgs(out, "--greedy"), "--device", "cuda")...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "built with -tags nocuda") {
		t.Fatalf("--device cuda in a nocuda build: %v\n%s", err, stderr.String())
	}
	cmd = exec.Command(bin, setFlag(tinyArgs(out, "--greedy"), "--device", "auto")...)
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stderr.String(), "device: no usable GPU") {
		t.Fatalf("--device auto in a nocuda build: %v\n%s", err, stderr.String())
	}
}

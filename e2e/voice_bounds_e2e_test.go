package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `voice` writes only what a run loads: a sample longer than a run's voice
// prompt may be (the model's context or 4096 steps) is refused in one line
// before its steps run, not written as a .pt every run then refuses; and
// an output that is not a .pt is a usage error (exit 2).
func TestVoiceCommandBounds(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.wav")
	writeClip(t, long, 1920*4101) // 4101 frames: 5.5 minutes at 24 kHz
	model := []string{"--config", tiny + "config.json", "--moshi-weight", tiny + "model.safetensors",
		"--mimi-weight", tiny + "mimi.safetensors", "--tokenizer", tiny + "tokenizer.model", "--device", "cpu", "-q"}
	out := filepath.Join(dir, "long.pt")
	_, stderr, code := run(t, append([]string{"voice", "--input-wav", long, "--output", out}, model...)...)
	if code != 1 || !strings.Contains(stderr, "long.wav: the voice prompt is 4101 steps") || !strings.Contains(stderr, "more than the 4096 a run takes") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("not one line:\n%s", stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the refused voice file was written")
	}
	_, stderr, code = run(t, append([]string{"voice", "--input-wav", tiny + "voices/TINYF0.wav", "--output", filepath.Join(dir, "v.bin")}, model...)...)
	if code != 2 || !strings.Contains(stderr, "v.bin: the output must be a .pt file") {
		t.Fatalf("a .bin output: exit %d: %s", code, stderr)
	}
}

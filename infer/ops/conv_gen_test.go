package ops

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// conv_amd64.s is generated: regenerating it must give the committed file.
func TestConvAssemblyIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	out := filepath.Join(t.TempDir(), "conv_amd64.s")
	if b, err := exec.Command("go", "run", "conv_gen.go", out).CombinedOutput(); err != nil {
		t.Fatalf("go run conv_gen.go: %v\n%s", err, b)
	}
	want, _ := os.ReadFile("conv_amd64.s")
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want) {
		t.Fatal("conv_amd64.s differs from what conv_gen.go writes: run go generate ./infer/ops/")
	}
}

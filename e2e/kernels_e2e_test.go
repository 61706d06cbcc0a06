package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pp-offline/pp-offline/infer/ops"
)

// Every matrix-kernel variant this CPU can run gives the reference
// transcript and bit-identical output files (greedy and sampled).
func TestKernelVariantsGiveIdenticalOutputs(t *testing.T) {
	want, _ := os.ReadFile(tiny + "expected/run_pt/output.json")
	for _, mode := range [][]string{{"--greedy"}, {"--seed", "11"}} {
		var first [2][]byte
		for i, k := range ops.KernelNames() {
			dir := t.TempDir()
			cmd := exec.Command(binPath, tinyArgs(dir, append(mode, "--quiet")...)...)
			cmd.Env = append(os.Environ(), "PP_OFFLINE_KERNEL="+k)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", k, err, out)
			}
			w, _ := os.ReadFile(filepath.Join(dir, "out.wav"))
			j, _ := os.ReadFile(filepath.Join(dir, "out.json"))
			if mode[0] == "--greedy" && !bytes.Equal(j, want) {
				t.Fatalf("kernel %s: transcript differs from the reference", k)
			}
			if i == 0 {
				first = [2][]byte{w, j}
			} else if !bytes.Equal(first[0], w) || !bytes.Equal(first[1], j) {
				t.Fatalf("kernel %s %v: outputs differ from kernel %s", k, mode, ops.KernelNames()[0])
			}
		}
	}
}

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The committed PTX is what scripts/build-ptx.sh compiles from the sources
// (which also checks that it assembles with ptxas for sm_80 and sm_90).
// Skipped where nvcc is absent.
func TestPTXUpToDate(t *testing.T) {
	for _, tool := range []string{"nvcc", "ptxas"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (apt-get install nvidia-cuda-toolkit to check the committed PTX)", tool)
		}
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "scripts/build-ptx.sh"), "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/build-ptx.sh --check: %v\n%s", err, out)
	}
}

// Every family has PTX for both targets, with every kernel the backend
// loads, for the targets it says.
func TestEmbeddedPTX(t *testing.T) {
	src, err := filepath.Glob("kernels/*.cu")
	if err != nil || len(src) != len(families) {
		t.Fatalf("%d kernel sources for %d families", len(src), len(families))
	}
	for _, fam := range families {
		if _, err := os.Stat("kernels/" + fam + ".cu"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			major  int
			target string
		}{{8, ".target sm_80"}, {9, ".target sm_90"}, {10, ".target sm_90"}} {
			p, err := ptxFor(fam, c.major)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(p), c.target) {
				t.Errorf("%s for compute capability %d: no %q", fam, c.major, c.target)
			}
		}
	}
	if _, err := ptxFor("matmul", 7); err == nil {
		t.Error("a Volta device was given PTX")
	}
	p, _ := ptxFor("matmul", 9)
	for _, k := range []string{".entry matmul_fma", ".entry matmul_mma_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"} {
		if !strings.Contains(string(p), k) {
			t.Errorf("matmul PTX lacks %q", k)
		}
	}
}

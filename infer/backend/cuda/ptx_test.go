package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	for _, k := range []string{".entry matmul_fma", ".entry matmul_fma_vec", ".entry matmul_fma_rows", ".entry matmul_mma_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"} {
		if !strings.Contains(string(p), k) {
			t.Errorf("matmul PTX lacks %q", k)
		}
	}
}

// Every kernel the backend launches has a signature, and the signature is
// the PTX's parameter list (a pointer or int64 is .u64, an int .u32, a
// float .f32): a launch with the wrong arguments panics with both lists
// rather than running on garbage.
func TestSignaturesMatchPTX(t *testing.T) {
	entry := regexp.MustCompile(`\.entry (\w+)\(([^)]*)\)`)
	param := regexp.MustCompile(`\.param \.(\w+) `)
	seen := map[string]bool{}
	for _, fam := range families {
		p, err := ptxFor(fam, 9)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range entry.FindAllStringSubmatch(string(p), -1) {
			name := m[1]
			seen[name] = true
			want, ok := signatures[name]
			if !ok {
				t.Errorf("kernel %s (%s.cu) has no signature", name, fam)
				continue
			}
			var kinds []string
			for _, q := range param.FindAllStringSubmatch(m[2], -1) {
				kinds = append(kinds, q[1])
			}
			if len(kinds) != len(want) {
				t.Errorf("%s: %d parameters in the PTX, signature %q", name, len(kinds), want)
				continue
			}
			for i, k := range kinds {
				ptx := map[byte]string{'p': "u64", 'l': "u64", 'i': "u32", 'f': "f32"}[want[i]]
				if k != ptx {
					t.Errorf("%s parameter %d: .%s in the PTX, %c (.%s) in the signature", name, i, k, want[i], ptx)
				}
			}
		}
	}
	for name := range signatures {
		if !seen[name] {
			t.Errorf("signature of %s, which no PTX defines", name)
		}
	}
}

// The launch's grid for matmul_fma_rows counts fmaRows output rows a
// warp: the kernel's FMA_ROWS must be the same (fewer and rows go
// uncomputed, more and warps compute past their share).
func TestFMARowsMatchesKernel(t *testing.T) {
	src, err := os.ReadFile("kernels/matmul.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define FMA_ROWS (\d+)$`).FindSubmatch(src)
	if m == nil || string(m[1]) != strconv.Itoa(fmaRows) {
		t.Fatalf("matmul.cu's FMA_ROWS is %q, the backend launches %d rows a warp", m, fmaRows)
	}
}

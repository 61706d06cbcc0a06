package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// widenHost is a host program over the kernels' own block helpers
// (common.cuh's q8_0_8 and q4_k_8, which are __host__ __device__): it reads
// dt, K, rows and the rows' blocks on stdin and writes every element's
// float32, 8 at a time as matmul_fma's load8 widens them.
const widenHost = `#include <cstdio>
#include <vector>
#include "common.cuh"
int main() {
  int dt, K, rows;
  if (fread(&dt, 4, 1, stdin) != 1 || fread(&K, 4, 1, stdin) != 1 || fread(&rows, 4, 1, stdin) != 1) return 2;
  long long rb = row_bytes(dt, K);
  std::vector<unsigned char> w(rb * rows);
  if (fread(w.data(), 1, w.size(), stdin) != w.size()) return 3;
  for (int n = 0; n < rows; n++) {
    for (int k = 0; k < K; k += 8) {
      float o[8];
      if (dt == DT_Q8_0) q8_0_8(w.data() + n * rb, k, K, o);
      else q4_k_8(w.data() + n * rb, k, K, o);
      fwrite(o, 4, k + 8 <= K ? 8 : K - k, stdout);
    }
  }
  return 0;
}
`

// The block formats' widening in the CUDA kernels gives, element for
// element, the bits of the CPU's dequantization (weights.DequantizeRow):
// checked on the host, where nvcc exists, since the GPU kernels are not run
// here. Random blocks with zero and subnormal scales, odd row lengths.
func TestBlockWideningOnHost(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("nvcc not found (apt-get install nvidia-cuda-toolkit)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "widen.cu")
	if err := os.WriteFile(src, []byte(widenHost), 0o644); err != nil {
		t.Fatal(err)
	}
	kernels, err := filepath.Abs("kernels")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "widen")
	if out, err := exec.Command("nvcc", "-I", kernels, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("nvcc: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	half := func() uint16 {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return uint16(rng.IntN(1024)) | uint16(rng.IntN(2))<<15
		}
		return weights.FloatToHalf(float32(rng.NormFloat64() * 0.01))
	}
	for _, dt := range []weights.DType{weights.Q8_0, weights.Q4_K} {
		for _, K := range []int{8, 40, 256, 300, 1000, 4096} {
			rows := 5
			rb := int(dt.RowBytes(K))
			w := make([]byte, rows*rb)
			for i := range w {
				w[i] = byte(rng.Uint32())
			}
			for o := 0; o < len(w); o += dt.BlockBytes() {
				binary.LittleEndian.PutUint16(w[o:], half())
				if dt == weights.Q4_K {
					binary.LittleEndian.PutUint16(w[o+2:], half())
				}
			}
			code := map[weights.DType]int32{weights.Q8_0: 3, weights.Q4_K: 4}[dt]
			if int(code) != dtypeCode(dt) {
				t.Fatalf("%s: the Go side's code is %d, the kernels' %d", dt, dtypeCode(dt), code)
			}
			var in bytes.Buffer
			for _, v := range []int32{code, int32(K), int32(rows)} {
				binary.Write(&in, binary.LittleEndian, v)
			}
			in.Write(w)
			cmd := exec.Command(bin)
			cmd.Stdin = &in
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s K=%d: %v", dt, K, err)
			}
			if len(out) != 4*rows*K {
				t.Fatalf("%s K=%d: %d bytes out, want %d", dt, K, len(out), 4*rows*K)
			}
			want := make([]float32, K)
			for n := range rows {
				weights.DequantizeRow(dt, want, w[n*rb:(n+1)*rb])
				for k := range K {
					got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(n*K+k):]))
					if math.Float32bits(got) != math.Float32bits(want[k]) {
						t.Fatalf("%s K=%d row %d element %d: kernel %g (%08x), CPU %g (%08x)", dt, K, n, k, got, math.Float32bits(got), want[k], math.Float32bits(want[k]))
					}
				}
			}
		}
	}
}

package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// memDriver is the dry driver with device memory that holds bytes: copies
// and downloads move real values (kernels still run nothing), so the
// backend's host paths (uploads, downloads, the CPU-placed products) can
// be checked by value without a GPU.
type memDriver struct {
	*dryDriver
	bufs map[cu.DevPtr][]byte
}

func (m *memDriver) alloc(n int64) (cu.DevPtr, error) {
	p, err := m.dryDriver.alloc(n)
	if err == nil {
		m.bufs[p] = make([]byte, n)
	}
	return p, err
}

// at is the device bytes from p on (within p's allocation).
func (m *memDriver) at(p cu.DevPtr) []byte {
	for base, b := range m.bufs {
		if p >= base && p < base+cu.DevPtr(len(b)) {
			return b[p-base:]
		}
	}
	panic("memDriver: address outside every allocation")
}

func (m *memDriver) copyAsync(dst cu.DevPtr, src []byte) error {
	copy(m.at(dst)[:len(src)], src)
	return nil
}

func (m *memDriver) copyOn(_ stream, dst cu.DevPtr, src []byte) error {
	return m.copyAsync(dst, src)
}

func (m *memDriver) download(dst []byte, src cu.DevPtr) error {
	copy(dst, m.at(src)[:len(dst)])
	return nil
}

// A product whose weight is placed on the CPU (an offload plan's CPU
// unit) gives the CPU backend's bits, at every batch size and for square
// weights too, whose input and output have the same shape (the GPU run of
// issue 14's check found the 94-row prompt prefill's square products wrong
// when the two shared one host buffer).
func TestCPUPlacedMatMul(t *testing.T) {
	ref, err := cpu.New(cpu.Options{Threads: 2, ComputeDType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	m := &memDriver{dryDriver: &dryDriver{next: 1 << 30, stats: &DryStats{Launches: map[string]int{}}}, bufs: map[cu.DevPtr][]byte{}}
	c := newOn(Options{ComputeDType: "f32", CPU: ref}, m)
	if err := c.start(1 << 30); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][2]int{{64, 64}, {96, 64}, {64, 264}} {
		w := dryWeight(sh[0], sh[1], weights.F32)
		for i := range sh[0] * sh[1] {
			putF32(w.Host[4*i:], float32(r.NormFloat64()))
		}
		w.OnCPU = true
		for _, B := range []int{1, 3, 94} {
			in := make([]float32, B*sh[1])
			for i := range in {
				in[i] = float32(r.NormFloat64())
			}
			x, y := c.NewActs(B, sh[1]), c.NewActs(B, sh[0])
			c.Upload(x, in)
			c.MatMul(y, x, w)
			got := make([]float32, B*sh[0])
			c.Download(got, y)

			hx, hy := ref.NewActs(B, sh[1]), ref.NewActs(B, sh[0])
			ref.Upload(hx, in)
			ref.MatMul(hy, hx, w)
			want := make([]float32, B*sh[0])
			ref.Download(want, hy)
			if !slices.Equal(bitsF32(got), bitsF32(want)) {
				t.Fatalf("%v weight, B = %d: the CPU-placed product differs from the CPU backend's", sh, B)
			}
		}
	}
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func bitsF32(v []float32) []uint32 {
	u := make([]uint32, len(v))
	for i, x := range v {
		u[i] = math.Float32bits(x)
	}
	return u
}

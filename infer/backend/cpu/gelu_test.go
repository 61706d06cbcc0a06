package cpu

import (
	"math"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// The GELU of many rows runs on the engine's threads, in the engine's
// vector form: the same bits as the row-by-row scalar ops.GELU on every
// kernel variant (a column view too, whose rows are strided), and nothing
// allocated once warm (the codec calls it every frame).
func TestGELUParallelExactNoAllocs(t *testing.T) {
	for _, kern := range ops.KernelNames() {
		t.Run(kern, func(t *testing.T) { testGELUParallel(t, kern) })
	}
}

func testGELUParallel(t *testing.T, kern string) {
	c, err := New(Options{Threads: 2, Kernel: kern})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rows, cols = 6, 5000
	a := c.NewActs(rows, cols)
	d := data(a)
	for i := range d {
		d[i] = float32(math.Sin(float64(i)*0.37)) * 4
	}
	want := append([]float32(nil), d...)
	view := a.Columns(7, 7+4100) // strided rows, 3 pieces each
	for i := 0; i < rows; i++ {
		ops.GELU(want[i*cols+7 : i*cols+7+4100])
	}
	c.Activate(view, backend.GELU)
	for i := range d {
		if math.Float32bits(d[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: %v, want %v", i, d[i], want[i])
		}
	}
	if n := testalloc.PerRun(t, 10, func() { c.Activate(view, backend.GELU) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

// Gate over many rows (the LM's gated FFN: SiLU of one half times the
// other) runs on the engine's threads with the bits of the scalar element-
// by-element loop on every kernel variant, from and into strided views,
// allocating nothing.
func TestGateParallelExactNoAllocs(t *testing.T) {
	for _, kern := range ops.KernelNames() {
		t.Run(kern, func(t *testing.T) { testGateParallel(t, kern) })
	}
}

func testGateParallel(t *testing.T, kern string) {
	c, err := New(Options{Threads: 2, Kernel: kern})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rows, h = 5, 4500
	src, dst := c.NewActs(rows, 2*h+3), c.NewActs(rows, h+5)
	s := data(src)
	for i := range s {
		s[i] = float32(math.Sin(float64(i)*0.29)) * 6
	}
	in, out := src.Columns(1, 1+2*h), dst.Columns(2, 2+h)
	want := append([]float32(nil), data(dst)...)
	for i := 0; i < rows; i++ {
		a := s[i*(2*h+3)+1:]
		for j := 0; j < h; j++ {
			want[i*(h+5)+2+j] = ops.SiLU(a[j]) * a[h+j]
		}
	}
	c.Gate(out, in, backend.SiLU)
	for i, v := range data(dst) {
		if math.Float32bits(v) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: %v, want %v", i, v, want[i])
		}
	}
	if n := testalloc.PerRun(t, 10, func() { c.Gate(out, in, backend.SiLU) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

package cpu

import (
	"math"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// The GELU of many rows runs on the engine's threads: the same bits as the
// row-by-row ops.GELU (a column view too, whose rows are strided), and
// nothing allocated once warm (the codec calls it every frame).
func TestGELUParallelExactNoAllocs(t *testing.T) {
	c, err := New(Options{Threads: 2})
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
	if n := testing.AllocsPerRun(10, func() { c.Activate(view, backend.GELU) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// attnEngines is one single-threaded engine per kernel variant.
func attnEngines(t testing.TB) map[string]*Engine {
	es := map[string]*Engine{}
	for _, name := range KernelNames() {
		e, err := NewEngine(EngineOptions{Threads: 1, Kernel: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		es[name] = e
	}
	return es
}

// attnData fills v with normal values of mixed magnitudes and some zeros
// (whose products are −0 for negative factors: the lanes' +0 start shows).
func attnData(r *rand.Rand, v []float32) {
	for i := range v {
		switch r.IntN(16) {
		case 0:
			v[i] = 0
		case 1:
			v[i] = float32(r.NormFloat64() * 1e-3)
		case 2:
			v[i] = float32(r.NormFloat64() * 1e3)
		default:
			v[i] = float32(r.NormFloat64())
		}
	}
}

// attnRowsCase is one random problem: nrows row indices (unsorted, some
// repeated) into a matrix of stride-spaced rows of which dh elements are
// read, the last row ending exactly at the end of mat.
type attnRowsCase struct {
	q, mat, w, base []float32
	stride          int
	rows            []int32
}

func newAttnRowsCase(r *rand.Rand, dh, gap, nrows int) attnRowsCase {
	c := attnRowsCase{stride: dh + gap}
	matRows := 1 + r.IntN(40)
	c.mat = make([]float32, (matRows-1)*c.stride+dh)
	c.q = make([]float32, dh)
	c.base = make([]float32, dh)
	c.w = make([]float32, nrows)
	attnData(r, c.mat)
	attnData(r, c.q)
	attnData(r, c.base)
	attnData(r, c.w)
	c.rows = make([]int32, nrows)
	for i := range c.rows {
		c.rows[i] = int32(r.IntN(matRows))
	}
	if nrows > 0 {
		c.rows[r.IntN(nrows)] = int32(matRows - 1)
	}
	return c
}

func (c *attnRowsCase) row(i int) []float32 {
	o := int(c.rows[i]) * c.stride
	return c.mat[o : o+len(c.q)]
}

// DotRows gives the bits of one Dot per row and AxpyRows those of one Axpy
// per row, in order, on every kernel variant (and those are the portable
// variant's bits).
func TestAttnRowsBitIdentical(t *testing.T) {
	es := attnEngines(t)
	port := es["portable"]
	r := rand.New(rand.NewPCG(24, 128))
	for _, dh := range []int{1, 7, 16, 31, 32, 33, 64, 80, 100, 128, 129, 192, 200, 256, 320} {
		for _, gap := range []int{0, 1, 5, 32} {
			for nrows := 0; nrows <= 70; nrows++ {
				c := newAttnRowsCase(r, dh, gap, nrows)
				wantDot := make([]float32, nrows)
				wantAxpy := append([]float32(nil), c.base...)
				for i := range c.rows {
					wantDot[i] = port.Dot(c.q, c.row(i))
					port.Axpy(wantAxpy, c.w[i], c.row(i))
				}
				for name, e := range es {
					where := fmt.Sprintf("%s dh %d stride %d rows %d", name, dh, c.stride, nrows)
					got := make([]float32, nrows+1)
					for i := range got {
						got[i] = 42 // overwritten, except past the rows
					}
					e.DotRows(got[:nrows], c.q, c.mat, c.stride, c.rows)
					for i := range wantDot {
						same := e.Dot(c.q, c.row(i))
						if math.Float32bits(got[i]) != math.Float32bits(same) || math.Float32bits(same) != math.Float32bits(wantDot[i]) {
							t.Fatalf("%s: DotRows[%d] = %v, Dot %v, portable Dot %v", where, i, got[i], same, wantDot[i])
						}
					}
					if got[nrows] != 42 {
						t.Fatalf("%s: DotRows wrote past its rows", where)
					}
					gotA := append([]float32(nil), c.base...)
					seq := append([]float32(nil), c.base...)
					e.AxpyRows(gotA, c.w, c.mat, c.stride, c.rows)
					for i := range c.rows {
						e.Axpy(seq, c.w[i], c.row(i))
					}
					for j := range gotA {
						if math.Float32bits(gotA[j]) != math.Float32bits(seq[j]) || math.Float32bits(seq[j]) != math.Float32bits(wantAxpy[j]) {
							t.Fatalf("%s: AxpyRows element %d = %v, sequential Axpy %v, portable %v", where, j, gotA[j], seq[j], wantAxpy[j])
						}
					}
				}
			}
		}
	}
}

// The row kernels read only their rows: values outside the dh elements of
// each listed row (the stride's gap, rows not listed) do not matter.
func TestAttnRowsReadOnlyTheirRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for name, e := range attnEngines(t) {
		for _, dh := range []int{33, 128, 129} {
			c := newAttnRowsCase(r, dh, 7, 50)
			listed := map[int32]bool{}
			for _, x := range c.rows {
				listed[x] = true
			}
			dirty := append([]float32(nil), c.mat...)
			for i := range dirty {
				if row := int32(i / c.stride); !listed[row] || i%c.stride >= dh {
					dirty[i] = float32(math.NaN())
				}
			}
			a, b := make([]float32, 50), make([]float32, 50)
			e.DotRows(a, c.q, c.mat, c.stride, c.rows)
			e.DotRows(b, c.q, dirty, c.stride, c.rows)
			x, y := append([]float32(nil), c.base...), append([]float32(nil), c.base...)
			e.AxpyRows(x, c.w, c.mat, c.stride, c.rows)
			e.AxpyRows(y, c.w, dirty, c.stride, c.rows)
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s dh %d: DotRows[%d] read outside its row: %v vs %v", name, dh, i, a[i], b[i])
				}
			}
			for j := range x {
				if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
					t.Fatalf("%s dh %d: AxpyRows element %d read outside its rows: %v vs %v", name, dh, j, x[j], y[j])
				}
			}
		}
	}
}

func TestAttnRowsNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	c := newAttnRowsCase(r, 128, 0, 64)
	dst := make([]float32, 64)
	out := make([]float32, 128)
	for name, e := range attnEngines(t) {
		if n := testalloc.PerRun(t, 50, func() {
			e.DotRows(dst, c.q, c.mat, c.stride, c.rows)
			e.AxpyRows(out, dst, c.mat, c.stride, c.rows)
		}); n != 0 {
			t.Errorf("%s: %v allocations per DotRows+AxpyRows", name, n)
		}
	}
}

// Bad arguments are programming errors: a panic naming the operation.
func TestAttnRowsBounds(t *testing.T) {
	q := make([]float32, 8)
	mat := make([]float32, 4*10+8) // rows 0..4 of stride 10
	dst := make([]float32, 3)
	for _, tc := range []struct {
		name string
		f    func(e *Engine)
	}{
		{"row past the end", func(e *Engine) { e.DotRows(dst, q, mat, 10, []int32{0, 5, 1}) }},
		{"negative row", func(e *Engine) { e.DotRows(dst, q, mat, 10, []int32{-1}) }},
		{"short dst", func(e *Engine) { e.DotRows(dst, q, mat, 10, []int32{0, 1, 2, 3}) }},
		{"negative stride", func(e *Engine) { e.DotRows(dst, q, mat, -10, []int32{1}) }},
		{"huge stride", func(e *Engine) { e.DotRows(dst, q, mat, math.MaxInt/2, []int32{4}) }},
		{"q longer than mat", func(e *Engine) { e.DotRows(dst, make([]float32, 64), mat, 0, []int32{0}) }},
		{"axpy row past the end", func(e *Engine) { e.AxpyRows(q, dst, mat, 10, []int32{4, 5}) }},
		{"axpy short w", func(e *Engine) { e.AxpyRows(q, dst, mat, 10, []int32{0, 1, 2, 3}) }},
		{"axpy huge row", func(e *Engine) { e.AxpyRows(q, dst, mat, 10, []int32{math.MaxInt32}) }},
	} {
		for name, e := range attnEngines(t) {
			func() {
				defer func() {
					msg, _ := recover().(string)
					if !strings.HasPrefix(msg, "ops: ") {
						t.Errorf("%s %s: recovered %q, want an ops: panic", name, tc.name, msg)
					}
				}()
				tc.f(e)
			}()
		}
	}
	// In bounds: the last row exactly, stride 0 (every row is row 0).
	e := Default()
	e.DotRows(dst, q, mat, 10, []int32{4, 0, 4})
	e.DotRows(dst, q, mat, 0, []int32{7, 7, 7})
	e.AxpyRows(q, dst, mat, 10, nil)
}

// BenchmarkAttnRows is one head of attention's score and value passes at
// head dim 128 over 256 cached rows: one Dot and one Axpy per row (the
// loop the row kernels replace) against one DotRows and one AxpyRows.
func BenchmarkAttnRows(b *testing.B) {
	const dh, n = 128, 256
	r := rand.New(rand.NewPCG(1, 1))
	c := newAttnRowsCase(r, dh, 0, n)
	for i := range c.rows {
		c.rows[i] = int32(i)
	}
	c.mat = make([]float32, n*dh)
	attnData(r, c.mat)
	scores := make([]float32, n)
	out := make([]float32, dh)
	for _, name := range KernelNames() {
		e, err := NewEngine(EngineOptions{Threads: 1, Kernel: name})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/per-row", func(b *testing.B) {
			b.SetBytes(2 * n * dh * 4)
			for range b.N {
				for i := range c.rows {
					scores[i] = e.Dot(c.q, c.row(i))
				}
				for i := range c.rows {
					e.Axpy(out, scores[i], c.row(i))
				}
			}
		})
		b.Run(name+"/rows", func(b *testing.B) {
			b.SetBytes(2 * n * dh * 4)
			for range b.N {
				e.DotRows(scores, c.q, c.mat, dh, c.rows)
				e.AxpyRows(out, scores, c.mat, dh, c.rows)
			}
		})
		e.Close()
	}
}

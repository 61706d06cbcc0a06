// Package backendtest is the conformance check every backend passes: each
// op against the CPU backend (the reference: exactly, or within a
// tolerance for backends that do not promise the CPU's bits), and the
// batching contract on the backend itself, always exactly — a row's result
// does not depend on the other rows of the batch, on its slot, or on
// whether its KV ring grew on the way.
package backendtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Options say how close to the reference a backend must be.
type Options struct {
	// Exact requires the reference's bits (the CPU backend's kernel
	// variants); otherwise results must be within Tol (relative to the
	// largest magnitude of the output).
	Exact bool
	Tol   float64
}

type checker struct {
	be, ref backend.Backend
	o       Options
	rng     *rand.Rand
}

// Run checks be against ref.
func Run(t *testing.T, be, ref backend.Backend, o Options) {
	c := &checker{be: be, ref: ref, o: o, rng: rand.New(rand.NewPCG(1, 2))}
	t.Run("MatMul", c.matMul)
	t.Run("Elementwise", c.elementwise)
	t.Run("Embed", c.embed)
	t.Run("Attend", c.attend)
	t.Run("Rows", c.rows)
}

// rows: backend.UploadRows and DownloadRows (one copy on a backend that
// batches them) move exactly the bytes of one Upload / Download per block,
// on a view of rows and columns inside a wider buffer, empty blocks
// included.
func (c *checker) rows(t *testing.T) {
	const R, C = 7, 12
	sizes := []int{2, 0, 3, 1, 1}
	for _, be := range []backend.Backend{c.be, c.ref} {
		buf := be.NewActs(R+2, C+8)
		view := buf.Slice(1, 1+R).Columns(3, 3+C)
		want := c.vec(R*C, 1)
		var blocks [][]float32
		r := 0
		for _, n := range sizes {
			blocks = append(blocks, want[r*C:(r+n)*C])
			r += n
		}
		backend.UploadRows(be, view, blocks)
		if got := download(be, view); !bitsEqual(got, want) {
			t.Fatalf("%s: UploadRows then Download differs from the blocks", be.Name())
		}
		if got := download(be, buf.Slice(0, 1)); !bitsEqual(got, make([]float32, C+8)) {
			t.Fatalf("%s: UploadRows wrote outside its view", be.Name())
		}
		be.Upload(view, want)
		outs := make([][]float32, len(sizes))
		for i, n := range sizes {
			outs[i] = make([]float32, n*C)
		}
		backend.DownloadRows(be, outs, view)
		r = 0
		for i, n := range sizes {
			if !bitsEqual(outs[i], want[r*C:(r+n)*C]) {
				t.Fatalf("%s: DownloadRows block %d differs from the view's rows", be.Name(), i)
			}
			r += n
		}
	}
}

func (c *checker) vec(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((c.rng.Float64()*2 - 1) * scale)
	}
	return v
}

// weight makes a [rows, cols] weight of dtype dt with random values.
func (c *checker) weight(rows, cols int, dt weights.DType) *backend.Weight {
	n := rows * cols
	if dt.Quantized() {
		// Blocks quantized from random values (the padding of a short last
		// block included).
		b := make([]byte, int64(rows)*dt.RowBytes(cols))
		row := make([]float32, cols)
		rb := int(dt.RowBytes(cols))
		for r := 0; r < rows; r++ {
			for j := range row {
				row[j] = float32((c.rng.Float64()*2 - 1) * 0.1)
			}
			weights.QuantizeRow(dt, b[r*rb:(r+1)*rb], row)
		}
		return &backend.Weight{Name: fmt.Sprintf("w%dx%d_%s", rows, cols, dt), Rows: rows, Cols: cols, DType: dt, Host: b}
	}
	b := make([]byte, n*dt.Size())
	for i := 0; i < n; i++ {
		v := float32((c.rng.Float64()*2 - 1) * 0.1)
		switch dt {
		case weights.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case weights.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
		case weights.F16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(0x3000+c.rng.IntN(0x1000))|uint16(c.rng.IntN(2))<<15)
		}
	}
	return &backend.Weight{Name: fmt.Sprintf("w%dx%d_%s", rows, cols, dt), Rows: rows, Cols: cols, DType: dt, Host: b}
}

// acts uploads host rows to a new buffer of be.
func acts(be backend.Backend, rows, cols int, data []float32) backend.Acts {
	a := be.NewActs(rows, cols)
	be.Upload(a, data)
	return a
}

func download(be backend.Backend, a backend.Acts) []float32 {
	out := make([]float32, a.Rows*a.Cols)
	be.Download(out, a)
	return out
}

func (c *checker) same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var worst, scale float64
	for i := range got {
		if c.o.Exact && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %g, the reference's %g", what, i, got[i], want[i])
		}
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	if !c.o.Exact && worst > c.o.Tol*math.Max(scale, 1e-30) {
		t.Fatalf("%s: max abs difference %g at scale %g (tolerance %g)", what, worst, scale, c.o.Tol)
	}
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// matMul: every dtype (the block formats too) and odd sizes; each row of a batch equals its
// single-row product exactly, and the reference within Options.
func (c *checker) matMul(t *testing.T) {
	for _, dt := range []weights.DType{weights.BF16, weights.F16, weights.F32, weights.Q8_0, weights.Q4_K} {
		// K = 2344 and 1000: K % 8 == 0 but not a multiple of 256, over
		// several of the GPU's B = 1 passes (matmul_fma_vec) and within one.
		for _, sh := range [][2]int{{1, 8}, {37, 64}, {96, 97}, {300, 256}, {1024, 512}, {24, 2344}, {40, 1000}} {
			w := c.weight(sh[0], sh[1], dt)
			for _, B := range []int{1, 2, 3, 5, 8, 9, 16} {
				x := c.vec(B*w.Cols, 1)
				got := download(c.be, c.mm(c.be, w, B, x))
				c.same(t, fmt.Sprintf("%s B=%d", w.Name, B), got, download(c.ref, c.mm(c.ref, w, B, x)))
				for r := 0; r < B; r++ {
					one := download(c.be, c.mm(c.be, w, 1, x[r*w.Cols:(r+1)*w.Cols]))
					if !bitsEqual(one, got[r*w.Rows:(r+1)*w.Rows]) {
						t.Fatalf("%s: row %d of a batch of %d differs from its product alone", w.Name, r, B)
					}
				}
			}
		}
	}
}

func (c *checker) mm(be backend.Backend, w *backend.Weight, B int, x []float32) backend.Acts {
	in := acts(be, B, w.Cols, x)
	out := be.NewActs(B, w.Rows)
	be.MatMul(out, in, w)
	return out
}

// elementwise: norms, scaled adds, gating, activations, RoPE, on views
// (column ranges) as the models use them.
func (c *checker) elementwise(t *testing.T) {
	const B, D = 5, 96
	x := c.vec(B*D, 2)
	run := func(be backend.Backend, f func(be backend.Backend, a backend.Acts) backend.Acts) []float32 {
		return download(be, f(be, acts(be, B, D, x)))
	}
	scale := c.weight(1, D, weights.BF16)
	bias := c.weight(1, D, weights.F32)
	cases := map[string]func(be backend.Backend, a backend.Acts) backend.Acts{
		"rmsnorm": func(be backend.Backend, a backend.Acts) backend.Acts {
			o := be.NewActs(B, D)
			be.Norm(o, a, &backend.Norm{RMS: true, Eps: 1e-5, W: scale})
			return o
		},
		"layernorm": func(be backend.Backend, a backend.Acts) backend.Acts {
			o := be.NewActs(B, D)
			be.Norm(o, a, &backend.Norm{Eps: 1e-5, W: scale, B: bias})
			return o
		},
		"addscaled": func(be backend.Backend, a backend.Acts) backend.Acts {
			o := acts(be, B, D, x[:B*D])
			be.AddScaled(o, a, scale)
			be.AddScaled(o, a, nil)
			return o
		},
		"gate-silu-in-place": func(be backend.Backend, a backend.Acts) backend.Acts {
			g := a.Columns(0, D/2)
			be.Gate(g, a, backend.SiLU)
			return g
		},
		"gelu": func(be backend.Backend, a backend.Acts) backend.Acts {
			be.Activate(a.Columns(3, 50), backend.GELU)
			return a
		},
		"relu-gate": func(be backend.Backend, a backend.Acts) backend.Acts {
			o := be.NewActs(B, D/2)
			be.Gate(o, a, backend.ReLU)
			return o
		},
		"rope": func(be backend.Backend, a backend.Acts) backend.Acts {
			r := be.NewRope(16, 10000)
			be.RoPE(a.Columns(16, 64), r, []int{0, 7, 300, 2999, 12})
			return a
		},
		"copy-rows": func(be backend.Backend, a backend.Acts) backend.Acts {
			o := be.NewActs(B+2, D)
			be.Copy(o.Slice(2, B+2), a)
			return o
		},
	}
	for name, f := range cases {
		c.same(t, name, run(c.be, f), run(c.ref, f))
	}
}

// embed: sums in table order, ZeroToken skipped, accumulate adds.
func (c *checker) embed(t *testing.T) {
	tabs := []*backend.Weight{c.weight(11, 40, weights.BF16), c.weight(7, 40, weights.F32), c.weight(13, 40, weights.F16)}
	ids := []int{3, 0, 12, backend.ZeroToken, 6, 1, 10, 2, backend.ZeroToken}
	base := c.vec(120, 1)
	run := func(be backend.Backend, acc bool) []float32 {
		o := acts(be, 3, 40, base)
		be.Embed(o, tabs, ids, acc)
		return download(be, o)
	}
	c.same(t, "embed", run(c.be, false), run(c.ref, false))
	c.same(t, "embed accumulate", run(c.be, true), run(c.ref, true))
}

// attend: sequences of different histories in one call equal each alone;
// a group of rows equals its groups run one after another as chunks (so
// stepwise equals one row at a time); a ring grown on the way equals one
// allocated at full size; the reference's ring mask when it wraps.
func (c *checker) attend(t *testing.T) {
	const H, dh, ctx = 4, 16, 24
	D := H * dh
	hist := []int{0, 5, 23, 40, 27} // positions already in each sequence's ring (40 > ctx: wrapped)
	rows := []int{1, 3, 1, 2, 7}
	n := 0
	for _, r := range rows {
		n += r
	}
	prefill := make([][]float32, len(hist))
	for i, h := range hist {
		prefill[i] = c.vec(h*3*D, 1)
	}
	qkv := c.vec(n*3*D, 1)
	// rings builds each sequence's ring on be (growing from cap0 unless
	// full) with its history written one position at a time.
	rings := func(be backend.Backend, cap0 int) []*backend.Ring {
		var rs []*backend.Ring
		for i, h := range hist {
			r := be.NewRing(H, dh, cap0)
			out := be.NewActs(1, D)
			for p := 0; p < h; p++ {
				if r.Capacity < ctx && p+1 >= r.Capacity {
					be.GrowRing(r, min(ctx, 2*r.Capacity))
				}
				be.Attend(out, acts(be, 1, 3*D, prefill[i][p*3*D:(p+1)*3*D]), []backend.Seq{{Ring: r, Rows: 1}}, ctx, backend.Stepwise)
			}
			rs = append(rs, r)
		}
		return rs
	}
	batched := func(be backend.Backend, rs []*backend.Ring, group int) []float32 {
		var seqs []backend.Seq
		for i, r := range rs {
			if r.Capacity < ctx && r.End+rows[i] >= r.Capacity {
				be.GrowRing(r, ctx)
			}
			seqs = append(seqs, backend.Seq{Ring: r, Rows: rows[i]})
		}
		out := be.NewActs(n, D)
		be.Attend(out, acts(be, n, 3*D, qkv), seqs, ctx, group)
		return download(be, out)
	}
	for _, group := range []int{backend.Stepwise, backend.Chunk, 2, 3} {
		got := batched(c.be, rings(c.be, ctx), group)
		c.same(t, fmt.Sprintf("attend group %d", group), got, batched(c.ref, rings(c.ref, ctx), group))
		if g := batched(c.be, rings(c.be, 2), group); !bitsEqual(g, got) {
			t.Fatalf("group %d: rings grown from capacity 2 give other results than full-size rings", group)
		}
		// Each sequence alone, its groups one call each.
		r0 := 0
		rs := rings(c.be, ctx)
		for i, r := range rs {
			m := group
			if m <= 0 {
				m = rows[i]
			}
			for k := 0; k < rows[i]; k += m {
				g := min(m, rows[i]-k)
				out := c.be.NewActs(g, D)
				c.be.Attend(out, acts(c.be, g, 3*D, qkv[(r0+k)*3*D:(r0+k+g)*3*D]), []backend.Seq{{Ring: r, Rows: g}}, ctx, backend.Chunk)
				if !bitsEqual(download(c.be, out), got[(r0+k)*D:(r0+k+g)*D]) {
					t.Fatalf("group %d: sequence %d rows %d..%d differ from their chunk alone", group, i, k, k+g-1)
				}
			}
			r0 += rows[i]
		}
	}
}

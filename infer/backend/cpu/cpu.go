// Package cpu is the CPU backend: every op of backend.Backend on host
// memory, computed by the float32 kernels of infer/ops (AVX-512 / AVX2
// assembly or portable Go, all giving the same bits) on the backend's own
// ops.Engine — its kernel variant, compute dtype and worker pool are fields
// of the backend, not process globals.
package cpu

import (
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// Options configure a CPU backend: they are all of its settings (nothing
// process-wide sets them).
type Options struct {
	Threads      int    // threads of its worker pool, the caller included (0: GOMAXPROCS, which honours a cgroup CPU quota)
	Kernel       string // kernel variant (see ops.KernelNames; "": the best this CPU runs)
	ComputeDType string // "f32" (exact, the parity path; ""), or "bf16"
	// KVDType is what the KV rings store: "f32" ("", exact, the parity
	// path) or "bf16" (keys and values rounded to bf16: half the memory and
	// the attention's reads).
	KVDType string
}

// CPU is the CPU backend. It is used from one goroutine at a time.
type CPU struct {
	e      *ops.Engine
	kvBF16 bool // NewRing makes bf16 rings (Options.KVDType)

	xs, ys [][]float32 // row views for one product (reused)
	w1, w2 []float32   // widened vectors for one op (reused)
	row    []float32   // one embedding row
	att    attnJob
	pieces pieceJob
	ropeCS []float32 // one position's rotary cosines and sines
}

// New makes a CPU backend with its own engine.
func New(o Options) (*CPU, error) {
	kvBF16, err := ParseKVDType(o.KVDType)
	if err != nil {
		return nil, err
	}
	e, err := ops.NewEngine(ops.EngineOptions{Threads: o.Threads, Kernel: o.Kernel, ComputeDType: o.ComputeDType})
	if err != nil {
		return nil, err
	}
	c := newCPU(e)
	c.kvBF16 = kvBF16
	return c, nil
}

// ParseKVDType reports whether name, an Options.KVDType ("" or "f32",
// "float32"; "bf16", "bfloat16"), asks for bf16 rings.
func ParseKVDType(name string) (bf16 bool, err error) {
	switch name {
	case "", "f32", "float32":
		return false, nil
	case "bf16", "bfloat16":
		return true, nil
	}
	return false, fmt.Errorf("cpu: unknown KV dtype %q (want f32 or bf16)", name)
}

// newCPU is a backend on e, its parallel jobs' functions made once (so that
// running them allocates nothing).
func newCPU(e *ops.Engine) *CPU {
	c := &CPU{e: e}
	c.att.c = c
	c.att.unitFn = c.att.run
	c.pieces.fn = c.pieces.run
	return c
}

// WithF32Rings is a backend on c's engine (close c, not it) whose KV rings
// are float32 whatever c's are.
func (c *CPU) WithF32Rings() *CPU { return newCPU(c.e) }

// Default is a CPU backend on the package-default engine of infer/ops (all
// cores, the best kernel variant, f32), for tests and tools.
func Default() *CPU {
	return newCPU(ops.Default())
}

// Engine is the backend's compute engine (kernel variant, dtype, pool).
func (c *CPU) Engine() *ops.Engine { return c.e }

// Close stops the backend's worker pool (not the default engine's).
func (c *CPU) Close() {
	if c.e != ops.Default() {
		c.e.Close()
	}
}

// Name implements backend.Backend.
func (c *CPU) Name() string {
	return fmt.Sprintf("cpu (%s, %d threads, %s compute)", c.e.KernelName(), c.e.Threads(), c.e.ComputeDType())
}

// data is the storage of a CPU activation buffer.
func data(a backend.Acts) []float32 { return a.Buf.Data.([]float32) }

// rowOf is row i of view a.
func rowOf(d []float32, a backend.Acts, i int) []float32 {
	o := (a.R0+i)*a.Buf.Cols + a.C0
	return d[o : o+a.Cols : o+a.Cols]
}

// rows fills *dst with the row slices of a (reusing its storage).
func rows(dst *[][]float32, a backend.Acts) [][]float32 {
	if cap(*dst) < a.Rows {
		*dst = make([][]float32, a.Rows)
	}
	r := (*dst)[:a.Rows]
	d := data(a)
	for i := range r {
		r[i] = rowOf(d, a, i)
	}
	return r
}

func sameShape(op string, a, b backend.Acts) {
	if a.Rows != b.Rows || a.Cols != b.Cols {
		panic(fmt.Sprintf("cpu: %s: views of %d×%d and %d×%d", op, a.Rows, a.Cols, b.Rows, b.Cols))
	}
}

// NewActs implements backend.Backend.
func (c *CPU) NewActs(r, cols int) backend.Acts {
	b := &backend.ActBuf{Rows: r, Cols: cols, Data: make([]float32, r*cols)}
	return backend.Acts{Buf: b, Rows: r, Cols: cols}
}

// mat is w as a kernel matrix (a view of its host bytes).
func mat(w *backend.Weight) ops.Mat {
	m, err := ops.MatFromBytes(w.Rows, w.Cols, w.DType, w.Host)
	if err != nil {
		panic(fmt.Sprintf("cpu: weight %q: %v", w.Name, err))
	}
	return m
}

// vec widens a [1, n] weight into *buf.
func vec(buf *[]float32, w *backend.Weight) []float32 {
	if w == nil {
		return nil
	}
	n := w.Rows * w.Cols
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	out := (*buf)[:n]
	m := mat(w)
	for i := 0; i < w.Rows; i++ {
		m.Row(i, out[i*w.Cols:(i+1)*w.Cols])
	}
	return out
}

// Upload implements backend.Backend.
func (c *CPU) Upload(dst backend.Acts, src []float32) {
	d := data(dst)
	for i := 0; i < dst.Rows; i++ {
		copy(rowOf(d, dst, i), src[i*dst.Cols:(i+1)*dst.Cols])
	}
}

// Download implements backend.Backend.
func (c *CPU) Download(dst []float32, src backend.Acts) {
	d := data(src)
	for i := 0; i < src.Rows; i++ {
		copy(dst[i*src.Cols:(i+1)*src.Cols], rowOf(d, src, i))
	}
}

// Copy implements backend.Backend.
func (c *CPU) Copy(dst, src backend.Acts) {
	sameShape("Copy", dst, src)
	dd, sd := data(dst), data(src)
	for i := 0; i < dst.Rows; i++ {
		copy(rowOf(dd, dst, i), rowOf(sd, src, i))
	}
}

// MatMul implements backend.Backend. Each row's result is bit-identical
// to a product over that row alone (ops' fixed reduction order).
func (c *CPU) MatMul(dst, x backend.Acts, w *backend.Weight) {
	if x.Rows != dst.Rows || x.Cols != w.Cols || dst.Cols != w.Rows {
		panic(fmt.Sprintf("cpu: MatMul: %d×%d · %q [%d, %d] into %d×%d", x.Rows, x.Cols, w.Name, w.Rows, w.Cols, dst.Rows, dst.Cols))
	}
	m := mat(w)
	if x.Rows == 1 {
		c.e.MatVec(m, rowOf(data(dst), dst, 0), rowOf(data(x), x, 0))
		return
	}
	c.e.MatMul(m, rows(&c.ys, dst), rows(&c.xs, x))
}

// Norm implements backend.Backend.
func (c *CPU) Norm(dst, x backend.Acts, n *backend.Norm) {
	sameShape("Norm", dst, x)
	w := vec(&c.w1, n.W)
	dd, xd := data(dst), data(x)
	if n.RMS {
		for i := 0; i < x.Rows; i++ {
			ops.RMSNorm(rowOf(dd, dst, i), rowOf(xd, x, i), w, n.Eps)
		}
		return
	}
	b := vec(&c.w2, n.B)
	for i := 0; i < x.Rows; i++ {
		ops.LayerNorm(rowOf(dd, dst, i), rowOf(xd, x, i), w, b, n.Eps)
	}
}

// AddScaled implements backend.Backend.
func (c *CPU) AddScaled(dst, src backend.Acts, scale *backend.Weight) {
	sameShape("AddScaled", dst, src)
	s := vec(&c.w1, scale)
	dd, sd := data(dst), data(src)
	for i := 0; i < dst.Rows; i++ {
		ops.AddScaled(rowOf(dd, dst, i), rowOf(sd, src, i), s)
	}
}

func activation(a backend.Activation) func(float32) float32 {
	switch a {
	case backend.SiLU:
		return ops.SiLU
	case backend.GELU:
		return gelu
	case backend.ReLU:
		return func(v float32) float32 { return max(v, 0) }
	}
	panic(fmt.Sprintf("cpu: activation %d", a))
}

// Gate implements backend.Backend.
func (c *CPU) Gate(dst, src backend.Acts, act backend.Activation) {
	h := dst.Cols
	if src.Cols != 2*h || src.Rows != dst.Rows {
		panic(fmt.Sprintf("cpu: Gate: %d×%d into %d×%d", src.Rows, src.Cols, dst.Rows, dst.Cols))
	}
	c.elementwise(pieceJob{d: data(dst), x: dst, src: data(src), sx: src, f: activation(act), silu: act == backend.SiLU})
}

// Activate implements backend.Backend.
func (c *CPU) Activate(x backend.Acts, act backend.Activation) {
	j := pieceJob{d: data(x), x: x}
	if act == backend.GELU {
		j.gelu = true // ops.GELU's row form
	} else {
		j.f = activation(act)
	}
	c.elementwise(j)
}

// elementwise runs j over all of j.x's rows: on the engine's threads, in
// pieces of rows, when there is enough of it (the exact GELU is a float64
// erf and SiLU a float64 exp per element: ~1-4 ns in the engine's amd64
// vector forms, 9-18 ns in the scalar loops of the other variants; over
// the LM's gated rows and the codec's batched ones that is worth the
// threads). Each element is computed alone, so the bits do not
// depend on the split.
func (c *CPU) elementwise(j pieceJob) {
	const chunk = 2048
	j.e = c.e
	n := j.x.Cols
	j.per, j.size = 1, n
	if j.x.Rows*n < 2*chunk {
		for k := 0; k < j.x.Rows; k++ {
			j.run(k)
		}
		return
	}
	j.per = (n + chunk - 1) / chunk // pieces of a row
	j.size = (n + j.per - 1) / j.per
	j.fn = c.pieces.fn
	c.pieces = j
	c.e.Parallel(j.x.Rows*j.per, j.fn)
	c.pieces = pieceJob{fn: j.fn} // drop the references to the rows
}

// NewRope implements backend.Backend.
func (c *CPU) NewRope(dh int, maxPeriod float64) *backend.Rope {
	return &backend.Rope{Dh: dh, MaxPeriod: maxPeriod, Data: ops.NewRoPE(dh, maxPeriod)}
}

// RoPE implements backend.Backend.
func (c *CPU) RoPE(x backend.Acts, r *backend.Rope, pos []int) {
	rp := r.Data.(*ops.RoPE)
	if cap(c.ropeCS) < r.Dh {
		c.ropeCS = make([]float32, r.Dh)
	}
	d := data(x)
	for i := 0; i < x.Rows; i++ {
		rp.ApplyHeads(rowOf(d, x, i), pos[i], c.ropeCS)
	}
}

// Embed implements backend.Backend.
func (c *CPU) Embed(dst backend.Acts, tables []*backend.Weight, ids []int, accumulate bool) {
	K := len(tables)
	if len(ids) < dst.Rows*K {
		panic(fmt.Sprintf("cpu: Embed: %d ids for %d rows of %d tables", len(ids), dst.Rows, K))
	}
	if cap(c.row) < dst.Cols {
		c.row = make([]float32, dst.Cols)
	}
	row := c.row[:dst.Cols]
	d := data(dst)
	for i := 0; i < dst.Rows; i++ {
		o := rowOf(d, dst, i)
		if !accumulate {
			clear(o)
		}
		for k, t := range tables {
			tok := ids[i*K+k]
			if tok == backend.ZeroToken {
				continue
			}
			if tok < 0 || tok >= t.Rows {
				panic(fmt.Sprintf("cpu: token %d out of range for embedding %q of %d rows", tok, t.Name, t.Rows))
			}
			mat(t).Row(tok, row)
			ops.Add(o, row)
		}
	}
}

// Attend implements backend.Backend. The work is split into one unit per
// (sequence, head): a unit writes its head's keys and values of the
// sequence's rows into the ring, a group of rows just before their queries
// (all of them first for Chunk), and computes that head of every row's
// query in row order. Heads never read each other's part of a ring, so the units run on
// the engine's threads in any order with the results of running the rows
// one by one, and the first touches of fresh ring pages (page faults,
// costly on some VMs) are spread over the threads too.
func (c *CPU) Attend(out, qkv backend.Acts, seqs []backend.Seq, context, group int) {
	D := out.Cols
	if qkv.Cols != 3*D || qkv.Rows != out.Rows {
		panic(fmt.Sprintf("cpu: Attend: qkv %d×%d, out %d×%d", qkv.Rows, qkv.Cols, out.Rows, out.Cols))
	}
	j := &c.att
	j.qd, j.od, j.qkv, j.out, j.group = data(qkv), data(out), qkv, out, group
	j.units, j.maxCap = j.units[:0], 0
	rows := 0
	for _, s := range seqs {
		j.maxCap = max(j.maxCap, s.Ring.Capacity)
		rows += s.Rows
	}
	if rows != qkv.Rows {
		panic(fmt.Sprintf("cpu: Attend: sequences cover %d of %d rows", rows, qkv.Rows))
	}
	// Each row's visible slots, once for all its heads: a ring's positions
	// are known before its keys are written.
	if n := rows * j.maxCap; cap(j.valid) < n {
		j.valid = make([]int32, n)
	}
	j.nvalid = j.nvalid[:0]
	r0, work := 0, 0
	for _, s := range seqs {
		r := s.Ring
		if r.Heads*r.Dh != D {
			panic(fmt.Sprintf("cpu: Attend: ring of %d×%d for rows of %d", r.Heads, r.Dh, D))
		}
		if r.ReadOnly {
			panic("cpu: Attend over a read-only ring")
		}
		if np := sharedSlots(r); np > 0 && (r.End < np || r.End+s.Rows > r.Capacity) {
			unshare(r) // these rows write into shared slots (a reset ring, or wrapping)
		}
		for i := 0; i < s.Rows; i++ {
			o := (r0 + i) * j.maxCap
			v := visibleSlots(j.valid[o:o:o+j.maxCap], r, backend.GroupEnd(r.End, i, s.Rows, group), r.End+i, context)
			j.nvalid = append(j.nvalid, len(v))
			work += len(v) * D
		}
		for hd := 0; hd < r.Heads; hd++ {
			j.units = append(j.units, attnUnit{r: r, row0: r0, rows: s.Rows, end0: r.End, hd: hd})
		}
		r0 += s.Rows
	}
	if n := len(j.units) * j.maxCap; cap(j.scores) < n {
		j.scores = make([]float32, n)
	}
	if len(j.units) > 1 && work >= parallelAttention {
		c.e.Parallel(len(j.units), j.unitFn)
	} else {
		for u := range j.units {
			j.run(u)
		}
	}
	for _, s := range seqs {
		s.Ring.End += s.Rows
	}
	j.qd, j.od, j.units = nil, nil, j.units[:0]
}

// pieceJob is one elementwise op over many rows, split into pieces of
// rows: Activate (f, or ops.GELU's vector form when gelu) on x in place,
// or Gate from src (sx: rows of [activated half, multiplier half]) into x.
type pieceJob struct {
	d, src    []float32
	x, sx     backend.Acts
	f         func(float32) float32
	gelu      bool // ops.GELU's vector form on x
	silu      bool // Gate with SiLU: the vector SiLU·multiplier
	e         *ops.Engine
	per, size int // pieces per row, elements per piece
	fn        func(k int)
}

// run computes piece k (piece k%per of row k/per).
func (j *pieceJob) run(k int) {
	n := j.x.Cols
	lo := (k % j.per) * j.size
	if lo >= n {
		return
	}
	hi := min(lo+j.size, n)
	o := rowOf(j.d, j.x, k/j.per)[lo:hi]
	switch {
	case j.src != nil:
		a := rowOf(j.src, j.sx, k/j.per)
		g, m := a[lo:hi], a[n+lo:n+hi]
		if j.silu {
			j.e.SiLUMul(o, g, m)
			return
		}
		for i := range o {
			o[i] = j.f(g[i]) * m[i]
		}
	case j.gelu:
		j.e.GELU(o)
	default:
		for i, v := range o {
			o[i] = j.f(v)
		}
	}
}

// attnJob is one Attend call's work, split into units (Attend).
type attnJob struct {
	c        *CPU
	qd, od   []float32
	qkv, out backend.Acts
	group    int // Attend's
	units    []attnUnit
	maxCap   int
	valid    []int32   // [row][maxCap]: the slots row's query attends to, in slot order
	nvalid   []int     // [row]: how many
	scores   []float32 // [unit][maxCap]
	unitFn   func(int) // run, bound once so that calls allocate nothing
}

// attnUnit is one head of one sequence's rows: rows of qkv from row0, the
// ring's End before the call end0.
type attnUnit struct {
	r                    *backend.Ring
	row0, rows, end0, hd int
}

// parallelAttention is the work (rows × visible keys × d_model) above which
// the units are spread over the worker pool.
const parallelAttention = 1 << 16

// run computes unit u.
func (j *attnJob) run(u int) {
	un := &j.units[u]
	r, D := un.r, j.out.Cols
	scores := j.scores[u*j.maxCap : (u+1)*j.maxCap]
	written := 0
	for i := 0; i < un.rows; i++ {
		// This row's group's keys and values, before its first query.
		for end := backend.GroupEnd(un.end0, i, un.rows, j.group) - un.end0; written < end; written++ {
			w := rowOf(j.qd, j.qkv, un.row0+written)
			writeHead(j.c.e, r, (un.end0+written)%r.Capacity, un.hd, w[D:2*D], w[2*D:])
		}
		row := rowOf(j.qd, j.qkv, un.row0+i)
		o := (un.row0 + i) * j.maxCap
		valid := j.valid[o : o+j.nvalid[un.row0+i]]
		attendHead(j.c.e, r, un.hd, row[:D], rowOf(j.od, j.out, un.row0+i), valid, scores)
	}
}

// visibleSlots appends to valid the slots of a ring whose End is end that
// a query at posQ attends to, in slot order.
func visibleSlots(valid []int32, r *backend.Ring, end, posQ, context int) []int32 {
	for slot := 0; slot < r.Capacity; slot++ {
		if backend.Visible(posQ, backend.RingPosition(end, r.Capacity, slot), context) {
			valid = append(valid, int32(slot))
		}
	}
	return valid
}

var _ backend.Backend = (*CPU)(nil)

// gelu is the exact (erf) GELU of one value, as ops.GELU computes it.
func gelu(v float32) float32 {
	return float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
}

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// attend computes every head of one query at posQ against the ring as it
// stands, with Attend's head computation (one query, one thread).
func (c *CPU) attend(r *backend.Ring, q, out []float32, posQ, context int) {
	valid := visibleSlots(nil, r, r.End, posQ, context)
	scores := make([]float32, r.Capacity)
	for hd := 0; hd < r.Heads; hd++ {
		attendHead(c.e, r, hd, q, out, valid, scores)
	}
}

// attendPerRow is attention as it was computed before the row kernels: one
// Dot per key and one Axpy per value.
func attendPerRow(e *ops.Engine, r *backend.Ring, q, out []float32, posQ, context int) {
	d := ringOf(r)
	dh := r.Dh
	var valid []int
	for slot := 0; slot < r.Capacity; slot++ {
		if backend.Visible(posQ, backend.RingPosition(r.End, r.Capacity, slot), context) {
			valid = append(valid, slot)
		}
	}
	scale := float32(1 / math.Sqrt(float64(dh)))
	for hd := 0; hd < r.Heads; hd++ {
		qh := q[hd*dh : (hd+1)*dh]
		scores := make([]float32, len(valid))
		maxv := float32(math.Inf(-1))
		for i, slot := range valid {
			o := (hd*r.Capacity + slot) * dh
			v := e.Dot(qh, d.k[o:o+dh]) * scale
			scores[i] = v
			maxv = max(maxv, v)
		}
		var sum float32
		for i, v := range scores {
			ex := float32(math.Exp(float64(v - maxv)))
			scores[i] = ex
			sum += ex
		}
		oh := out[hd*dh : (hd+1)*dh]
		clear(oh)
		inv := 1 / sum
		for i, slot := range valid {
			o := (hd*r.Capacity + slot) * dh
			e.Axpy(oh, scores[i]*inv, d.v[o:o+dh])
		}
	}
}

// The backend's attention (row kernels, heads in parallel or not) gives
// the bits of the per-row computation on every kernel variant and thread
// count, for wrapped and unwrapped rings.
func TestAttendMatchesPerRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, kern := range ops.KernelNames() {
		for _, threads := range []int{1, 2, 3} {
			c, err := New(Options{Threads: threads, Kernel: kern})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range []struct{ heads, dh, capacity, end, context int }{
				{4, 128, 300, 235, 3000}, {4, 128, 300, 700, 250}, {8, 64, 40, 17, 40},
				{2, 33, 50, 120, 50}, {1, 100, 70, 70, 10}, {32, 128, 64, 64, 64},
			} {
				r := c.NewRing(sh.heads, sh.dh, sh.capacity)
				r.End = sh.end
				d := ringOf(r)
				for i := range d.k {
					d.k[i] = float32(rng.NormFloat64())
					d.v[i] = float32(rng.NormFloat64())
				}
				q := make([]float32, sh.heads*sh.dh)
				for i := range q {
					q[i] = float32(rng.NormFloat64() * 3)
				}
				got := make([]float32, len(q))
				want := make([]float32, len(q))
				for _, posQ := range []int{sh.end - 1, sh.end - 5} {
					c.attend(r, q, got, posQ, sh.context)
					attendPerRow(c.e, r, q, want, posQ, sh.context)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s threads %d %+v posQ %d: out[%d] = %v, per-row %v", kern, threads, sh, posQ, i, got[i], want[i])
						}
					}
				}
			}
			t.Logf("%s threads %d ok", kern, threads)
			c.Close()
		}
	}
}

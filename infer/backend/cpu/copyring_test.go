package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
)

// CopyRing into a larger ring that still holds another conversation's keys
// (a renewed generator's) keeps that ring's memory and capacity, takes
// src's End and positions, and attention over it gives the bits of
// attention over an exact copy; a smaller ring, or a wrapped source, gets
// an exact copy (src's capacity).
func TestCopyRingKeepsLargerRing(t *testing.T) {
	c, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	fill := func(r *backend.Ring, end int) {
		d := ringOf(r)
		for i := range d.k {
			d.k[i] = float32(rng.NormFloat64())
			d.v[i] = float32(rng.NormFloat64())
		}
		r.End = end
	}
	const heads, dh = 3, 40
	for _, sh := range []struct{ src, end, dst int }{{16, 11, 40}, {16, 0, 17}, {16, 15, 300}} {
		src := c.NewRing(heads, dh, sh.src)
		fill(src, sh.end)
		big := c.NewRing(heads, dh, sh.dst)
		fill(big, sh.dst-1)
		mem := &ringOf(big).k[0]
		c.CopyRing(big, src)
		if big.Capacity != sh.dst || big.End != sh.end || &ringOf(big).k[0] != mem {
			t.Fatalf("%+v: copy of %d slots, End %d (kept memory: %v)", sh, big.Capacity, big.End, &ringOf(big).k[0] == mem)
		}
		exact := c.NewRing(heads, dh, 1)
		exact.Data = nil
		c.CopyRing(exact, src)
		if exact.Capacity != sh.src || exact.End != sh.end {
			t.Fatalf("%+v: exact copy of %d slots, End %d", sh, exact.Capacity, exact.End)
		}
		if sh.end == 0 {
			continue
		}
		q := make([]float32, heads*dh)
		for i := range q {
			q[i] = float32(rng.NormFloat64() * 2)
		}
		got, want := make([]float32, len(q)), make([]float32, len(q))
		for _, posQ := range []int{sh.end - 1, sh.end / 2} {
			c.attend(big, q, got, posQ, 1000)
			c.attend(exact, q, want, posQ, 1000)
			if !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("%+v posQ %d: attention over the kept ring differs from the exact copy's", sh, posQ)
			}
		}
	}
	// Smaller, or a wrapped source: an exact copy.
	src := c.NewRing(heads, dh, 16)
	fill(src, 40) // wrapped
	for _, cp := range []int{8, 32} {
		dst := c.NewRing(heads, dh, cp)
		fill(dst, 3)
		c.CopyRing(dst, src)
		if dst.Capacity != 16 || dst.End != 40 || !slices.Equal(ringOf(dst).k, ringOf(src).k) || !slices.Equal(ringOf(dst).v, ringOf(src).v) {
			t.Fatalf("into %d slots from a wrapped ring: %d slots, End %d, contents equal %v", cp, dst.Capacity, dst.End, slices.Equal(ringOf(dst).k, ringOf(src).k))
		}
	}
}

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

// CopyRing from a read-only ring (a prompt snapshot's) shares its storage
// instead of copying it, into a ring of any capacity; attention then gives
// the bits of attention over an exact copy, step by step, through a
// GrowRing while shared, the first write into a shared slot (the ring
// wrapping, which copies the shared slots into the ring's own storage) and
// on; a ring reset while shared forgets the sharing; the snapshot never
// changes.
func TestCopyRingSharesReadOnly(t *testing.T) {
	c, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	const H, dh = 3, 40
	D := H * dh
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	step := func(r *backend.Ring, rows int, qkv []float32) []float32 {
		out, in := c.NewActs(rows, D), c.NewActs(rows, 3*D)
		c.Upload(in, qkv)
		c.Attend(out, in, []backend.Seq{{Ring: r, Rows: rows}}, 0, backend.Stepwise)
		got := make([]float32, rows*D)
		c.Download(got, out)
		return got
	}
	same := func(a, b []float32) bool {
		return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
	}
	src := c.NewRing(H, dh, 32)
	step(src, 20, vec(20*3*D))
	snap := &backend.Ring{}
	c.CopyRing(snap, src)
	snap.ReadOnly = true
	sk, sv := slices.Clone(ringOf(snap).k), slices.Clone(ringOf(snap).v)
	copyOf := func(dst *backend.Ring) {
		snap.ReadOnly = false
		c.CopyRing(dst, snap)
		snap.ReadOnly = true
	}
	for _, capDst := range []int{8, 32, 48} {
		shared, plain := c.NewRing(H, dh, capDst), c.NewRing(H, dh, capDst)
		c.CopyRing(shared, snap)
		copyOf(plain)
		if d := ringOf(shared); d.np != 20 || &d.pk[0] != &ringOf(snap).k[0] || ringOf(plain).np != 0 || shared.Capacity != plain.Capacity || shared.End != 20 {
			t.Fatalf("capacity %d: shared %d slots (of the snapshot's storage: %v), plain %d; capacities %d, %d", capDst, d.np, &d.pk[0] == &ringOf(snap).k[0], ringOf(plain).np, shared.Capacity, plain.Capacity)
		}
		for s := 0; s < 40; s++ {
			if s == 2 && shared.Capacity == 32 {
				c.GrowRing(shared, 40)
				c.GrowRing(plain, 40)
				if ringOf(shared).np != 20 {
					t.Fatalf("GrowRing dropped the sharing")
				}
			}
			rows := 1 + s%3
			q := vec(rows * 3 * D)
			if !same(step(shared, rows, q), step(plain, rows, q)) {
				t.Fatalf("capacity %d, step %d (End %d of %d, %d shared): attention over the shared ring differs from the copy's", capDst, s, shared.End, shared.Capacity, ringOf(shared).np)
			}
		}
		if shared.End <= shared.Capacity || ringOf(shared).np != 0 {
			t.Fatalf("capacity %d: End %d of %d, %d slots still shared after wrapping", capDst, shared.End, shared.Capacity, ringOf(shared).np)
		}
		k1, v1 := KV(shared)
		k2, v2 := KV(plain)
		if !same(k1, k2) || !same(v1, v2) {
			t.Fatalf("capacity %d: the ring's contents differ from the copy's after wrapping", capDst)
		}
		// Reset while shared, then a new conversation.
		c.CopyRing(shared, snap)
		shared.Reset()
		plain.Reset()
		for s := 0; s < 5; s++ {
			q := vec(3 * D)
			if !same(step(shared, 1, q), step(plain, 1, q)) {
				t.Fatalf("capacity %d: after Reset, step %d differs", capDst, s)
			}
		}
		if ringOf(shared).np != 0 {
			t.Fatalf("capacity %d: a reset ring still shares", capDst)
		}
	}
	if !same(ringOf(snap).k, sk) || !same(ringOf(snap).v, sv) || snap.End != 20 {
		t.Fatalf("the read-only ring changed")
	}
	defer func() {
		if recover() == nil {
			t.Fatalf("Attend over a read-only ring did not panic")
		}
	}()
	step(snap, 1, vec(3*D))
}

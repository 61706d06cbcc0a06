package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// A bf16 ring (Options.KVDType "bf16") is the float32 ring of the rounded
// keys and values: every Attend over it gives the bits of the same calls
// on a float32 ring fed keys and values already rounded to bf16, through
// every ring operation a job uses (GrowRing, a snapshot's shared slots
// after CopyRing from a read-only ring, wrapping, which unshares them,
// Reset), stepwise and not, with a context mask, on every kernel variant;
// and it holds half the bytes. The largest shape is enough work for
// Attend to split its units between the threads.
func TestBF16RingIsRoundedF32Ring(t *testing.T) {
	for _, k := range ops.KernelNames() {
		for _, sh := range []struct{ heads, dh, seqs int }{{3, 40, 2}, {3, 64, 2}, {8, 128, 6}} {
			t.Run(fmt.Sprintf("%s/%dx%d/seqs=%d", k, sh.heads, sh.dh, sh.seqs), func(t *testing.T) { checkBF16Ring(t, k, sh.heads, sh.dh, sh.seqs) })
		}
	}
}

func checkBF16Ring(t *testing.T, kernel string, heads, dh, seqs int) {
	f, err := New(Options{Threads: 2, Kernel: kernel})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := New(Options{Threads: 2, Kernel: kernel, KVDType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	D := heads * dh
	rng := rand.New(rand.NewPCG(7, uint64(dh)))
	type pair struct{ f, b *backend.Ring }
	rings := make([]pair, seqs)
	for i := range rings {
		rings[i] = pair{f.NewRing(heads, dh, 16), b.NewRing(heads, dh, 16)}
		if rings[i].b.Bytes()*2 != rings[i].f.Bytes() || rings[i].b.ElemBytes != 2 {
			t.Fatalf("bf16 ring of %d bytes (elements of %d), float32 ring of %d", rings[i].b.Bytes(), rings[i].b.ElemBytes, rings[i].f.Bytes())
		}
	}
	step := 0
	// attend runs rows rows of each sequence on both backends and compares.
	attend := func(rows, context, group int) {
		t.Helper()
		n := rows * seqs
		qf, qb := f.NewActs(n, 3*D), b.NewActs(n, 3*D)
		of, ob := f.NewActs(n, D), b.NewActs(n, D)
		xb, xf := data(qb), data(qf)
		for i := range xb {
			xb[i] = float32(rng.NormFloat64() * 1.5)
		}
		copy(xf, xb)
		// The float32 backend gets the keys and values rounded.
		u := make([]uint16, 2*D)
		for r := 0; r < n; r++ {
			kv := xf[r*3*D+D : (r+1)*3*D]
			b.e.RoundBF16(u, kv)
			b.e.WidenBF16(kv, u)
		}
		sf, sb := make([]backend.Seq, seqs), make([]backend.Seq, seqs)
		for i, p := range rings {
			sf[i], sb[i] = backend.Seq{Ring: p.f, Rows: rows}, backend.Seq{Ring: p.b, Rows: rows}
		}
		f.Attend(of, qf, sf, context, group)
		b.Attend(ob, qb, sb, context, group)
		for i, v := range data(ob) {
			if w := data(of)[i]; math.Float32bits(v) != math.Float32bits(w) {
				t.Fatalf("step %d (%d rows, context %d, group %d): output %d = %08x, the float32 ring's %08x", step, rows, context, group, i, math.Float32bits(v), math.Float32bits(w))
			}
		}
		step++
	}
	sameKV := func(what string) {
		t.Helper()
		for i, p := range rings {
			kf, vf := KV(p.f)
			kb, vb := KV(p.b)
			if p.f.End != p.b.End || p.f.Capacity != p.b.Capacity {
				t.Fatalf("%s: sequence %d: End %d / %d, capacity %d / %d", what, i, p.b.End, p.f.End, p.b.Capacity, p.f.Capacity)
			}
			for j := range kf {
				if math.Float32bits(kf[j]) != math.Float32bits(kb[j]) || math.Float32bits(vf[j]) != math.Float32bits(vb[j]) {
					t.Fatalf("%s: sequence %d: element %d of the keys or values differs", what, i, j)
				}
			}
		}
	}

	attend(5, 0, backend.Chunk) // a prompt's rows at once
	for range 6 {
		attend(1, 0, backend.Stepwise)
	}
	f.GrowRing(rings[0].f, 40)
	b.GrowRing(rings[0].b, 40)
	f.GrowRing(rings[1].f, 40)
	b.GrowRing(rings[1].b, 40)
	attend(2, 9, backend.Stepwise)
	sameKV("after GrowRing")

	// A snapshot restored into fresh rings: the positions are read from
	// the snapshot's storage until the rings wrap.
	for i := range rings {
		sf, sb := f.NewRing(heads, dh, 1), b.NewRing(heads, dh, 1)
		f.CopyRing(sf, rings[i].f)
		b.CopyRing(sb, rings[i].b)
		sf.ReadOnly, sb.ReadOnly = true, true
		nf, nb := f.NewRing(heads, dh, 40), b.NewRing(heads, dh, 40)
		f.CopyRing(nf, sf)
		b.CopyRing(nb, sb)
		if sharedSlots(nb) != rings[i].b.End || sharedSlots(nf) != rings[i].f.End || nb.ElemBytes != 2 {
			t.Fatalf("restored: %d / %d slots shared (End %d), elements of %d bytes", sharedSlots(nb), sharedSlots(nf), rings[i].b.End, nb.ElemBytes)
		}
		rings[i] = pair{nf, nb}
	}
	for s := range 30 { // past the capacity: the first rings wrap and unshare
		if s == 5 { // the second grows while it shares
			f.GrowRing(rings[1].f, 48)
			b.GrowRing(rings[1].b, 48)
		}
		attend(1, 0, backend.Stepwise)
	}
	if sharedSlots(rings[1].b) == 0 || sharedSlots(rings[1].f) != sharedSlots(rings[1].b) {
		t.Fatalf("the grown ring shares %d slots (the float32 one %d)", sharedSlots(rings[1].b), sharedSlots(rings[1].f))
	}
	if sharedSlots(rings[0].b) != 0 {
		t.Fatalf("%d slots still shared after wrapping", sharedSlots(rings[0].b))
	}
	sameKV("after wrapping")
	attend(6, 20, 2) // three frames of two positions each, in wrapped rings
	sameKV("after groups of two")
	for _, p := range rings {
		p.f.Reset()
		p.b.Reset()
	}
	attend(3, 0, backend.Chunk)
	attend(1, 2, backend.Stepwise)
	sameKV("after Reset")
}

// WithF32Rings shares the backend's engine and makes float32 rings
// whatever the backend's are; a bad KVDType is an error.
func TestKVDTypeOptions(t *testing.T) {
	b, err := New(Options{Threads: 1, KVDType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if r := b.WithF32Rings().NewRing(2, 32, 8); r.ElemBytes != 0 || r.Bytes() != 2*4*2*32*8 {
		t.Fatalf("WithF32Rings: elements of %d bytes, %d bytes", r.ElemBytes, r.Bytes())
	}
	if b.WithF32Rings().Engine() != b.Engine() {
		t.Fatal("WithF32Rings has another engine")
	}
	if _, err := New(Options{KVDType: "f16"}); err == nil {
		t.Fatal("KVDType f16 accepted")
	}
}

package cpu

import (
	"testing"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
)

// A ring's writes have its pages populated ahead, head by head, in calls of
// populateAhead bytes of keys and of values from the slot written (to the
// capacity at most), once per such run of slots; never a shared slot
// (a restored conversation's prompt positions, read from the snapshot's
// storage); GrowRing populates the slots it copies, FillRing all of them.
func TestRingWritesPopulateAhead(t *testing.T) {
	c, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ kv, h, s0, s1 int } // kv: 0 keys, 1 values
	type call struct {
		p unsafe.Pointer
		n uintptr
	}
	var calls []call
	var cur *backend.Ring
	saved := populatePages
	defer func() { populatePages = saved }()
	populatePages = func(p unsafe.Pointer, n uintptr) { calls = append(calls, call{p, n}) }
	// spans resolves the calls against cur's storage (after the operation:
	// GrowRing populates its new storage before the ring holds it).
	spans := func() []span {
		var k, v unsafe.Pointer
		es := 4
		switch d := cur.Data.(type) {
		case *ring[float32]:
			k, v = unsafe.Pointer(&d.k[0]), unsafe.Pointer(&d.v[0])
		case *ring[uint16]:
			k, v, es = unsafe.Pointer(&d.k[0]), unsafe.Pointer(&d.v[0]), 2
		}
		var got []span
		for _, c := range calls {
			found := false
			for kv, base := range []unsafe.Pointer{k, v} {
				off := uintptr(c.p) - uintptr(base)
				if uintptr(c.p) < uintptr(base) || off >= uintptr(cur.Heads*cur.Capacity*cur.Dh*es) {
					continue
				}
				slotBytes := uintptr(cur.Dh * es)
				if off%slotBytes != 0 || c.n%slotBytes != 0 {
					t.Fatalf("populate of %d bytes at %d: not whole slots", c.n, off)
				}
				s0 := int(off / slotBytes)
				got = append(got, span{kv, s0 / cur.Capacity, s0 % cur.Capacity, s0%cur.Capacity + int(c.n/slotBytes)})
				found = true
			}
			if !found {
				t.Fatalf("populate outside the ring's storage")
			}
		}
		calls = calls[:0]
		return got
	}
	expect := func(what string, want ...span) {
		t.Helper()
		got := spans()
		if len(got) != len(want) {
			t.Fatalf("%s: populated %v, want %v", what, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: populated %v, want %v", what, got, want)
			}
		}
	}
	const heads, dh = 3, 64
	kv := make([]float32, heads*dh)
	write := func(r *backend.Ring, slot, h int) { cur = r; writeHead(c.e, r, slot, h, kv, kv) }

	for _, bf16 := range []bool{false, true} {
		c.kvBF16 = bf16
		ahead := populateAhead / (dh * 4) // 64 float32 slots
		if bf16 {
			ahead *= 2
		}
		r := c.NewRing(heads, dh, 3*ahead+10)
		write(r, 0, 1)
		expect("first write", span{0, 1, 0, ahead}, span{1, 1, 0, ahead})
		write(r, 5, 1)
		write(r, ahead-1, 1)
		expect("writes inside the populated slots")
		write(r, ahead, 1)
		expect("the next run", span{0, 1, ahead, 2 * ahead}, span{1, 1, ahead, 2 * ahead})
		write(r, 3*ahead+2, 1)
		expect("from the slot written, up to the capacity", span{0, 1, 3*ahead + 2, 3*ahead + 10}, span{1, 1, 3*ahead + 2, 3*ahead + 10})
		write(r, 7, 2)
		expect("another head", span{0, 2, 7, 7 + ahead}, span{1, 2, 7, 7 + ahead})

		// GrowRing: the copied slots of every head, then writes go on from
		// the end.
		g := c.NewRing(heads, dh, 16)
		g.End = 12
		cur = g
		c.GrowRing(g, 40)
		expect("grown", span{0, 0, 0, 12}, span{1, 0, 0, 12}, span{0, 1, 0, 12}, span{1, 1, 0, 12}, span{0, 2, 0, 12}, span{1, 2, 0, 12})
		write(g, 12, 0)
		expect("grown, then written", span{0, 0, 12, 40}, span{1, 0, 12, 40})

		// A ring restored from a read-only snapshot of 30 positions shares
		// them: its first write populates from slot 30, its own.
		src := c.NewRing(heads, dh, 64)
		src.End, src.ReadOnly = 30, true
		dst := c.NewRing(heads, dh, 1)
		dst.Data = nil
		c.CopyRing(dst, src)
		if dataOf(dst).shared() != 30 {
			t.Fatalf("restored ring shares %d slots, want 30", dataOf(dst).shared())
		}
		write(dst, 30, 0)
		expect("restored", span{0, 0, 30, min(64, 30+ahead)}, span{1, 0, 30, min(64, 30+ahead)})

		f := c.NewRing(heads, dh, 8)
		cur = f
		c.FillRing(f, 8)
		expect("filled", span{0, 0, 0, 8}, span{1, 0, 0, 8}, span{0, 1, 0, 8}, span{1, 1, 0, 8}, span{0, 2, 0, 8}, span{1, 2, 0, 8})
	}
}

// BenchmarkRingWritesFresh writes positions into rings whose pages have not
// been touched yet, as a conversation's steps do into the KV rings reserved
// for it (the 1.3B LM's shape: 16 heads of 128, float32, one ring a layer
// and conversation, 16 of each): "populated" as the rings do, "faulted"
// with populate turned off (each page faulted in by the first write).
// ns/op is one position written into all 256 rings.
func BenchmarkRingWritesFresh(b *testing.B) {
	const heads, dh, rings, positions = 16, 128, 256, 256
	c, err := New(Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	kv := make([]float32, heads*dh)
	for _, mode := range []string{"populated", "faulted"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "faulted" {
				saved := populatePages
				populatePages = func(unsafe.Pointer, uintptr) {}
				defer func() { populatePages = saved }()
			}
			n := 0
			for b.Loop() {
				b.StopTimer()
				rs := make([]*backend.Ring, rings)
				for i := range rs {
					rs[i] = c.NewRing(heads, dh, positions)
				}
				b.StartTimer()
				for slot := range positions {
					for _, r := range rs {
						for h := range heads {
							writeHead(c.e, r, slot, h, kv, kv)
						}
					}
				}
				n += positions
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/position")
		})
	}
}

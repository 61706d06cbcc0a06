package offload

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustStream(t *testing.T, d Device) Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustFence(t *testing.T, d Device) Fence {
	t.Helper()
	f, err := d.NewFence()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSimStreamOrder: copies enqueued on one stream land in order (each
// overwrites the previous at the same place), and Wait on a fence
// recorded after them returns only once all have landed.
func TestSimStreamOrder(t *testing.T) {
	d := NewSimDevice(1 << 20)
	b, _ := d.Alloc("b", 1<<16)
	s := mustStream(t, d)
	f := mustFence(t, d)
	for round := 0; round < 20; round++ {
		var last []byte
		for k := 0; k < 50; k++ {
			src := bytes.Repeat([]byte{byte(round*50 + k)}, 1<<16)
			if err := d.CopyAsync(s, b, 0, src); err != nil {
				t.Fatal(err)
			}
			last = src
		}
		// A small copy at an offset after the big ones lands on top of them.
		if err := d.CopyAsync(s, b, 10, []byte("tail")); err != nil {
			t.Fatal(err)
		}
		if err := d.Record(f, s); err != nil {
			t.Fatal(err)
		}
		if err := d.Wait(f); err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]byte(nil), last[:10]...), "tail"...), last[14:]...)
		if !bytes.Equal(b.(*SimBuffer).Bytes(), want) {
			t.Fatalf("round %d: the buffer is not the last copies' bytes in order", round)
		}
	}
	if err := d.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyStream(s); err == nil {
		t.Error("destroyed a stream twice")
	}
}

// TestSimFences: a copy enqueued after StreamWait(e) does not start before
// e completes, though its stream is otherwise idle; a fence never recorded
// is complete; a wait applies to the recording current when it is issued.
func TestSimFences(t *testing.T) {
	d := NewSimDevice(1 << 20)
	b, _ := d.Alloc("b", 8)
	gate, copyS := mustStream(t, d), mustStream(t, d)
	defer d.DestroyStream(gate)
	defer d.DestroyStream(copyS)
	e, landed := mustFence(t, d), mustFence(t, d)
	if err := d.Wait(e); err != nil {
		t.Fatal("a fence never recorded must be complete:", err)
	}
	// Block the gate stream on the host: release closes when we let it go.
	release := make(chan struct{})
	if err := d.gateStream(gate, release); err != nil {
		t.Fatal(err)
	}
	d.Record(e, gate)
	d.StreamWait(copyS, e)
	d.CopyAsync(copyS, b, 0, []byte("after e!"))
	d.Record(landed, copyS)
	// The copy stream is stopped at the wait: nothing lands, landed does not
	// complete (checked without sleeping: the fence's channel is open).
	lf := landed.(*simFence).current()
	select {
	case <-lf:
		t.Fatal("the copy after StreamWait(e) completed before e")
	default:
	}
	for _, c := range b.(*SimBuffer).Bytes() {
		if c != 0 {
			t.Fatal("the copy after StreamWait(e) started before e")
		}
	}
	close(release)
	d.Wait(landed)
	if string(b.(*SimBuffer).Bytes()) != "after e!" {
		t.Fatal("copy did not land after e")
	}
	// Re-recording e does not affect a wait issued before it: copyS
	// waited for e's earlier (completed) recording.
	release2 := make(chan struct{})
	d.gateStream(gate, release2)
	d.StreamWait(copyS, e) // e's current recording is complete
	d.Record(e, gate)      // a new recording, blocked behind release2
	d.CopyAsync(copyS, b, 0, []byte("early..."))
	d.Record(landed, copyS)
	d.Wait(landed) // must not hang on the new recording of e
	if string(b.(*SimBuffer).Bytes()) != "early..." {
		t.Fatal("copy did not land")
	}
	close(release2)
	d.Wait(e)
	// Foreign handles are refused.
	other := NewSimDevice(10)
	if err := other.Record(e, copyS); err == nil {
		t.Error("recorded a fence of another device")
	}
	if err := other.CopyAsync(copyS, b, 0, nil); err == nil {
		t.Error("copied on a stream of another device")
	}
}

// gateStream enqueues on s a step that blocks until release is closed (a
// test's stand-in for long device work).
func (d *SimDevice) gateStream(s Stream, release chan struct{}) error {
	ss, err := d.stream(s)
	if err != nil {
		return err
	}
	return ss.enqueue(func() { <-release })
}

// TestSimAccounting: allocations and reservations over the budget fail
// with ErrOutOfMemory and change nothing; the device never exceeds its
// budget; Free returns the memory.
func TestSimAccounting(t *testing.T) {
	d := NewSimDevice(1000)
	var live []Buffer
	for i := 0; ; i++ {
		b, err := d.Alloc(fmt.Sprint("b", i), 300)
		if err != nil {
			if !errors.Is(err, ErrOutOfMemory) || i != 3 {
				t.Fatalf("allocation %d: %v", i, err)
			}
			break
		}
		live = append(live, b)
	}
	if d.Used() != 900 || d.Peak() != 900 || d.Live() != 3 {
		t.Fatalf("used %d peak %d live %d", d.Used(), d.Peak(), d.Live())
	}
	if err := d.Reserve("kv", 101); !errors.Is(err, ErrOutOfMemory) || d.Used() != 900 {
		t.Errorf("reserve over budget: %v, used %d", err, d.Used())
	}
	if err := d.Reserve("kv", 100); err != nil || d.Used() != 1000 {
		t.Fatalf("reserve to the budget: %v", err)
	}
	if _, err := d.Alloc("one more", 1); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("allocated past a full budget: %v", err)
	}
	if _, err := d.Alloc("negative", -1); err == nil {
		t.Error("allocated a negative size")
	}
	if err := d.Free(live[0]); err != nil || d.Used() != 700 {
		t.Fatalf("free: %v, used %d", err, d.Used())
	}
	if err := d.Free(live[0]); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("double free: %v", err)
	}
	if err := NewSimDevice(1000).Free(live[1]); err == nil {
		t.Error("freed a buffer of another device")
	}
	d.Unreserve("kv")
	d.Free(live[1])
	d.Free(live[2])
	if d.Used() != 0 || d.Live() != 0 || d.Peak() != 1000 || d.Peak() > d.Budget() {
		t.Errorf("used %d live %d peak %d", d.Used(), d.Live(), d.Peak())
	}
}

package offload

import (
	"fmt"
	"strings"
	"testing"
)

// recDevice is a Device that logs every call (then does it on a SimDevice,
// so the bytes are real): streams are named by creation order (the
// runtime's copy stream first, then its compute stream), fences too (done,
// then copied/released per slot), buffers by their names.
type recDevice struct {
	*SimDevice
	log     []string
	names   map[any]string
	streams int
	fences  int
	unitOf  func(src []byte) int
}

func (r *recDevice) add(format string, a ...any) { r.log = append(r.log, fmt.Sprintf(format, a...)) }

func (r *recDevice) NewStream() (Stream, error) {
	s, err := r.SimDevice.NewStream()
	r.names[s] = []string{"copy", "compute"}[min(r.streams, 1)]
	r.streams++
	return s, err
}

func (r *recDevice) NewFence() (Fence, error) {
	f, err := r.SimDevice.NewFence()
	n := "done"
	if r.fences > 0 {
		n = fmt.Sprintf("%s%d", []string{"copied", "released"}[(r.fences-1)%2], (r.fences-1)/2)
	}
	r.names[f] = n
	r.fences++
	return f, err
}

func (r *recDevice) CopyAsync(s Stream, dst Buffer, off int64, src []byte) error {
	r.add("copy %s %s unit%d", r.names[s], strings.TrimPrefix(dst.(*SimBuffer).Name(), "staging "), r.unitOf(src))
	return r.SimDevice.CopyAsync(s, dst, off, src)
}

func (r *recDevice) Record(f Fence, s Stream) error {
	r.add("record %s %s", r.names[f], r.names[s])
	return r.SimDevice.Record(f, s)
}

func (r *recDevice) Wait(f Fence) error {
	r.add("wait %s", r.names[f])
	return r.SimDevice.Wait(f)
}

func (r *recDevice) StreamWait(s Stream, f Fence) error {
	r.add("streamwait %s %s", r.names[s], r.names[f])
	return r.SimDevice.StreamWait(s, f)
}

// TestRuntimeCallOrder drives a Runtime through the Device interface with a
// device that records the calls, every unit streamed through two slots, and
// checks the documented order: unit k+1's copy is enqueued before unit k's
// compute is released; a copy into a slot waits (on the device) for the
// release fence of the slot's previous unit, recorded at its Release;
// Acquire orders the compute stream after the copy and waits for it on the
// host; Release never blocks the host.
func TestRuntimeCallOrder(t *testing.T) {
	p := fakeProblem(t, 1<<30)
	pl, err := p.Evaluate(placements("ssssssss"))
	if err != nil {
		t.Fatal(err)
	}
	host := hostBlobs(p, 5)
	dev := &recDevice{SimDevice: NewSimDevice(p.GPUBudget), names: map[any]string{}}
	dev.unitOf = func(src []byte) int {
		for u := range host {
			if len(src) > 0 && &src[0] == &host[u][0] {
				return u
			}
		}
		return -1
	}
	rt, err := NewRuntime(pl, dev, host)
	if err != nil {
		t.Fatal(err)
	}
	const frames = 3
	n := len(host)
	for f := 0; f < frames; f++ {
		rt.BeginFrame()
		for u := 0; u < n; u++ {
			dev.add("> acquire %d", u)
			if _, err := rt.Acquire(u); err != nil {
				t.Fatal(err)
			}
			dev.add("< acquire %d", u)
			dev.add("> release %d", u)
			if err := rt.Release(u); err != nil {
				t.Fatal(err)
			}
			dev.add("< release %d", u)
		}
		rt.EndFrame()
	}
	rt.Close()
	if err := rt.Timeline().Check(); err != nil {
		t.Fatal(err)
	}
	if dev.Streams() != 0 || dev.Live() != 0 || dev.Used() != 0 {
		t.Errorf("after Close: %d streams, %d buffers, %d bytes", dev.Streams(), dev.Live(), dev.Used())
	}
	log := dev.log
	at := func(entry string, from int) int {
		for i := from; i < len(log); i++ {
			if log[i] == entry {
				return i
			}
		}
		return -1
	}
	// The copies: sequence k is unit k mod n into slot k mod 2, each
	// followed by the record of its slot's copied fence.
	var copies []int
	for i, e := range log {
		if strings.HasPrefix(e, "copy ") {
			copies = append(copies, i)
			k := len(copies) - 1
			want := fmt.Sprintf("copy copy slot %d unit%d", k%2, k%n)
			if e != want || i+1 >= len(log) || log[i+1] != fmt.Sprintf("record copied%d copy", k%2) {
				t.Fatalf("copy %d is %q (then %q), want %q then its fence", k, e, log[min(i+1, len(log)-1)], want)
			}
		}
	}
	if len(copies) < frames*n {
		t.Fatalf("%d copies for %d streamed units over %d frames", len(copies), n, frames)
	}
	pos := 0
	for k := 0; k < frames*n; k++ {
		u, slot := k%n, k%2
		acq := at(fmt.Sprintf("> acquire %d", u), pos)
		acqEnd := at(fmt.Sprintf("< acquire %d", u), acq)
		rel := at(fmt.Sprintf("> release %d", u), acqEnd)
		relEnd := at(fmt.Sprintf("< release %d", u), rel)
		pos = relEnd
		// Acquire: the compute stream waits for the copy; the host too.
		sw := at(fmt.Sprintf("streamwait compute copied%d", slot), acq)
		w := at(fmt.Sprintf("wait copied%d", slot), acq)
		if sw < 0 || sw > acqEnd || w < 0 || w > acqEnd {
			t.Errorf("seq %d: Acquire did not order the compute after copied%d", k, slot)
		}
		// Copy k+1 was enqueued before unit k's release is recorded.
		relRec := at(fmt.Sprintf("record released%d compute", slot), rel)
		if relRec < 0 || relRec > relEnd {
			t.Fatalf("seq %d: Release did not record released%d", k, slot)
		}
		if k+1 < len(copies) && copies[k+1] > relRec {
			t.Errorf("seq %d: copy %d enqueued after unit %d's release", k, k+1, u)
		}
		// Release never waits on the host.
		for i := rel; i < relEnd; i++ {
			if strings.HasPrefix(log[i], "wait ") {
				t.Errorf("seq %d: Release blocked: %s", k, log[i])
			}
		}
		// The next copy into this slot (k+2) is enqueued in this Release,
		// behind a device-side wait on the fence just recorded.
		if k+2 < len(copies) {
			c := copies[k+2]
			if c < relRec || c > relEnd || at(fmt.Sprintf("streamwait copy released%d", slot), relRec) != c-1 {
				t.Errorf("seq %d: copy %d into slot %d at %d does not follow streamwait on released%d (recorded at %d)", k, k+2, slot, c, slot, relRec)
			}
		}
	}
	if t.Failed() {
		t.Logf("calls:\n%s", strings.Join(log, "\n"))
	}
}

package mimi

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// streamRun is one stream's codes, latents and samples, frame after frame.
type streamRun struct {
	codes  []int
	latent []float32
	pcm    []float32
}

// batchSchedule is a batch whose streams join and leave at different
// frames: stream i runs frames [join[i], join[i]+length[i]) of the job.
type batchSchedule struct{ join, length []int }

func (s batchSchedule) frames() int {
	n := 0
	for i := range s.join {
		n = max(n, s.join[i]+s.length[i])
	}
	return n
}

// signal is stream i's input: its own mix of tones and noise.
func streamSignal(i, n int) []float32 {
	r := rand.New(rand.NewSource(int64(100 + i)))
	x := make([]float32, n)
	for k := range x {
		x[k] = float32(0.3*math.Sin(float64(k)*0.013*float64(i+1)) + 0.05*r.NormFloat64())
	}
	return x
}

// runAlone codes stream i with EncodeFrame / DecodeFrame.
func runAlone(m *Model, i, frames int) streamRun {
	var r streamRun
	e, d := m.NewEncoder(), m.NewDecoder()
	fs := m.FrameSize()
	sig := streamSignal(i, frames*fs)
	for f := 0; f < frames; f++ {
		c := e.EncodeFrame(sig[f*fs : (f+1)*fs])
		r.codes = append(r.codes, c...)
		r.latent = append(r.latent, e.Latent()...)
		r.pcm = append(r.pcm, d.DecodeFrame(c)...)
	}
	return r
}

// runBatched codes every stream of the schedule through one Batch, the
// active streams of each frame in a shuffled order.
func runBatched(m *Model, s batchSchedule, seed int64) []streamRun {
	B := len(s.join)
	runs := make([]streamRun, B)
	encs, decs := make([]*Encoder, B), make([]*Decoder, B)
	sigs := make([][]float32, B)
	fs := m.FrameSize()
	b := m.NewBatch()
	r := rand.New(rand.NewSource(seed))
	for f := 0; f < s.frames(); f++ {
		var active []int
		for i := range s.join {
			if f == s.join[i] {
				encs[i], decs[i] = m.NewEncoder(), m.NewDecoder()
				sigs[i] = streamSignal(i, s.length[i]*fs)
			}
			if f >= s.join[i] && f < s.join[i]+s.length[i] {
				active = append(active, i)
			}
		}
		r.Shuffle(len(active), func(a, c int) { active[a], active[c] = active[c], active[a] })
		var es []*Encoder
		var ds []*Decoder
		var in [][]float32
		for _, i := range active {
			k := f - s.join[i]
			es, ds, in = append(es, encs[i]), append(ds, decs[i]), append(in, sigs[i][k*fs:(k+1)*fs])
		}
		codes, out := make([][]int, len(es)), make([][]float32, len(ds))
		b.Encode(es, in, codes)
		for n, i := range active {
			runs[i].codes = append(runs[i].codes, codes[n]...)
			runs[i].latent = append(runs[i].latent, encs[i].Latent()...)
		}
		b.Decode(ds, codes, out)
		for n, i := range active {
			runs[i].pcm = append(runs[i].pcm, out[n]...)
		}
	}
	return runs
}

func sameRun(t *testing.T, what string, got, want streamRun) {
	t.Helper()
	if len(got.codes) != len(want.codes) || len(got.pcm) != len(want.pcm) || len(got.latent) != len(want.latent) {
		t.Fatalf("%s: %d codes, %d latents, %d samples; alone %d, %d, %d", what, len(got.codes), len(got.latent), len(got.pcm), len(want.codes), len(want.latent), len(want.pcm))
	}
	for k := range want.codes {
		if got.codes[k] != want.codes[k] {
			t.Fatalf("%s: code %d is %d, alone %d", what, k, got.codes[k], want.codes[k])
		}
	}
	for _, v := range []struct {
		name      string
		got, want []float32
	}{{"latent", got.latent, want.latent}, {"pcm", got.pcm, want.pcm}} {
		for k := range v.want {
			if math.Float32bits(v.got[k]) != math.Float32bits(v.want[k]) {
				t.Fatalf("%s: %s value %d is %g, alone %g", what, v.name, k, v.got[k], v.want[k])
			}
		}
	}
}

// A batch of streams of different lengths that join and leave at different
// frames, in a different order every frame, gives every stream exactly
// (bit for bit) the codes, latents and samples of its run alone: at the
// real Mimi's size (where the deep layers' rows of several streams share
// register tiles) under every kernel variant and 1 and 2 threads, and on
// the tiny model.
func TestBatchStreamsMatchSingleRuns(t *testing.T) {
	sched := batchSchedule{join: []int{0, 0, 1, 0, 2, 1, 0}, length: []int{3, 1, 2, 5, 2, 1, 2}} // frame 4: stream 3 alone
	tiny := tinyModel(t)
	var alone []streamRun
	for i := range sched.join {
		alone = append(alone, runAlone(tiny, i, sched.length[i]))
	}
	for i, r := range runBatched(tiny, sched, 1) {
		sameRun(t, fmt.Sprintf("tiny model, stream %d", i), r, alone[i])
	}
	if testing.Short() {
		t.Skip("real-size model")
	}
	real := realRandomModel(t)
	alone = alone[:0]
	for i := range sched.join {
		alone = append(alone, runAlone(real, i, sched.length[i]))
	}
	for _, k := range ops.KernelNames() {
		s := sched
		if k == "portable" {
			s = batchSchedule{join: []int{0, 0, 1}, length: []int{2, 1, 1}} // slow at this size
		}
		for _, th := range []int{1, 2} {
			c, err := cpu.New(cpu.Options{Kernel: k, Threads: th})
			if err != nil {
				t.Fatal(err)
			}
			m := real.WithCompute(c, c.Engine())
			for i, r := range runBatched(m, s, int64(th)) {
				want := alone[i]
				if n := s.length[i]; n < sched.length[i] { // the first n frames
					want = streamRun{want.codes[:n*m.NumCodebooks()], want.latent[:n*m.Dimension()], want.pcm[:n*m.FrameSize()]}
				}
				sameRun(t, fmt.Sprintf("kernel %s, %d threads, stream %d", k, th, i), r, want)
			}
			c.Close()
		}
	}
}

// A Batch allocates nothing per frame once its streams have run a frame
// (its row lists and gathered windows are kept and reused).
func TestBatchNoAllocationsPerFrame(t *testing.T) {
	m := tinyModel(t)
	const B = 3
	fs := m.FrameSize()
	b := m.NewBatch()
	encs, decs := make([]*Encoder, B), make([]*Decoder, B)
	in, codes, out := make([][]float32, B), make([][]int, B), make([][]float32, B)
	for i := range encs {
		encs[i], decs[i] = m.NewEncoder(), m.NewDecoder()
		in[i] = streamSignal(i, fs)
	}
	step := func() {
		b.Encode(encs, in, codes)
		b.Decode(decs, codes, out)
	}
	step()
	if n := testing.AllocsPerRun(10, step); n != 0 {
		t.Errorf("%v allocations per batched frame", n)
	}
}

package mimi

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/internal/testalloc"
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
		in := make([][]float32, len(active))
		for n, i := range active {
			k := f - s.join[i]
			in[n] = sigs[i][k*fs : (k+1)*fs]
		}
		codeCall(b, active, encs, decs, in, runs)
	}
	return runs
}

// codeCall encodes in[n] with the encoder of stream active[n] and decodes
// the codes with its decoder, in one Batch call each, appending to runs.
func codeCall(b *Batch, active []int, encs []*Encoder, decs []*Decoder, in [][]float32, runs []streamRun) {
	es, ds := make([]*Encoder, len(active)), make([]*Decoder, len(active))
	for n, i := range active {
		es[n], ds[n] = encs[i], decs[i]
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
	if n := testalloc.PerRun(t, 10, step); n != 0 {
		t.Errorf("%v allocations per batched frame", n)
	}
}

// runChunked codes the streams through one Batch, every call taking a
// chunk of several frames of each stream: stream i's chunks are the sizes
// of chunks[i] in turn (a stream with none left sits the call out), the
// streams of a call in a shuffled order; a batch of one runs the stream's
// own path.
func runChunked(m *Model, chunks [][]int, seed int64) []streamRun {
	B := len(chunks)
	runs := make([]streamRun, B)
	encs, decs := make([]*Encoder, B), make([]*Decoder, B)
	sigs, at := make([][]float32, B), make([]int, B)
	fs := m.FrameSize()
	for i, c := range chunks {
		encs[i], decs[i] = m.NewEncoder(), m.NewDecoder()
		n := 0
		for _, k := range c {
			n += k
		}
		sigs[i] = streamSignal(i, n*fs)
	}
	b := m.NewBatch()
	r := rand.New(rand.NewSource(seed))
	for call := 0; ; call++ {
		var active []int
		for i, c := range chunks {
			if call < len(c) {
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			return runs
		}
		r.Shuffle(len(active), func(a, c int) { active[a], active[c] = active[c], active[a] })
		in := make([][]float32, len(active))
		for n, i := range active {
			k := chunks[i][call]
			in[n] = sigs[i][at[i]*fs : (at[i]+k)*fs]
			at[i] += k
		}
		codeCall(b, active, encs, decs, in, runs)
	}
}

// Several frames of a stream coded in one call (Encoder.Encode,
// Decoder.Decode, a Batch's streams bringing chunks of different sizes)
// give exactly the codes, latents and samples of coding the frames one by
// one: on the tiny model past its transformers' 32-position context (the
// rings wrap inside chunks), alone and batched, and at the real Mimi's
// size under every SIMD kernel variant.
func TestChunkedFramesMatchFrameByFrame(t *testing.T) {
	tiny := tinyModel(t)
	chunks := [][]int{
		{1, 5, 16, 3, 7, 1, 2, 9},
		{16, 16, 8},
		{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
		{40},
		{3},
	}
	frames := func(c []int) int {
		n := 0
		for _, k := range c {
			n += k
		}
		return n
	}
	var alone []streamRun
	for i, c := range chunks {
		alone = append(alone, runAlone(tiny, i, frames(c)))
		if i == 0 { // the stream on its own: Encoder.Encode / Decoder.Decode
			var got streamRun
			e, d := tiny.NewEncoder(), tiny.NewDecoder()
			sig, fs, at := streamSignal(i, frames(c)*tiny.FrameSize()), tiny.FrameSize(), 0
			for _, k := range c {
				codes := e.Encode(sig[at*fs : (at+k)*fs])
				got.codes = append(got.codes, codes...)
				got.latent = append(got.latent, e.Latent()...)
				got.pcm = append(got.pcm, d.Decode(codes)...)
				at += k
			}
			sameRun(t, "tiny model, one stream's chunks", got, alone[i])
		}
	}
	for i, r := range runChunked(tiny, chunks, 1) {
		sameRun(t, fmt.Sprintf("tiny model, stream %d of a batch of chunks", i), r, alone[i])
	}
	if testing.Short() {
		t.Skip("real-size model")
	}
	real := realRandomModel(t)
	chunks = [][]int{{3, 1, 2}, {1, 4, 1}, {6}}
	alone = alone[:0]
	for i, c := range chunks {
		alone = append(alone, runAlone(real, i, frames(c)))
	}
	for _, k := range ops.KernelNames() {
		if k == "portable" {
			continue // slow at this size; the tiny model's runs above use the default kernel
		}
		c, err := cpu.New(cpu.Options{Kernel: k, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		m := real.WithCompute(c, c.Engine())
		for i, r := range runChunked(m, chunks, 2) {
			sameRun(t, fmt.Sprintf("kernel %s, stream %d of a batch of chunks", k, i), r, alone[i])
		}
		sameRun(t, fmt.Sprintf("kernel %s, stream 0 alone in chunks", k), runChunked(m, [][]int{{2, 4}}, 3)[0], alone[0])
		c.Close()
	}
}

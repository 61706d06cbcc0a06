package mimi

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/ops"
)

// A Batch's pass through a codec transformer moves every stream's rows in
// one upload and one download: on the dry driver, one device→host copy
// per Encode and per Decode whatever the number of streams (it was one
// per stream), and no other wait for the device but the upload arena's
// wraps.
func TestBatchHostWaitsIndependentOfStreams(t *testing.T) {
	m := tinyModel(t)
	pcm := loadWAV(t, tinyDir+"input.wav")
	frame := m.FrameSize()
	for _, B := range []int{1, 4, 16} {
		g, st, err := cuda.NewDry(cuda.Options{ComputeDType: "f32"}, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		mb := m.WithCompute(g, ops.Default())
		b := mb.NewBatch()
		encs, decs := make([]*Encoder, B), make([]*Decoder, B)
		for i := range encs {
			encs[i], decs[i] = mb.NewEncoder(), mb.NewDecoder()
		}
		in, codes, out := make([][]float32, B), make([][]int, B), make([][]float32, B)
		for f := 0; f < 3; f++ {
			for i := range in {
				at := (f + i) % (len(pcm)/frame - 1) * frame
				in[i] = pcm[at : at+frame]
			}
			for _, op := range []string{"encode", "decode"} {
				d0, s0 := st.HostWaits()
				w0 := g.ArenaWraps()
				if op == "encode" {
					b.Encode(encs, in, codes)
				} else {
					b.Decode(decs, codes, out)
				}
				d1, s1 := st.HostWaits()
				if wraps := g.ArenaWraps() - w0; d1-d0 != 1 || s1-s0 != 1+wraps {
					t.Fatalf("B=%d frame %d %s: %d downloads, %d waits (%d arena wraps), want 1 download", B, f, op, d1-d0, s1-s0, wraps)
				}
			}
		}
		g.Close()
	}
}

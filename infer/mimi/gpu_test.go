package mimi

import (
	"github.com/pp-offline/pp-offline/infer/ops"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cuda"
)

// Mimi's transformers on the CUDA backend's dry driver (no GPU): encode
// and decode frames of the tiny codec, alone and in a batch, so every call
// pattern of the codec's transformers is checked against the kernel
// signatures. Values are not checked (the fixture jobs of
// scripts/gpu-check.sh do that on a GPU).
func TestTransformersOnCUDADry(t *testing.T) {
	m := tinyModel(t)
	g, st, err := cuda.NewDry(cuda.Options{ComputeDType: "f32"}, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m = m.WithCompute(g, ops.Default())
	pcm := loadWAV(t, tinyDir+"input.wav")
	frame := m.FrameSize()
	e, d := m.NewEncoder(), m.NewDecoder()
	for f := 0; f+frame <= len(pcm) && f < 6*frame; f += frame {
		codes := e.EncodeFrame(pcm[f : f+frame])
		if codes != nil {
			d.DecodeFrame(codes)
		}
	}
	b := m.NewBatch()
	encs, decs := []*Encoder{m.NewEncoder(), m.NewEncoder()}, []*Decoder{m.NewDecoder(), m.NewDecoder()}
	out := make([][]int, 2)
	for f := 0; f < 4; f++ {
		b.Encode(encs, [][]float32{pcm[f*frame : (f+1)*frame], pcm[(f+1)*frame : (f+2)*frame]}, out)
		if out[0] != nil && out[1] != nil {
			b.Decode(decs, out, make([][]float32, 2))
		}
	}
	if st.Count("attend") == 0 || st.Count("matmul_fma")+st.Count("matmul_fma_rows") == 0 {
		t.Fatalf("the codec's transformers did not run on the backend (%d attention launches)", st.Count("attend"))
	}
}

package mimi

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
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

// DeviceBytes bounds what the codec holds on a device backend: the
// tensors of the real Mimi's two transformers as a checkpoint stores them
// (float32), uploaded whole, and each stream's rings, with the codec
// running two streams on the dry driver (the upload arena and the
// activations are the backend's workspace, not counted here). The offload
// plan of --cpu-offload leaves this room on the device (an 8 GiB budget's
// plan took it all, and the codec's weights then failed to upload).
func TestDeviceBytesBoundsTheCodec(t *testing.T) {
	cfg := config.DefaultMimi()
	specs, err := WeightSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := cuda.NewDry(cuda.Options{ComputeDType: "f32"}, 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	base, _, _ := g.Memory()
	m, err := Load(cfg, weights.Random(specs, 1), g, ops.Default())
	if err != nil {
		t.Fatal(err)
	}
	const B = 2
	b := m.NewBatch()
	encs, decs := make([]*Encoder, B), make([]*Decoder, B)
	for i := range encs {
		encs[i], decs[i] = m.NewEncoder(), m.NewDecoder()
	}
	in, codes, out := make([][]float32, B), make([][]int, B), make([][]float32, B)
	for i := range in {
		in[i] = make([]float32, m.FrameSize())
	}
	b.Encode(encs, in, codes)
	b.Decode(decs, codes, out)
	one, err := DeviceBytes(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, _ := DeviceBytes(cfg, B)
	rings := two - one
	tensors := one - rings
	if up := g.Resident(); up != tensors {
		t.Fatalf("the transformers' tensors: %d bytes uploaded, DeviceBytes counts %d", up, tensors)
	}
	used, _, _ := g.Memory()
	if held := used - base; held > two+32<<20 || held < two {
		t.Fatalf("the codec holds %d bytes of device memory with %d streams; DeviceBytes says %d (+ up to 32 MiB of activations)", held, B, two)
	}
}

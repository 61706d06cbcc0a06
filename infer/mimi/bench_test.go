package mimi

import (
	"fmt"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"math"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// WeightSpecs lists exactly the tensors (names and shapes) of the tiny checkpoint.
func TestWeightSpecsMatchCheckpoint(t *testing.T) {
	m := tinyModel(t)
	f, err := weights.Open(tinyDir + "mimi.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	specs, err := WeightSpecs(m.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		seen[s.Name] = true
		if _, err := f.Get(s.Name, s.Shape...); err != nil {
			t.Error(err)
		}
	}
	for _, n := range f.Names() {
		if !seen[n] {
			t.Errorf("checkpoint tensor %q not in WeightSpecs", n)
		}
	}
	if len(specs) != len(f.Names()) {
		t.Errorf("%d specs, checkpoint has %d tensors", len(specs), len(f.Names()))
	}
}

func realRandomModel(b testing.TB) *Model {
	b.Helper()
	cfg := config.DefaultMimi()
	specs, err := WeightSpecs(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := Load(cfg, weights.Random(specs, 1), cpu.Default(), ops.Default())
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func testSignal(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(0.3*math.Sin(float64(i)*0.05) + 0.1*math.Sin(float64(i)*0.31))
	}
	return x
}

// BenchmarkEncodeFrame encodes one 80 ms frame with the real Mimi's shapes.
func BenchmarkEncodeFrame(b *testing.B) {
	m := realRandomModel(b)
	e := m.NewEncoder()
	pcm := testSignal(m.FrameSize())
	e.EncodeFrame(pcm)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.EncodeFrame(pcm)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/80, "x_realtime")
}

// BenchmarkDecodeFrame decodes one frame of codes with the real Mimi's shapes.
func BenchmarkDecodeFrame(b *testing.B) {
	m := realRandomModel(b)
	d := m.NewDecoder()
	codes := []int{1, 200, 3000 % 2048, 45, 1999, 7, 1024, 512}
	d.DecodeFrame(codes)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d.DecodeFrame(codes)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/80, "x_realtime")
}

// BenchmarkCodecFrame encodes one frame and decodes its codes, as the tool
// does for every frame, with the real Mimi's shapes: the per-frame codec
// cost, on one thread and on all.
func BenchmarkCodecFrame(b *testing.B) {
	m := realRandomModel(b)
	pcm := testSignal(m.FrameSize())
	for _, th := range []int{1, runtime.NumCPU()} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			c, err := cpu.New(cpu.Options{Threads: th})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			m := m.WithCompute(c, c.Engine())
			e, d := m.NewEncoder(), m.NewDecoder()
			d.DecodeFrame(e.EncodeFrame(pcm))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				d.DecodeFrame(e.EncodeFrame(pcm))
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/0.080, "x_realtime")
		})
	}
}

// BenchmarkBatchCodec encodes and decodes one frame of each of B streams
// through a Batch (as the batch job does every step) with the real Mimi's
// shapes on all CPUs. Each iteration runs the batched codec and, on a
// second set of streams, the per-stream SEANet baseline, alternately, so
// that a shared machine's load falls on both alike: ms_per_stream and
// base_ms_per_stream are their costs per stream and frame, ratio their
// quotient (medians over the iterations). PP_OFFLINE_KERNEL=avx2 times
// another kernel variant, as the tool's variable does.
func BenchmarkBatchCodec(b *testing.B) {
	c, err := cpu.New(cpu.Options{Kernel: os.Getenv("PP_OFFLINE_KERNEL")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := realRandomModel(b).WithCompute(c, c.Engine())
	b.Logf("kernel %s, %d threads", c.Engine().KernelName(), c.Engine().Threads())
	pcm := testSignal(16 * m.FrameSize())
	for _, B := range []int{1, 4, 8, 16} {
		b.Run(fmt.Sprintf("B=%d", B), func(b *testing.B) {
			type set struct {
				bt   *Batch
				encs []*Encoder
				decs []*Decoder
			}
			mk := func() set {
				s := set{m.NewBatch(), make([]*Encoder, B), make([]*Decoder, B)}
				for i := range s.encs {
					s.encs[i], s.decs[i] = m.NewEncoder(), m.NewDecoder()
				}
				return s
			}
			batched, base := mk(), mk()
			in, codes, out := make([][]float32, B), make([][]int, B), make([][]float32, B)
			for i := range in {
				in[i] = pcm[i*m.FrameSize() : (i+1)*m.FrameSize()]
			}
			step := func(s set, perStream bool) time.Duration {
				t0 := time.Now()
				if perStream {
					s.bt.encodeEach(s.encs, in, codes)
					s.bt.decodeEach(s.decs, codes, out)
				} else {
					s.bt.Encode(s.encs, in, codes)
					s.bt.Decode(s.decs, codes, out)
				}
				return time.Since(t0)
			}
			step(batched, false)
			step(base, true)
			var ts, tb []float64
			b.ResetTimer()
			for b.Loop() {
				ts = append(ts, step(batched, false).Seconds())
				tb = append(tb, step(base, true).Seconds())
			}
			med := func(v []float64) float64 {
				sort.Float64s(v)
				return v[len(v)/2]
			}
			ms, mb := med(ts)*1e3/float64(B), med(tb)*1e3/float64(B)
			b.ReportMetric(ms, "ms_per_stream")
			b.ReportMetric(mb, "base_ms_per_stream")
			b.ReportMetric(ms/mb, "ratio")
		})
	}
}

// BenchmarkCodecChunk encodes and decodes one stream's frames K at a time
// (Encoder.Encode, Decoder.Decode: what the session does with few
// conversations) with the real Mimi's shapes on all CPUs: ms_per_frame is
// a frame's share of a call. K = 1 is EncodeFrame and DecodeFrame.
func BenchmarkCodecChunk(b *testing.B) {
	c, err := cpu.New(cpu.Options{Kernel: os.Getenv("PP_OFFLINE_KERNEL")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := realRandomModel(b).WithCompute(c, c.Engine())
	for _, K := range []int{1, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("K=%d", K), func(b *testing.B) {
			pcm := testSignal(K * m.FrameSize())
			e, d := m.NewEncoder(), m.NewDecoder()
			d.Decode(e.Encode(pcm))
			b.ResetTimer()
			for b.Loop() {
				d.Decode(e.Encode(pcm))
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*K), "ms_per_frame")
		})
	}
}

// BenchmarkLoad loads the real Mimi's shapes (random weights already in
// memory): the checks of every weight and the convolutions' packing that
// every run of the main command pays before its first frame.
func BenchmarkLoad(b *testing.B) {
	cfg := config.DefaultMimi()
	specs, err := WeightSpecs(cfg)
	if err != nil {
		b.Fatal(err)
	}
	f := weights.Random(specs, 1)
	for b.Loop() {
		if _, err := Load(cfg, f, cpu.Default(), ops.Default()); err != nil {
			b.Fatal(err)
		}
	}
}

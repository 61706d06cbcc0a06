package mimi

import (
	"fmt"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"math"
	"runtime"
	"testing"

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

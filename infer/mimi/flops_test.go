package mimi

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
)

// flopsConfig is a codec small enough to count by hand: 4 samples a
// frame, one SEANet ratio of 2 (so two rows a frame at the transformers)
// and a downsampling stride of 2 to one row a frame.
func flopsConfig() *config.Mimi {
	return &config.Mimi{
		Seanet: config.Seanet{Channels: 1, Dimension: 4, Causal: true, NFilters: 2, NResidualLayers: 1,
			Activation: "ELU", Compress: 2, DilationBase: 2, KernelSize: 3, ResidualKernelSize: 3,
			LastKernelSize: 3, Norm: "none", PadMode: "constant", Ratios: []int{2}, TrueSkip: true},
		Transformer:  config.MimiTransformer{DModel: 4, NumHeads: 1, NumLayers: 1, Causal: true, Context: 8, Gating: "none", DimFeedforward: 8},
		Quantizer:    config.Quantizer{Dimension: 4, NQ: 1, Bins: 4},
		NumCodebooks: 1, SampleRate: 8, FrameRate: 2,
	}
}

func TestFLOPsPerFrameByHand(t *testing.T) {
	// Encoder at 4 rows a frame: conv 1→2 k3 (4·2·2·1·3 = 48), the
	// residual block 2→1 k3 and 1→2 k1 (48 + 16), conv 2→4 k4 stride 2
	// (2 rows · 4 · 2·2·4 = 128), conv 4→4 k3 (2 · 4 · 2·4·3 = 192): 432.
	// Two transformers at 2 rows a frame, one layer of d 4, ff 8:
	// 2·(4·16 + 2·32) = 256 each a row, 1024. Downsampling 4→4 k4 stride 2
	// (1 row · 4 · 2·4·4 = 128), upsampling depthwise k4 stride 2 (1 row in
	// · 4 · 2·1·4 = 32). Decoder at 2 rows: conv 4→4 k3 192, transposed
	// 4→2 k4 stride 2 (2 rows in · 2 · 2·4·4 = 128), then at 4 rows the
	// residual block 64 and conv 2→1 k3 48: 432.
	cfg := flopsConfig()
	got, err := FLOPsPerFrame(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 432 + 1024 + 128 + 32 + 432.0; got != want {
		t.Errorf("FLOPsPerFrame = %v, want %v", got, want)
	}

	// A shortcut conv 2→2 k1 in each residual block, at 4 rows a frame in
	// the encoder and in the decoder: 2 · 4·2·2·2·1 = 64 more.
	cfg.Seanet.TrueSkip = false
	if got2, err := FLOPsPerFrame(cfg); err != nil || got2 != got+64 {
		t.Errorf("with shortcuts: FLOPsPerFrame = %v (%v), want %v", got2, err, got+64)
	}

	// A gated FFN: hidden = 2·8/3 = 5, 3·4·5 = 60 multiply-adds a layer
	// instead of 2·4·8 = 64, 2 FLOPs each, 4 transformer rows a frame.
	cfg.Transformer.Gating = "silu"
	if got3, err := FLOPsPerFrame(cfg); err != nil || got3 != got+64-4*2*4 {
		t.Errorf("gated: FLOPsPerFrame = %v (%v), want %v", got3, err, got+64-4*2*4)
	}

	cfg.Seanet.Ratios = []int{3}
	if _, err := FLOPsPerFrame(cfg); err == nil {
		t.Error("a frame that is not a multiple of the hop length was counted")
	}
}

// The real codec's figure, for the record and against a change of plan:
// SEANet's convolutions at 24 kHz dominate it.
func TestFLOPsPerFrameRealSize(t *testing.T) {
	cfg, err := config.Load("../../testdata/personaplex-1b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := FLOPsPerFrame(cfg.Mimi)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real-size Mimi: %.3f GFLOP a stream-frame", got/1e9)
	if got < 0.5e9 || got > 2e9 {
		t.Errorf("FLOPsPerFrame = %.3g, want the ~0.7-1 GFLOP of the real codec", got)
	}
}

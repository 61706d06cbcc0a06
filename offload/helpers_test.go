package offload

import (
	"math/rand/v2"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
)

func loadCfg(t testing.TB, path string) *config.LM {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return &c.LM
}

// smallCfg is the tiny test model's shape with nLayers temporal layers.
func smallCfg(t testing.TB, nLayers int) *config.LM {
	c := loadCfg(t, "../testdata/tiny/config.json")
	c.NumLayers = nLayers
	return c
}

func newLM(t testing.TB, c *config.LM, depSteps int) *LM {
	t.Helper()
	parts, err := RefParts(c, depSteps)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := NewLM(c, depSteps, parts)
	if err != nil {
		t.Fatal(err)
	}
	return lm
}

// randomFigures draws figures that make copies, GPU computes and CPU
// computes of comparable size for the tiny model's units (a few hundred KB),
// so that the three placements genuinely compete.
func randomFigures(r *rand.Rand) Figures {
	f := DefaultFigures()
	f.GPUBandwidth.Value = 50 + 200*r.Float64()
	f.GPUCompute.Value = 0.01 + 0.1*r.Float64()
	f.GPULaunch.Value = 0.01 * r.Float64()
	f.H2DBandwidth.Value = 0.5 + 4*r.Float64()
	f.H2DPageable.Value = f.H2DBandwidth.Value / 2
	f.CPUBandwidth.Value = 0.5 + 4*r.Float64()
	f.CPUCompute.Value = 0.001 + 0.01*r.Float64()
	f.Sync.Value = 5 * r.Float64()
	return f
}

package lm

import (
	"strings"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// WeightSpecs lists the tensors of an LMModel checkpoint for c (names and
// shapes of LMModel.state_dict(), dep_q steps in the depformer: the model's
// Tensors declaration), in dtype, with a small uniform scale (norm scales
// are 1). Use it with weights.Random for benchmarks at a real shape without
// the real checkpoint.
func WeightSpecs(c *config.LM, dtype weights.DType) []weights.Spec {
	const std = 0.02
	m := &Model{Cfg: *c}
	refs, err := m.Tensors(FullShape(c))
	if err != nil {
		panic("lm: WeightSpecs: " + err.Error())
	}
	var s []weights.Spec
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.Name] {
			continue // shared by several steps (depformer_in.0, the norms, the projections)
		}
		seen[r.Name] = true
		sd := float32(std)
		if strings.HasSuffix(r.Name, ".alpha") {
			sd = 0 // exactly 1
		}
		s = append(s, weights.Spec{Name: r.Name, DType: dtype, Shape: r.Shape, Std: sd})
	}
	return s
}

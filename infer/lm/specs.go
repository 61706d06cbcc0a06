package lm

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// WeightSpecs lists the tensors of an LMModel checkpoint for c (names and
// shapes of LMModel.state_dict(), dep_q steps in the depformer), in dtype,
// with a small uniform scale (norm scales are 1). Use it with weights.Random
// for benchmarks at a real shape without the real checkpoint.
func WeightSpecs(c *config.LM, dtype weights.DType) []weights.Spec {
	const std = 0.02
	var s []weights.Spec
	add := func(name string, std float32, shape ...int) {
		s = append(s, weights.Spec{Name: name, DType: dtype, Shape: shape, Std: std})
	}
	D, Dd := c.Dim, c.DepformerDim
	for i := 0; i < c.NQ; i++ {
		add(fmt.Sprintf("emb.%d.weight", i), std, c.Card+1, D)
	}
	add("text_emb.weight", std, c.TextCard+1, D)
	hidden := nn.GatingHidden(D, c.DimFeedforward())
	for l := 0; l < c.NumLayers; l++ {
		p := fmt.Sprintf("transformer.layers.%d.", l)
		add(p+"norm1.alpha", 0, 1, 1, D)
		add(p+"norm2.alpha", 0, 1, 1, D)
		add(p+"self_attn.in_proj_weight", std, 3*D, D)
		add(p+"self_attn.out_proj.weight", std, D, D)
		add(p+"gating.linear_in.weight", std, 2*hidden, D)
		add(p+"gating.linear_out.weight", std, D, hidden)
		if c.LayerScale != nil {
			add(p+"layer_scale_1.scale", std, D)
			add(p+"layer_scale_2.scale", std, D)
		}
	}
	add("out_norm.alpha", 0, 1, 1, D)
	add("text_linear.weight", std, c.TextCard, D)
	nIn := 1
	if c.DepformerMultiLinear {
		nIn = c.DepQ
	}
	for j := 0; j < nIn; j++ {
		add(fmt.Sprintf("depformer_in.%d.weight", j), std, Dd, D)
	}
	add("depformer_text_emb.weight", std, c.TextCard+1, Dd)
	for j := 0; j < c.DepQ-1; j++ {
		add(fmt.Sprintf("depformer_emb.%d.weight", j), std, c.Card+1, Dd)
	}
	dh := nn.GatingHidden(Dd, c.DepDimFeedforward())
	for l := 0; l < c.DepformerNumLayers; l++ {
		p := fmt.Sprintf("depformer.layers.%d.", l)
		add(p+"norm1.alpha", 0, 1, 1, Dd)
		add(p+"norm2.alpha", 0, 1, 1, Dd)
		add(p+"self_attn.in_proj_weight", std, c.DepQ*3*Dd, Dd)
		add(p+"self_attn.out_proj.weight", std, c.DepQ*Dd, Dd)
		for j := 0; j < c.DepQ; j++ {
			add(fmt.Sprintf("%sgating.%d.linear_in.weight", p, j), std, 2*dh, Dd)
			add(fmt.Sprintf("%sgating.%d.linear_out.weight", p, j), std, Dd, dh)
		}
		if c.DepformerLayerScale != nil {
			add(p+"layer_scale_1.scale", std, Dd)
			add(p+"layer_scale_2.scale", std, Dd)
		}
	}
	for j := 0; j < c.DepQ; j++ {
		add(fmt.Sprintf("linears.%d.weight", j), std, c.Card, Dd)
	}
	return s
}

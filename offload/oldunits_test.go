package offload

import (
	"fmt"
	"strings"

	"github.com/pp-offline/pp-offline/infer/config"
)

// RefParts are the units' tensors as OldNewLM names them, for the tests of
// this package (which cannot import lm, the owner of the declaration; the
// external test TestUnitsMatchOldBuilder checks that lm.Units builds the
// same).
func RefParts(c *config.LM, depSteps int) (LMParts, error) {
	all := depSteps
	if c.DepformerWeightsPerStep {
		all = c.DepQ
	}
	old, err := OldNewLM(c, all)
	if err != nil {
		return LMParts{}, err
	}
	var p LMParts
	for _, u := range append(old.Units, old.Skipped...) {
		switch u.Kind {
		case KindLayer:
			p.Layers = append(p.Layers, u.Parts)
		case KindHead:
			p.Head = u.Parts
		case KindDepStep:
			p.DepSteps = append(p.DepSteps, u.Parts)
		case KindDepformer:
			p.Depformer = u.Parts
		}
	}
	return p, nil
}

func rows(name string, shape []int, r0, r1 int) Part {
	cols := 1
	for _, s := range shape[1:] {
		cols *= s
	}
	if len(shape) == 1 {
		cols = shape[0]
		return Part{Tensor: name, Shape: shape, Row0: 0, Row1: 1, Cols: cols}
	}
	return Part{Tensor: name, Shape: shape, Row0: r0, Row1: r1, Cols: cols}
}

func whole(name string, shape ...int) Part {
	if len(shape) == 1 {
		return rows(name, shape, 0, 1)
	}
	return rows(name, shape, 0, shape[0])
}

func normParts(norm, prefix string, dim int) []Part {
	if strings.HasPrefix(norm, "rms_norm") {
		return []Part{whole(prefix+".alpha", 1, 1, dim)}
	}
	return []Part{whole(prefix+".weight", dim), whole(prefix+".bias", dim)}
}

// OldNewLM is NewLM as it was before the units' tensors came from the
// LM's declaration (lm.Units), kept in the tests only: it spells every
// checkpoint name itself. It derives the units of the LM described by c. depSteps is the number
// of depformer steps run per frame (a parameter of the cost model):
// DefaultDepSteps in offline inference, dep_q to generate both streams (as
// the reference's depformer_step does), 0 when no depformer runs (a prefill
// of forced tokens).
func OldNewLM(c *config.LM, depSteps int) (*LM, error) {
	if depSteps < 0 || depSteps > c.DepQ {
		return nil, fmt.Errorf("depformer steps per frame %d must be in 0..dep_q %d", depSteps, c.DepQ)
	}
	if c.Dim <= 0 || c.NumLayers <= 0 || c.DepformerDim <= 0 {
		return nil, fmt.Errorf("config has no LM shape (dim %d, num_layers %d, depformer_dim %d)", c.Dim, c.NumLayers, c.DepformerDim)
	}
	m := &LM{Cfg: *c}
	D, d := c.Dim, c.DepformerDim
	gated := c.Gating != "none" && c.Gating != ""
	hidden := c.DimFeedforward()
	if gated {
		hidden = config.GatingHidden(D, c.DimFeedforward())
	}
	for i := 0; i < c.NumLayers; i++ {
		p := fmt.Sprintf("transformer.layers.%d.", i)
		var ps []Part
		ps = append(ps, whole(p+"self_attn.in_proj_weight", 3*D, D), whole(p+"self_attn.out_proj.weight", D, D))
		ps = append(ps, normParts(c.Norm, p+"norm1", D)...)
		ps = append(ps, normParts(c.Norm, p+"norm2", D)...)
		if c.LayerScale != nil {
			ps = append(ps, whole(p+"layer_scale_1.scale", D), whole(p+"layer_scale_2.scale", D))
		}
		if gated {
			ps = append(ps, whole(p+"gating.linear_in.weight", 2*hidden, D), whole(p+"gating.linear_out.weight", D, hidden))
		} else {
			ps = append(ps, whole(p+"linear1.weight", hidden, D), whole(p+"linear2.weight", D, hidden))
		}
		mat := int64(4*D*D) + 3*int64(hidden)*int64(D)
		if !gated {
			mat = int64(4*D*D) + 2*int64(hidden)*int64(D)
		}
		m.Units = append(m.Units, Unit{
			Name: fmt.Sprintf("layer.%d", i), Kind: KindLayer, Index: i, Bytes: sumParts(ps), Runs: 1,
			MatParams: mat, KVBytes: 2 * int64(c.Context) * int64(D) * 4, AttnDim: D,
			InDim: D, OutDim: D, Launches: 12, Parts: ps,
		})
	}
	head := normParts(c.Norm, "out_norm", D)
	head = append(head, whole("text_linear.weight", c.TextCard, D))
	m.Units = append(m.Units, Unit{
		Name: "head", Kind: KindHead, Bytes: sumParts(head), Runs: 1,
		MatParams: int64(c.TextCard) * int64(D), InDim: D, OutDim: D + c.TextCard, Launches: 3, Parts: head,
	})

	dh := config.GatingHidden(d, c.DepDimFeedforward())
	L := c.DepformerNumLayers
	depMat := int64(L)*(int64(4*d*d)+3*int64(dh)*int64(d)) + int64(d)*int64(D) + int64(c.Card)*int64(d)
	depIn := func(s int) Part {
		if c.DepformerMultiLinear {
			return whole(fmt.Sprintf("depformer_in.%d.weight", s), d, D)
		}
		return whole("depformer_in.0.weight", d, D)
	}
	if c.DepformerWeightsPerStep {
		for s := 0; s < c.DepQ; s++ {
			ps := []Part{depIn(s)}
			for l := 0; l < L; l++ {
				p := fmt.Sprintf("depformer.layers.%d.", l)
				ps = append(ps,
					rows(p+"self_attn.in_proj_weight", []int{c.DepQ * 3 * d, d}, s*3*d, (s+1)*3*d),
					rows(p+"self_attn.out_proj.weight", []int{c.DepQ * d, d}, s*d, (s+1)*d))
				ps = append(ps, normParts(c.Norm, p+"norm1", d)...)
				ps = append(ps, normParts(c.Norm, p+"norm2", d)...)
				if c.DepformerLayerScale != nil {
					ps = append(ps, whole(p+"layer_scale_1.scale", d), whole(p+"layer_scale_2.scale", d))
				}
				ps = append(ps,
					whole(fmt.Sprintf("%sgating.%d.linear_in.weight", p, s), 2*dh, d),
					whole(fmt.Sprintf("%sgating.%d.linear_out.weight", p, s), d, dh))
			}
			ps = append(ps, whole(fmt.Sprintf("linears.%d.weight", s), c.Card, d))
			u := Unit{
				Name: fmt.Sprintf("dep.%d", s), Kind: KindDepStep, Index: s, Bytes: sumParts(ps), Runs: 1,
				MatParams: depMat, AttnDim: d, InDim: D, OutDim: c.Card, Launches: 12*L + 4, Parts: ps,
			}
			if s < depSteps {
				m.Units = append(m.Units, u)
			} else {
				m.Skipped = append(m.Skipped, u)
			}
		}
	} else if depSteps > 0 {
		// One shared depformer, run depSteps times per frame.
		var ps []Part
		n := 1
		if c.DepformerMultiLinear {
			n = depSteps
		}
		for s := 0; s < n; s++ {
			ps = append(ps, depIn(s))
		}
		for l := 0; l < L; l++ {
			p := fmt.Sprintf("depformer.layers.%d.", l)
			ps = append(ps, whole(p+"self_attn.in_proj_weight", 3*d, d), whole(p+"self_attn.out_proj.weight", d, d))
			ps = append(ps, normParts(c.Norm, p+"norm1", d)...)
			ps = append(ps, normParts(c.Norm, p+"norm2", d)...)
			if c.DepformerLayerScale != nil {
				ps = append(ps, whole(p+"layer_scale_1.scale", d), whole(p+"layer_scale_2.scale", d))
			}
			ps = append(ps, whole(p+"gating.linear_in.weight", 2*dh, d), whole(p+"gating.linear_out.weight", d, dh))
		}
		for s := 0; s < depSteps; s++ {
			ps = append(ps, whole(fmt.Sprintf("linears.%d.weight", s), c.Card, d))
		}
		m.Units = append(m.Units, Unit{
			Name: "depformer", Kind: KindDepformer, Bytes: sumParts(ps), Runs: depSteps,
			MatParams: depMat, AttnDim: d, InDim: D, OutDim: c.Card, Launches: 12*L + 4, Parts: ps,
		})
	}
	m.TableBytes = ElemBytes * (int64(c.NQ)*int64(c.Card+1)*int64(D) + int64(c.TextCard+1)*int64(D) +
		int64(c.DepQ-1)*int64(c.Card+1)*int64(d) + int64(c.TextCard+1)*int64(d))
	m.DepKVBytes = 2 * int64(c.DepQ) * int64(d) * 4 * int64(L)
	return m, nil
}

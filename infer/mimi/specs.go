package mimi

import (
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// WeightSpecs lists every tensor a Mimi checkpoint of this configuration
// holds (names and shapes of MimiModel.state_dict(), F32), with
// fan-in-scaled random amplitudes: weights.Random(WeightSpecs(cfg), seed)
// is a loadable model of the real size (benchmarks, tests).
func WeightSpecs(cfg *config.Mimi) ([]weights.Spec, error) {
	g, err := geometry(cfg)
	if err != nil {
		return nil, err
	}
	var specs []weights.Spec
	add := func(name string, std float32, shape ...int) {
		specs = append(specs, weights.Spec{Name: name, DType: weights.F32, Shape: shape, Std: std})
	}
	fanIn := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	conv := func(d convDesc) {
		fan := d.in / d.groups * d.kernel
		if d.transposed {
			fan = d.in / d.groups * d.kernel / d.stride
		}
		add(d.prefix+".weight", fanIn(fan), d.weightShape()...)
		if d.bias {
			add(d.prefix+".bias", 0.01, d.out)
		}
	}
	for _, enc := range []bool{true, false} {
		for _, s := range seanetPlan(&cfg.Seanet, enc) {
			switch s.kind {
			case stepConv, stepConvTr:
				conv(s.conv)
			case stepRes:
				for _, d := range s.block {
					conv(d)
				}
				if s.shortcut != nil {
					conv(*s.shortcut)
				}
			}
		}
	}
	in, dm, out := transformerDims(cfg)
	tc := transformerConfig(cfg)
	for _, p := range []string{"encoder_transformer", "decoder_transformer"} {
		if in != dm {
			add(p+".input_proj.weight", fanIn(in), dm, in)
		}
		for i := 0; i < tc.NumLayers; i++ {
			l := fmt.Sprintf("%s.transformer.layers.%d.", p, i)
			add(l+"self_attn.in_proj_weight", fanIn(dm), 3*dm, dm)
			add(l+"self_attn.out_proj.weight", fanIn(dm), dm, dm)
			for _, n := range []string{"norm1", "norm2"} {
				switch tc.Norm {
				case "rms_norm", "rms_norm_f32":
					add(l+n+".alpha", 0, 1, 1, dm)
				default:
					add(l+n+".weight", 0, dm)
					add(l+n+".bias", 0.01, dm)
				}
			}
			if tc.LayerScale {
				add(l+"layer_scale_1.scale", 0.01, dm)
				add(l+"layer_scale_2.scale", 0.01, dm)
			}
			if tc.Gating == "none" {
				add(l+"linear1.weight", fanIn(dm), tc.DimFeedforward, dm)
				add(l+"linear2.weight", fanIn(tc.DimFeedforward), dm, tc.DimFeedforward)
			} else {
				h := nn.GatingHidden(dm, tc.DimFeedforward)
				add(l+"gating.linear_in.weight", fanIn(dm), 2*h, dm)
				add(l+"gating.linear_out.weight", fanIn(h), dm, h)
			}
		}
		if out != dm {
			add(p+".output_projs.0.weight", fanIn(dm), out, dm)
		}
	}
	if g.resample > 1 {
		conv(downsampleDesc(cfg, g.resample))
		conv(upsampleDesc(cfg, g.resample))
	}
	q := &cfg.Quantizer
	for _, r := range []struct {
		name string
		n    int
	}{{"rvq_first", 1}, {"rvq_rest", q.NQ - 1}} {
		p := "quantizer." + r.name
		add(p+".input_proj.weight", fanIn(quantInDim(q)), q.Dimension, quantInDim(q), 1)
		add(p+".output_proj.weight", fanIn(q.Dimension), quantOutDim(q), q.Dimension, 1)
		for i := 0; i < r.n; i++ {
			c := fmt.Sprintf("%s.vq.layers.%d._codebook.", p, i)
			add(c+"_initialized", 0, 1)
			add(c+"cluster_usage", 0, q.Bins)
			add(c+"embedding_sum", 1, q.Bins, q.Dimension)
		}
	}
	return specs, nil
}

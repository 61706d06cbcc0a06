package mimi

import (
	"github.com/pp-offline/pp-offline/infer/config"
)

// FLOPsPerFrame is the arithmetic of coding one 80 ms frame of one stream,
// encode and decode, in the codec's weight products: every SEANet
// convolution, the down- and upsampling, and the two transformers' linear
// layers and projections, each multiply-add counted as 2 FLOPs. Attention's
// dot products, norms, activations and the quantizer are left out, so the
// figure is a lower bound of the codec's work (bench reports it, and
// scripts/bench-targets.sh divides it by the FMA peak for the fastest a
// codec step can be).
func FLOPsPerFrame(cfg *config.Mimi) (float64, error) {
	g, err := geometry(cfg)
	if err != nil {
		return 0, err
	}
	// conv returns the FLOPs of d over rate input rows a frame and its
	// output rows a frame.
	conv := func(d convDesc, rate float64) (flop, out float64) {
		perOut := 2 * float64(d.in/d.groups) * float64(d.kernel) // one output channel of one row
		if d.transposed {
			// Each input row scatters into stride output rows.
			return rate * float64(d.out) * perOut, rate * float64(d.stride)
		}
		out = rate / float64(d.stride)
		return out * float64(d.out) * perOut, out
	}
	seanet := func(plan []stepDesc, rate float64) (flop, out float64) {
		for _, s := range plan {
			switch s.kind {
			case stepConv, stepConvTr:
				f, r := conv(s.conv, rate)
				flop, rate = flop+f, r
			case stepRes:
				for _, d := range s.block {
					f, _ := conv(d, rate)
					flop += f
				}
				if s.shortcut != nil {
					f, _ := conv(*s.shortcut, rate)
					flop += f
				}
			}
		}
		return flop, rate
	}
	enc, rate := seanet(seanetPlan(&cfg.Seanet, true), float64(g.frameSize))
	dec, _ := seanet(seanetPlan(&cfg.Seanet, false), float64(g.resample))
	total := enc + dec + 2*transformerFLOPs(cfg)*rate
	if g.resample > 1 {
		down, _ := conv(downsampleDesc(cfg, g.resample), rate)
		up, _ := conv(upsampleDesc(cfg, g.resample), 1)
		total += down + up
	}
	return total, nil
}

// transformerFLOPs is one position of one of the codec's transformers
// through its projections and its layers' linear maps.
func transformerFLOPs(cfg *config.Mimi) float64 {
	in, dm, out := transformerDims(cfg)
	t := &cfg.Transformer
	var macs float64
	if in != dm {
		macs += float64(in * dm)
	}
	if out != dm {
		macs += float64(dm * out)
	}
	ffn := 2 * float64(dm*t.DimFeedforward) // linear1 and linear2
	if t.Gating != "none" {
		h := config.GatingHidden(dm, t.DimFeedforward)
		ffn = 3 * float64(dm*h) // the gate's [2·hidden, D] and [D, hidden]
	}
	macs += float64(t.NumLayers) * (4*float64(dm*dm) + ffn)
	return 2 * macs
}

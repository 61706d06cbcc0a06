package mimi

import (
	"fmt"
	"math"
	"strings"

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
	// The transformers' tensors as nn declares them (names spelled once).
	for _, p := range []string{"encoder_transformer", "decoder_transformer"} {
		refs, err := transformerTensors(cfg, p)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			add(r.Name, transformerStd(r), r.Shape...)
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

// transformerStd is the random amplitude of a transformer tensor:
// fan-in-scaled for a matrix, 0 (exactly 1) for a norm's weight or RMS
// alpha, 0.01 for biases and layer scales.
func transformerStd(r nn.TensorRef) float32 {
	switch {
	case strings.HasSuffix(r.Name, ".bias") || strings.HasSuffix(r.Name, ".scale"):
		return 0.01
	case len(r.Shape) == 2:
		return float32(1 / math.Sqrt(float64(r.Shape[1])))
	}
	return 0
}

// DeviceBytes is the device memory the codec holds on a device backend
// for streams streams (its SEANet and quantizer stay on the CPU): the two
// transformers' tensors as float32 (what a checkpoint stores) and each
// stream's key and value rings, reserved at the transformer's full
// capacity as newStage does.
func DeviceBytes(cfg *config.Mimi, streams int) (int64, error) {
	tr, err := nn.NewTransformer(transformerConfig(cfg))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range []string{"encoder_transformer", "decoder_transformer"} {
		refs, err := transformerTensors(cfg, p)
		if err != nil {
			return 0, err
		}
		for _, r := range refs {
			e := int64(4)
			for _, d := range r.Shape {
				e *= int64(d)
			}
			n += e
		}
		// K and V of every layer, float32, for each stream.
		n += int64(cfg.Transformer.NumLayers) * 2 * int64(tr.MaxCapacity()) * int64(tr.Cfg.NumHeads*tr.DHead) * 4 * int64(max(1, streams))
	}
	return n, nil
}

// StreamBytes bounds the memory of one encoder and one decoder stream's
// SEANet buffers (and the downsample's and upsample's) when they code
// frames frames a call: each stage keeps its input rows (the streaming
// history and a call's rows) and its output rows, sized by the largest
// call. The codec's memory per conversation beside its transformers'
// rings.
func StreamBytes(cfg *config.Mimi, frames int) (int64, error) {
	g, err := geometry(cfg)
	if err != nil {
		return 0, err
	}
	frames = max(1, frames)
	var floats int64
	// conv adds a stage of d on T input rows and returns its output rows.
	conv := func(d convDesc, T int) int {
		out := T/d.stride + 1
		if d.transposed {
			out = T * d.stride
		}
		floats += int64(T+(d.kernel-1)*d.dil+1)*int64(d.in) + int64(out)*int64(d.out)
		return out
	}
	walk := func(plan []stepDesc, T int) int {
		for _, s := range plan {
			switch s.kind {
			case stepConv, stepConvTr:
				T = conv(s.conv, T)
			case stepRes:
				n := T
				for _, b := range s.block {
					n = conv(b, n)
				}
				if s.shortcut != nil {
					conv(*s.shortcut, T)
				}
				T = n
			}
		}
		return T
	}
	steps := g.resample * frames
	walk(seanetPlan(&cfg.Seanet, true), g.frameSize*frames)
	walk(seanetPlan(&cfg.Seanet, false), steps)
	if g.resample > 1 {
		conv(downsampleDesc(cfg, g.resample), steps)
		conv(upsampleDesc(cfg, g.resample), frames)
	}
	return 4 * floats, nil
}

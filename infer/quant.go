package infer

import (
	"fmt"
	"time"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// quantizeAtLoad applies Options.Weights / BenchOptions.Weights: the LM's
// linear weights are quantized in RAM after loading (lm.QuantDType picks
// them). The blocks are new memory; the checkpoint's pages they replace
// stay mapped but are no longer read.
func quantizeAtLoad(log Logger, m *lm.Model, format string) error {
	if format == "" {
		return nil
	}
	dt, err := weights.ParseQuantFormat(format)
	if err != nil {
		return fmt.Errorf("--weights: %v", err)
	}
	t0 := time.Now()
	rep, err := m.QuantizeWeights(dt, ops.Parallel)
	if err != nil {
		return fmt.Errorf("--weights %s: %v", format, err)
	}
	if rep.Tensors == 0 {
		log.Infof("--weights %s: the checkpoint is already quantized (%d weights kept)", format, rep.Kept)
		return nil
	}
	log.Infof("quantized the LM to %s at load in %.1f s: %d tensors, %.2f GB of %s weights → %.2f GB of blocks (%.2f GB more RAM; a file from pp-offline quantize would be mapped instead)",
		format, time.Since(t0).Seconds(), rep.Tensors, float64(rep.SourceBytes)/1e9, sourceDType(m), float64(rep.Bytes)/1e9, float64(rep.Bytes)/1e9)
	return nil
}

func sourceDType(m *lm.Model) weights.DType { return m.TextEmb.DType }

// CheckWeights validates a --weights value ("" is valid: no quantization).
func CheckWeights(format string) error {
	if format == "" {
		return nil
	}
	_, err := weights.ParseQuantFormat(format)
	return err
}

package job

import (
	"fmt"
	"time"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// quantizeAtLoad applies Options.Quantize / BenchOptions.Quantize: the LM's
// linear weights are quantized in RAM after loading (lm.QuantDType picks
// them). The blocks are new memory; the checkpoint's pages they replace
// stay mapped but are no longer read.
func quantizeAtLoad(log Logger, m *lm.Model, format string, e *ops.Engine) error {
	if format == "" {
		return nil
	}
	dt, err := weights.ParseQuantFormat(format)
	if err != nil {
		return fmt.Errorf("--weights: %v", err)
	}
	t0 := time.Now()
	rep, err := m.QuantizeWeights(dt, e.Parallel)
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

// quantSizes is, for --weights format over the float tensors specs lists,
// the bytes of the blocks quantizing at load makes (new RAM, held beside
// the mapped checkpoint) and the bytes of the checkpoint they replace in
// use (saved: what a device no longer needs to hold). Both are 0 without
// --weights; tensors already quantized are left alone, as at load.
func quantSizes(format string, specs []weights.Spec) (blocks, saved int64) {
	dt, err := weights.ParseQuantFormat(format)
	if err != nil || format == "" {
		return 0, 0
	}
	for _, s := range specs {
		q := lm.QuantDType(s.Name, dt)
		if q == "" || s.DType.Quantized() || s.DType == q || len(s.Shape) == 0 {
			continue
		}
		b := q.StorageBytes(s.Shape)
		blocks += b
		saved += s.DType.StorageBytes(s.Shape) - b
	}
	return blocks, max(0, saved)
}

// checkpointSpecs lists the tensors of a checkpoint from its header (nil
// when it cannot be read: loading reports that).
func checkpointSpecs(path string) []weights.Spec {
	f, err := weights.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var specs []weights.Spec
	for _, n := range f.Names() {
		if t, err := f.Get(n); err == nil {
			specs = append(specs, weights.Spec{Name: n, DType: t.DType, Shape: t.Shape})
		}
	}
	return specs
}

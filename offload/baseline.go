package offload

import (
	"fmt"
	"strings"

	"github.com/pp-offline/pp-offline/infer/config"
)

// BaselineModule is one entry of the device map accelerate builds for the
// reference's LMModel.
type BaselineModule struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	OnGPU bool   `json:"on_gpu"`
	// Calls is the module's forward calls per frame; an offloaded module is
	// copied to the device at every call.
	Calls int `json:"calls"`
	// ReadBytes is what one call reads on the device (a step's slice for
	// the per-step depformer layers, nothing for an embedding gather).
	ReadBytes int64 `json:"read_bytes"`
	Launches  int   `json:"-"`
}

// Baseline models the reference's --cpu-offload: accelerate's
// infer_auto_device_map(no_split_module_classes=["StreamingTransformerLayer"])
// + dispatch_model. Modules are placed on the GPU in registration order until
// the next one does not fit (the largest layer is kept free for the copies);
// that module and all after it stay in host memory, and AlignDevicesHook
// copies each one's weights to the GPU, synchronously from pageable memory,
// at every forward call, with no prefetch. The reference's depformer_step
// runs all dep_q steps, and each depformer layer (holding every step's
// weights) is called once per step, so it is copied dep_q times per frame.
type Baseline struct {
	Modules      []BaselineModule `json:"modules"`
	DepSteps     int              `json:"dep_steps"`     // depformer steps the reference runs per frame
	GPUWeights   int64            `json:"gpu_weights"`   // weights the device map put on the GPU
	HostWeights  int64            `json:"host_weights"`  // weights left in host memory
	LargestLayer int64            `json:"largest_layer"` // kept free by infer_auto_device_map
	// KVNeeded is what the reference allocates after the map: its KV cache
	// (bf16, full context, batch) and the workspace.
	KVNeeded int64 `json:"kv_needed"`
	// OOM: the map leaves less than the largest layer (for the copies)
	// plus KVNeeded.
	OOM       bool    `json:"oom"`
	CopyBytes int64   `json:"copy_bytes"` // copied per frame
	CopyMs    float64 `json:"copy_ms"`
	ComputeMs float64 `json:"compute_ms"`
	FrameMs   float64 `json:"frame_ms"` // copies and computes in sequence
}

// Accelerate models the reference's --cpu-offload for lm's config at a
// device budget, with the same figures as the planner (pageable copies at
// H2DPageable).
func Accelerate(lm *LM, w Workload, fig Figures, gpuBudget int64) (*Baseline, error) {
	c := &lm.Cfg
	if c.Dim <= 0 || c.DepQ <= 0 {
		return nil, fmt.Errorf("the accelerate baseline needs the model config")
	}
	D, d := int64(c.Dim), int64(c.DepformerDim)
	B := int64(max(1, w.Batch))
	steps := c.DepQ
	b := &Baseline{DepSteps: steps}
	add := func(name string, bytes int64, calls int, read int64, launches int) {
		b.Modules = append(b.Modules, BaselineModule{Name: name, Bytes: bytes, Calls: calls, ReadBytes: read, Launches: launches})
	}
	var layer, head []Unit
	for _, u := range lm.Units {
		switch u.Kind {
		case KindLayer:
			layer = append(layer, u)
		case KindHead:
			head = append(head, u)
		}
	}
	normBytes := int64(ElemBytes) * D
	for i := 0; i < c.NQ; i++ {
		add(fmt.Sprintf("emb.%d", i), ElemBytes*int64(c.Card+1)*D, 1, 0, 1)
	}
	add("text_emb", ElemBytes*int64(c.TextCard+1)*D, 1, 0, 1)
	textLinear := ElemBytes * int64(c.TextCard) * D
	add("text_linear", textLinear, 1, textLinear, 1)
	for i, u := range layer {
		add(fmt.Sprintf("transformer.layers.%d", i), u.Bytes, 1, u.Bytes, u.Launches)
	}
	if len(head) > 0 {
		add("out_norm", head[0].Bytes-textLinear, 1, head[0].Bytes-textLinear, 1)
	} else {
		add("out_norm", normBytes, 1, normBytes, 1)
	}
	nIn := 1
	if c.DepformerMultiLinear {
		nIn = c.DepQ
	}
	for s := 0; s < nIn; s++ {
		calls := 1
		if nIn == 1 {
			calls = steps
		}
		add(fmt.Sprintf("depformer_in.%d", s), ElemBytes*d*D, calls, ElemBytes*d*D, 1)
	}
	for s := 0; s < c.DepQ-1; s++ {
		add(fmt.Sprintf("depformer_emb.%d", s), ElemBytes*int64(c.Card+1)*d, 1, 0, 1)
	}
	add("depformer_text_emb", ElemBytes*int64(c.TextCard+1)*d, 1, 0, 1)
	dh := int64(config.GatingHidden(c.DepformerDim, c.DepDimFeedforward()))
	mult := int64(1)
	if c.DepformerWeightsPerStep {
		mult = int64(c.DepQ)
	}
	depNorms := 2 * normSize(c.Norm, c.DepformerDim)
	if c.DepformerLayerScale != nil {
		depNorms += 2 * ElemBytes * d
	}
	perStep := ElemBytes * (4*d*d + 3*dh*d)
	for l := 0; l < c.DepformerNumLayers; l++ {
		add(fmt.Sprintf("depformer.layers.%d", l), mult*perStep+depNorms, steps, perStep+depNorms, 12)
	}
	outNames := outputModules(lm)
	for s := 0; s < c.DepQ; s++ {
		add(outNames[s], ElemBytes*int64(c.Card)*d, 1, ElemBytes*int64(c.Card)*d, 1)
	}

	// infer_auto_device_map: the main device keeps room for the largest
	// module, modules go in order until one does not fit, then everything
	// after it goes to the host.
	for _, m := range b.Modules {
		b.LargestLayer = max(b.LargestLayer, m.Bytes)
	}
	room := gpuBudget - b.LargestLayer
	full := false
	for i := range b.Modules {
		m := &b.Modules[i]
		if !full && b.GPUWeights+m.Bytes <= room {
			m.OnGPU = true
			b.GPUWeights += m.Bytes
		} else {
			full = true
			b.HostWeights += m.Bytes
		}
	}
	ctx := int64(c.Context)
	b.KVNeeded = B*int64(c.NumLayers)*2*ctx*D*ElemBytes + DefaultWorkspace
	reserve := int64(0)
	if b.HostWeights > 0 {
		reserve = b.LargestLayer
	}
	b.OOM = b.GPUWeights+reserve+b.KVNeeded > gpuBudget

	fill := 1.0
	if w.Positions > 0 && w.Positions < c.Context {
		fill = float64(w.Positions) / float64(c.Context)
	}
	kvRead := float64(B) * fill * float64(2*ctx*D*ElemBytes)
	T := float64(max(1, w.Prefill))
	for _, m := range b.Modules {
		read := float64(m.ReadBytes)
		if strings.HasPrefix(m.Name, "transformer.layers.") {
			read += kvRead
		}
		// Matrix-product FLOPs: 2 per weight element read, per position.
		flops := 2 * float64(B) * T * float64(m.ReadBytes) / ElemBytes
		t := max(read/(fig.GPUBandwidth.Value*1e9), flops/(fig.GPUCompute.Value*1e12))*1e3 +
			float64(m.Launches)*fig.GPULaunch.Value/1e3
		b.ComputeMs += float64(m.Calls) * t
		if !m.OnGPU {
			b.CopyBytes += int64(m.Calls) * m.Bytes
			b.CopyMs += float64(m.Calls) * (float64(m.Bytes)/(fig.H2DPageable.Value*1e9)*1e3 + fig.Sync.Value/1e3)
		}
	}
	b.FrameMs = b.ComputeMs + b.CopyMs
	return b, nil
}

// outputModules names the depformer's dep_q output projections as modules
// of the checkpoint: each step unit's last tensor (its output linear, as
// the LM declares it) without ".weight". A shared depformer (a shape the LM
// does not run) has no per-step units to name them from.
func outputModules(lm *LM) []string {
	names := make([]string, lm.Cfg.DepQ)
	for s := range names {
		names[s] = fmt.Sprintf("depformer output %d", s)
	}
	for _, u := range append(append([]Unit(nil), lm.Units...), lm.Skipped...) {
		if u.Kind == KindDepStep && u.Index < len(names) && len(u.Parts) > 0 {
			names[u.Index] = strings.TrimSuffix(u.Parts[len(u.Parts)-1].Tensor, ".weight")
		}
	}
	return names
}

package offload

import (
	"fmt"
	"math"
)

// Placement is where a unit's weights live and where it is computed.
type Placement int

const (
	// Resident: weights uploaded once, kept in device memory, computed on
	// the device.
	Resident Placement = iota
	// Streamed: weights kept in pinned host memory and copied into one of
	// the device's staging slots ahead of use (double-buffered, async, each
	// unit at most once per frame), computed on the device.
	Streamed
	// CPU: weights kept in host memory and computed on the CPU; only
	// activations cross PCIe. Its KV cache lives in host memory too.
	CPU
)

// Placements lists the three placements.
var Placements = []Placement{Resident, Streamed, CPU}

func (p Placement) String() string {
	switch p {
	case Resident:
		return "resident"
	case Streamed:
		return "streamed"
	case CPU:
		return "cpu"
	}
	return fmt.Sprintf("placement(%d)", int(p))
}

// MarshalText writes the placement's name (JSON plans).
func (p Placement) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a placement's name.
func (p *Placement) UnmarshalText(b []byte) error {
	for _, q := range Placements {
		if q.String() == string(b) {
			*p = q
			return nil
		}
	}
	return fmt.Errorf("unknown placement %q", b)
}

// OnDevice reports whether a unit so placed is computed on the device.
func (p Placement) OnDevice() bool { return p != CPU }

// Source says where a figure of the cost model came from.
type Source string

const (
	FromDefault  Source = "default"
	FromDeclared Source = "declared"
	FromMeasured Source = "measured"
)

// Figure is one number of the cost model with its provenance.
type Figure struct {
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Source Source  `json:"source"`
	// Note says what a default stands for, which flag declared it, or how
	// it was measured.
	Note string `json:"note,omitempty"`
}

// Figures are the machine figures the cost model runs on. Bandwidths are in
// GB/s (10⁹ bytes per second), compute in TFLOP/s, latencies in µs.
type Figures struct {
	GPUBandwidth Figure `json:"gpu_bandwidth"` // device memory, GB/s
	GPUCompute   Figure `json:"gpu_compute"`   // bf16 tensor throughput, TFLOP/s
	GPULaunch    Figure `json:"gpu_launch"`    // per kernel launch, µs
	H2DBandwidth Figure `json:"h2d_bandwidth"` // pinned host → device, GB/s
	H2DPageable  Figure `json:"h2d_pageable"`  // pageable host → device (the accelerate baseline), GB/s
	CPUBandwidth Figure `json:"cpu_bandwidth"` // host memory as the CPU kernels read weights, GB/s
	CPUCompute   Figure `json:"cpu_compute"`   // TFLOP/s of the CPU kernels
	Sync         Figure `json:"sync"`          // one host↔device hand-over of activations, µs
}

// DefaultFigures are the figures of an H200 SXM on PCIe gen5 x16 with a
// server host, taken from data sheets (not measured): 4.8 TB/s HBM3e,
// 989 TFLOP/s dense bf16, ~55 GB/s achieved of PCIe gen5 x16's 64 GB/s for
// pinned copies (about half that for pageable ones), and a conservative
// 50 GB/s / 1 TFLOP/s for the CPU kernels.
func DefaultFigures() Figures {
	return Figures{
		GPUBandwidth: Figure{4800, "GB/s", FromDefault, "H200 SXM HBM3e spec"},
		GPUCompute:   Figure{989, "TFLOP/s", FromDefault, "H200 SXM dense bf16 spec"},
		GPULaunch:    Figure{4, "µs/kernel", FromDefault, "typical CUDA launch overhead"},
		H2DBandwidth: Figure{55, "GB/s", FromDefault, "PCIe gen5 x16, pinned (64 GB/s raw)"},
		H2DPageable:  Figure{25, "GB/s", FromDefault, "PCIe gen5 x16, pageable (accelerate's copies)"},
		CPUBandwidth: Figure{50, "GB/s", FromDefault, "conservative server host, CPU kernels"},
		CPUCompute:   Figure{1, "TFLOP/s", FromDefault, "conservative server host, CPU kernels"},
		Sync:         Figure{20, "µs", FromDefault, "stream sync + small copy"},
	}
}

// NamedFigure pairs a figure with its key and label.
type NamedFigure struct {
	Key, Label string
	*Figure
}

// List returns the figures in a stable order, with labels for printing.
func (f *Figures) List() []NamedFigure {
	return []NamedFigure{
		{"gpu_bandwidth", "GPU memory bandwidth", &f.GPUBandwidth},
		{"gpu_compute", "GPU compute (bf16)", &f.GPUCompute},
		{"gpu_launch", "GPU kernel launch", &f.GPULaunch},
		{"h2d_bandwidth", "host→device, pinned", &f.H2DBandwidth},
		{"h2d_pageable", "host→device, pageable", &f.H2DPageable},
		{"cpu_bandwidth", "CPU memory bandwidth", &f.CPUBandwidth},
		{"cpu_compute", "CPU compute", &f.CPUCompute},
		{"sync", "host↔device hand-over", &f.Sync},
	}
}

// Validate checks that every figure is positive and finite.
func (f *Figures) Validate() error {
	for _, nf := range f.List() {
		if !(nf.Value > 0) || math.IsInf(nf.Value, 0) {
			return fmt.Errorf("figure %s must be a positive number, got %v", nf.Key, nf.Value)
		}
	}
	return nil
}

// Workload is what one frame computes.
type Workload struct {
	// Batch is the number of independent streams (≥ 1).
	Batch int `json:"batch"`
	// Prefill is 0 for decode (one position per frame: memory-bound) or
	// the number of positions T one pass processes (compute-bound for
	// large T); "frame" then means one pass.
	Prefill int `json:"prefill"`
	// Positions is the attention span read per position (0: the full
	// context, the steady state of a long run).
	Positions int `json:"positions"`
}

func (w Workload) positions() int { return max(1, w.Prefill) }

// FrameMs is the real-time budget of one frame (12.5 Hz).
const FrameMs = 80.0

// unitCost is a unit's durations, in ms, per placement.
type unitCost struct {
	gpu, cpu  float64 // compute, without hand-overs
	xfer      float64 // streamed copy, pinned
	crossIn   float64 // hand-over of the input activations
	crossOut  float64 // hand-over of logits for host-side sampling
	samples   bool    // the unit's output is sampled on the host
	readBytes int64
}

func (p *Problem) kvFill() float64 {
	ctx := p.LM.Cfg.Context
	if p.Work.Positions <= 0 || ctx <= 0 || p.Work.Positions >= ctx {
		return 1
	}
	return float64(p.Work.Positions) / float64(ctx)
}

func (p *Problem) costOf(u *Unit) unitCost {
	f := &p.Fig
	B := float64(max(1, p.Work.Batch))
	T := float64(p.Work.positions())
	fill := p.kvFill()
	r := float64(max(1, u.Runs))
	kvRead := B * fill * float64(u.KVBytes)
	read := r*float64(u.Bytes) + kvRead
	flops := r*B*T*2*float64(u.MatParams) + B*T*fill*float64(u.KVBytes)/2
	ms := func(bytes, gbps float64) float64 { return bytes / (gbps * 1e9) * 1e3 }
	c := unitCost{readBytes: int64(read)}
	c.gpu = math.Max(ms(read, f.GPUBandwidth.Value), flops/(f.GPUCompute.Value*1e12)*1e3) +
		r*float64(u.Launches)*f.GPULaunch.Value/1e3
	c.cpu = math.Max(ms(read, f.CPUBandwidth.Value), flops/(f.CPUCompute.Value*1e12)*1e3)
	c.xfer = ms(float64(u.Bytes), f.H2DBandwidth.Value)
	sync := f.Sync.Value / 1e3
	c.crossIn = sync + ms(B*T*float64(u.InDim)*4, f.H2DBandwidth.Value)
	c.samples = u.Kind != KindLayer
	if c.samples {
		c.crossOut = r * (sync + ms(B*T*float64(u.OutDim)*4, f.H2DBandwidth.Value))
	}
	return c
}

// computeMs is unit i's duration in the compute chain given its placement
// and the side (device or host) the previous unit left its output on. The
// frame's input (the embeddings, gathered on the host) starts on the host;
// the head's and the depformer steps' logits are sampled on the host.
func (c *unitCost) computeMs(where Placement, prevOnDevice bool) float64 {
	t := c.cpu
	if where.OnDevice() {
		t = c.gpu
		if c.samples {
			t += c.crossOut
		}
	}
	if where.OnDevice() != prevOnDevice {
		t += c.crossIn
	}
	return t
}

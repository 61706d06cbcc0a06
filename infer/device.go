package infer

import (
	"fmt"
	"os"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/offload"
)

// GPUOptions configure Device "cuda".
type GPUOptions struct {
	// Memory caps the device memory pp-offline allocates (0: the free
	// memory): --gpu-memory.
	Memory int64
	// HostMemory is the offload plan's host budget (0: unlimited).
	HostMemory int64
	// Offload runs the LM through an offload plan (--cpu-offload): the
	// planner places each unit resident, streamed or on the CPU for the
	// device memory; otherwise the whole model must fit, which is checked
	// before loading.
	Offload bool
	// ComputeDType is the device's compute dtype ("f32" or "bf16"; "": the
	// CPU's setting).
	ComputeDType string
}

// The GPU's constructor and free memory (tests swap in the dry driver).
var (
	newGPU        = cuda.New
	gpuFreeMemory = cuda.FreeMemory
)

// CUDAAvailable reports whether a usable GPU and its driver exist.
func CUDAAvailable() bool { return cuda.Available() == nil }

// CUDAUnavailable says why there is no usable GPU (nil when there is one).
func CUDAUnavailable() error { return cuda.Available() }

// jobBackend is what a job computes on.
type jobBackend interface {
	backend.Backend
	Close()
}

// deviceBackend is a job's backend with what the device side needs to
// report.
type deviceBackend struct {
	jobBackend
	gpu  *cuda.CUDA
	cpu  *cpu.CPU
	plan *offload.Plan
}

func (d *deviceBackend) Close() {
	d.jobBackend.Close()
	if d.gpu != nil && d.cpu != nil {
		d.cpu.Close()
	}
}

// newBackend is the backend of a job: the CPU's, or Device "cuda"'s (with
// the size check or the offload plan of o.GPU).
func newBackend(o Options) (*deviceBackend, error) {
	c, err := cpu.New(cpu.Options{Threads: o.Threads})
	if err != nil {
		return nil, err
	}
	if o.Device != "cuda" {
		return &deviceBackend{jobBackend: c, cpu: c}, nil
	}
	g, plan, err := newCUDA(o, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &deviceBackend{jobBackend: g, gpu: g, cpu: c, plan: plan}, nil
}

func newCUDA(o Options, c *cpu.CPU) (*cuda.CUDA, *offload.Plan, error) {
	cfg := o.Config
	if cfg == nil {
		cfg = config.Default()
	}
	dt := o.GPU.ComputeDType
	if dt == "" {
		dt = c.Engine().ComputeDType()
	}
	co := cuda.Options{Memory: o.GPU.Memory, ComputeDType: dt, CPU: c}
	var plan *offload.Plan
	if o.GPU.Offload {
		// The plan is made for the device budget before anything is
		// allocated: the limit the backend will enforce.
		budget := o.GPU.Memory
		if budget <= 0 {
			free, err := gpuFreeMemory()
			if err != nil {
				return nil, nil, err
			}
			budget = free
		}
		units, err := lm.Units(&cfg.LM, offload.DefaultDepSteps(&cfg.LM))
		if err != nil {
			return nil, nil, fmt.Errorf("offload: %w", err)
		}
		p := offload.NewProblem(units, offload.Workload{Batch: max(1, o.BatchSize)}, offload.DefaultFigures(), budget, o.GPU.HostMemory)
		if plan, err = p.Solve(); err != nil {
			return nil, nil, fmt.Errorf("offload: %w", err)
		}
		co.Place = PlacementOf(plan)
		co.Stream = true
		co.SlotBytes = largestStreamed(plan)
		// Resident weights get what the plan gives them; the rest of the
		// budget stays for what the plan reserved (staging, KV cache,
		// workspace), and a resident weight past it (Mimi's transformers
		// are not in the plan) is streamed instead.
		m := plan.Memory
		co.ResidentLimit = max(budget-(m.GPUTotal-m.GPUResident), 1)
	}
	g, err := newGPU(co)
	if err != nil {
		return nil, nil, err
	}
	if !o.GPU.Offload {
		if err := checkFits(o, cfg, g); err != nil {
			g.Close()
			return nil, nil, err
		}
	}
	return g, plan, nil
}

// PlacementOf maps each tensor of a plan's units to the unit's placement
// (a tensor split over several units, as the depformer's per-step rows,
// takes its first unit's); tensors of no unit (the Mimi transformers,
// tables) are resident.
func PlacementOf(plan *offload.Plan) func(name string) offload.Placement {
	m := map[string]offload.Placement{}
	for i, u := range plan.Units() {
		for _, p := range u.Parts {
			if _, ok := m[p.Tensor]; !ok {
				m[p.Tensor] = plan.Where[i]
			}
		}
	}
	return func(name string) offload.Placement {
		if w, ok := m[name]; ok {
			return w
		}
		return offload.Resident
	}
}

func largestStreamed(plan *offload.Plan) int64 {
	var n int64
	for i, u := range plan.Units() {
		if plan.Where[i] != offload.Streamed {
			continue
		}
		for _, p := range u.Parts {
			n = max(n, p.Bytes())
		}
	}
	return n
}

// Fits is the size check of a fully resident job: the LM's weights (the
// checkpoint's size), its KV cache for every conversation of the batch
// (float32 keys and values over the context) and a workspace, against
// the device budget.
type Fits struct {
	Weights, KV, Workspace, Budget int64
}

// Need is the device memory the job needs.
func (f Fits) Need() int64 { return f.Weights + f.KV + f.Workspace }

// Error is the message of a job that does not fit ("" when it fits).
func (f Fits) Error() string {
	if f.Need() <= f.Budget {
		return ""
	}
	return fmt.Sprintf("the model needs %s of device memory (weights %s, KV cache %s, workspace %s) but %s is available: run with --cpu-offload to split it between the GPU and host memory (see pp-offline plan)",
		offload.FormatSize(f.Need()), offload.FormatSize(f.Weights), offload.FormatSize(f.KV), offload.FormatSize(f.Workspace), offload.FormatSize(f.Budget))
}

// FitsFor computes the size check for a checkpoint of weightBytes.
func FitsFor(cfg *config.Config, weightBytes int64, batch int, budget int64) Fits {
	c := &cfg.LM
	kv := 2 * 4 * int64(c.Dim) * int64(c.NumLayers) * int64(c.Context) * int64(max(1, batch))
	return Fits{Weights: weightBytes, KV: kv, Workspace: offload.DefaultWorkspace, Budget: budget}
}

func checkFits(o Options, cfg *config.Config, g *cuda.CUDA) error {
	var n int64
	for _, p := range []string{o.MoshiWeight, o.MimiWeight} {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		n += st.Size()
	}
	_, _, limit := g.Memory()
	if msg := FitsFor(cfg, n, o.BatchSize, limit).Error(); msg != "" {
		return fmt.Errorf("--device cuda: %s", msg)
	}
	return nil
}

// deviceFailure turns a device backend's failure inside an op (the Backend
// interface has no error results: the CUDA backend panics with a
// cuda.Failure) into the job's error.
func deviceFailure(err *error) {
	if r := recover(); r != nil {
		if f, ok := r.(*cuda.Failure); ok {
			*err = f
			return
		}
		panic(r)
	}
}

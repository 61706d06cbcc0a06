package infer

import (
	"fmt"
	"os"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/weights"
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

// placeOnGPU starts executing the plan of a --cpu-offload GPU job: the
// offload runtime on the backend's device (resident units uploaded,
// streamed ones copied ahead of use on its copy stream), the backend
// queued on the runtime's compute stream so the runtime's fences order
// its kernels. Nil without a plan.
func placeOnGPU(be *deviceBackend, model *lm.Model, log Logger) (*lm.Placed, error) {
	if be.gpu == nil || be.plan == nil {
		return nil, nil
	}
	placed, err := lm.NewPlaced(model, be.plan, be.gpu.OffloadDevice())
	if err != nil {
		return nil, err
	}
	rt := placed.Runtime()
	rt.DeviceCompute = true
	if err := be.gpu.UseRuntimeStream(rt.ComputeStream()); err != nil {
		placed.Close()
		return nil, err
	}
	m := be.plan.Memory
	log.Infof("offload plan for the GPU (%s): %s; device: %s resident, %s staging, %s KV and workspace",
		offload.FormatSize(placed.Device().Budget()), be.plan.Summary(), offload.FormatSize(m.GPUResident), offload.FormatSize(m.GPUStaging), offload.FormatSize(m.GPUKV+m.GPUDepKV+m.GPUWorkspace))
	return placed, nil
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
		units, err := lm.UnitsOf(&cfg.LM, offload.DefaultDepSteps(&cfg.LM), storedDTypes(o))
		if err != nil {
			return nil, nil, fmt.Errorf("offload: %w", err)
		}
		if plan, err = planForGPU(units, max(1, o.BatchSize), budget, o.GPU.HostMemory); err != nil {
			return nil, nil, err
		}
		// Units come bound to their memory from the plan's runtime
		// (lm.Placed on OffloadDevice): device units at Weight.Dev, CPU
		// units with Weight.OnCPU, whose products the backend runs on c.
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

// storedDTypes is the block format each LM tensor of the job will be held
// in, for sizing the offload plan before anything is loaded: a quantized
// checkpoint's own (read from its header), else what --weights makes of
// it; nil (all bf16) otherwise, and when the file cannot be read (loading
// reports that).
func storedDTypes(o Options) func(tensor string) weights.DType {
	dt := map[string]weights.DType{}
	for _, s := range checkpointSpecs(o.MoshiWeight) {
		if s.DType.Quantized() {
			dt[s.Name] = s.DType
		}
	}
	if len(dt) > 0 {
		return func(n string) weights.DType { return dt[n] }
	}
	if format, err := weights.ParseQuantFormat(o.Weights); err == nil {
		return lm.StoredAs(format)
	}
	return nil
}

// planForGPU solves the offload plan for a GPU budget. The backend keeps
// every temporal layer's KV cache on the device (attention runs there for
// CPU units too), which the planner counts in host memory for CPU layers:
// so the budget given to the planner is lowered by that KV until the plan
// and its KV fit the device.
func planForGPU(units *offload.LM, batch int, budget, host int64) (*offload.Plan, error) {
	planned := budget
	for try := 0; ; try++ {
		plan, err := offload.NewProblem(units, offload.Workload{Batch: batch}, offload.DefaultFigures(), planned, host).Solve()
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		var extra int64
		for i, u := range plan.Units() {
			if plan.Where[i] == offload.CPU {
				extra += u.KVBytes * int64(batch)
			}
		}
		if plan.Memory.GPUTotal+extra <= budget || try == 4 {
			if plan.Memory.GPUTotal+extra > budget {
				return nil, fmt.Errorf("offload: no plan leaves room on the device for the KV cache of the layers run on the CPU (%s more than %s)", offload.FormatSize(plan.Memory.GPUTotal+extra-budget), offload.FormatSize(budget))
			}
			return plan, nil
		}
		planned = budget - extra
	}
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
	_, saved := quantSizes(o.Weights, checkpointSpecs(o.MoshiWeight))
	n -= saved
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

package job

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// DeviceOptions say where a job computes, as the flags give it: the only
// input that turns --device, --cpu-offload, --gpu-memory, --threads,
// --compute-dtype, --kv-dtype and PP_OFFLINE_KERNEL into behaviour
// (OpenDevice).
type DeviceOptions struct {
	// Name is --device: "auto", "cpu" (""), "cuda", "cuda:N" or "sim".
	Name string
	// CPUOffload is --cpu-offload: on a GPU the LM runs through an offload
	// plan (each unit resident, streamed or on the CPU for the device
	// memory); otherwise the whole model must fit, checked before loading.
	CPUOffload bool
	// Threads, Kernel and ComputeDType are the CPU backend's (0 / "": all
	// usable cores, the best kernel variant, f32). ComputeDType is the
	// GPU's too.
	Threads      int
	Kernel       string
	ComputeDType string
	// KVDType is what the LM's KV cache stores on the CPU backend: "f32"
	// ("", exact) or "bf16" (keys and values rounded to bf16: half the
	// memory and half the attention's reads; outputs differ from the
	// parity path). The codec's transformers keep float32 ones; the GPU
	// has only float32 ones.
	KVDType string
	// Offload sizes the device an offload plan is made for.
	Offload OffloadOptions

	kind     DeviceKind // set by Resolve
	resolved bool
}

// Resolve fixes the kind of device (ResolveDevice, with its log lines)
// once: a resolved DeviceOptions resolves to itself, silently.
func (o DeviceOptions) Resolve(log Logger) (DeviceOptions, error) {
	if o.resolved {
		return o, nil
	}
	if log == nil {
		log = nopLog{}
	}
	k, err := ResolveDevice(o, log)
	if err != nil {
		return o, err
	}
	o.kind, o.resolved = k, true
	return o, nil
}

// Kind is the resolved kind (DeviceCPU before Resolve).
func (o DeviceOptions) Kind() DeviceKind { return o.kind }

// OffloadOptions size the device of an offload plan: the GPU's (with
// --cpu-offload) or the simulated device's. One planner path serves both
// (planUnits).
type OffloadOptions struct {
	// Memory is the device memory in bytes: on a GPU a cap on what
	// pp-offline allocates (0: the free memory); on the simulated device
	// its size (negative: DefaultSimMemory).
	Memory int64
	// HostMemory is the plan's host budget (0: unlimited).
	HostMemory int64
	// Workspace is the device memory kept for activations whenever a unit
	// runs on the device (negative: offload.DefaultWorkspace; the GPU
	// always uses the default).
	Workspace int64
	// Figures are the machine figures the plan uses (nil:
	// offload.DefaultFigures).
	Figures *offload.Figures
	// Verify makes the simulated device's runtime check at every release
	// that the unit's device bytes still equal the host bytes.
	Verify bool
}

// DefaultSimMemory is the simulated device's memory when none is given: an
// H200's 141 GB, the device offload.DefaultFigures describe.
const DefaultSimMemory = 141_000_000_000

// DeviceKind is what a job computes on.
type DeviceKind int

const (
	DeviceCPU  DeviceKind = iota // the CPU backend
	DeviceCUDA                   // the CUDA backend (its convolutions on the CPU)
	DeviceSim                    // the CPU, the LM through an offload plan on a simulated device
)

// String is the kind's --device name.
func (k DeviceKind) String() string {
	switch k {
	case DeviceCUDA:
		return "cuda"
	case DeviceSim:
		return "sim"
	}
	return "cpu"
}

// The GPU's constructor and free memory (tests swap in the dry driver).
var (
	newGPU        = cuda.New
	gpuFreeMemory = cuda.FreeMemory
	gpuAvailable  = cuda.Available
)

// CUDAAvailable reports whether a usable GPU and its driver exist.
func CUDAAvailable() bool { return cuda.Available() == nil }

// CheckDeviceOptions checks the values of o without opening anything: a
// bad --device, --compute-dtype, --threads or kernel name is a usage error
// the caller reports before any file is read.
func CheckDeviceOptions(o DeviceOptions) error {
	if _, ok := deviceNames[o.Name]; !ok && !strings.HasPrefix(o.Name, "cuda:") {
		return fmt.Errorf("--device must be auto, cpu, cuda or sim, not %q", o.Name)
	}
	if o.Threads < 0 {
		return fmt.Errorf("--threads must be positive (or 0: all cores), not %d", o.Threads)
	}
	if _, err := ops.ParseComputeDType(o.ComputeDType); o.ComputeDType != "" && err != nil {
		return fmt.Errorf("--compute-dtype: %v", err)
	}
	if _, err := cpu.ParseKVDType(o.KVDType); err != nil {
		return fmt.Errorf("--kv-dtype must be f32 or bf16, not %q", o.KVDType)
	}
	if o.Kernel != "" && !slices.Contains(ops.KernelNames(), o.Kernel) {
		return fmt.Errorf("PP_OFFLINE_KERNEL=%s: unknown or unsupported here (have %s)", o.Kernel, strings.Join(ops.KernelNames(), ", "))
	}
	return nil
}

// KVElemBytes is the bytes of one key or value element of the LM's KV
// cache that o asks for: 2 with --kv-dtype bf16, else 4.
func (o DeviceOptions) KVElemBytes() int {
	if bf16, _ := cpu.ParseKVDType(o.KVDType); bf16 {
		return 2
	}
	return 4
}

var deviceNames = map[string]DeviceKind{"": DeviceCPU, "cpu": DeviceCPU, "auto": DeviceCPU, "cuda": DeviceCUDA, "sim": DeviceSim}

// ResolveDevice picks the kind: auto takes a usable GPU, else the CPU with
// one log line; cuda without one is an error, except with --cpu-offload,
// which says so in one line and runs on the CPU.
func ResolveDevice(o DeviceOptions, log Logger) (DeviceKind, error) {
	if err := CheckDeviceOptions(o); err != nil {
		return 0, err
	}
	name := o.Name
	if strings.HasPrefix(name, "cuda:") {
		name = "cuda"
	}
	switch name {
	case "sim":
		if o.CPUOffload {
			log.Infof("--cpu-offload: planning for the simulated device's free memory")
		}
		return DeviceSim, nil
	case "auto":
		why := gpuAvailable()
		if why == nil {
			return DeviceCUDA, nil
		}
		if o.CPUOffload {
			log.Infof("--cpu-offload: no usable GPU (%v): running on the CPU", why)
		} else {
			log.Infof("device: no usable GPU (%v): running on the CPU", why)
		}
		return DeviceCPU, nil
	case "cuda":
		if why := gpuAvailable(); why != nil {
			if o.CPUOffload {
				log.Infof("--cpu-offload: no usable GPU (%v): running on the CPU", why)
				return DeviceCPU, nil
			}
			return 0, fmt.Errorf("--device cuda: no usable GPU: %v", why)
		}
		return DeviceCUDA, nil
	}
	if o.CPUOffload {
		log.Infof("--cpu-offload has no effect with --device cpu")
	}
	return DeviceCPU, nil
}

// Device is where a job computes, opened once from DeviceOptions: its
// backend, the CPU engine beside it, the offload plan when there is one,
// and what closing it releases. Everything that depends on the device kind
// asks the Device.
type Device struct {
	Kind DeviceKind
	o    DeviceOptions
	cpu  *cpu.CPU
	// codec is the codec's CPU backend: cpu, or one on cpu's engine that
	// keeps float32 rings when cpu's are bf16 (--kv-dtype).
	codec *cpu.CPU
	gpu   *cuda.CUDA
	plan  *offload.Plan // the GPU's, made before loading (--cpu-offload)

	placed *lm.Placed // the LM's offload executor once placed
	log    Logger
}

// JobShape is what sizing a device needs to know of the job before any
// weight is loaded.
type JobShape struct {
	Config      *config.Config
	BatchSize   int
	MoshiWeight string // "" for random weights (bench, tune)
	MimiWeight  string
	Quantize    string // --weights: the LM's block format at load
	// PromptStates is the memory the job's prompt cache may hold: its
	// snapshots' KV rings, which live in the backend's memory (on a GPU,
	// device memory beside the conversations' own rings).
	PromptStates int64
}

// OpenDevice opens the device o names (resolved first if it is not): the
// CPU backend always (the codec's convolutions and an offload plan's CPU
// units run on it), the GPU and its size check or offload plan for
// DeviceCUDA.
func OpenDevice(o DeviceOptions, job JobShape, log Logger) (*Device, error) {
	if log == nil {
		log = nopLog{}
	}
	o, err := o.Resolve(log)
	if err != nil {
		return nil, err
	}
	k := o.kind
	kvBF16, _ := cpu.ParseKVDType(o.KVDType) // checked by Resolve
	if kvBF16 && k == DeviceCUDA {
		return nil, fmt.Errorf("--kv-dtype bf16 is for the CPU backend (the GPU's KV cache is float32): use --device cpu, or --kv-dtype f32")
	}
	c, err := cpu.New(cpu.Options{Threads: o.Threads, Kernel: o.Kernel, ComputeDType: o.ComputeDType, KVDType: o.KVDType})
	if err != nil {
		return nil, err
	}
	d := &Device{Kind: k, o: o, cpu: c, codec: c, log: log}
	if e := c.Engine(); e.ComputeDType() == "bf16" {
		log.Infof("compute dtype bf16 (kernel %s): outputs differ from the f32 parity path", e.BF16KernelName())
	}
	if kvBF16 {
		d.codec = c.WithF32Rings()
		log.Infof("KV cache bf16: the LM's keys and values rounded to bf16 (half the memory and the attention's reads); outputs differ from the f32 parity path")
	}
	if k != DeviceCUDA {
		return d, nil
	}
	if d.gpu, d.plan, err = openCUDA(o, job, c); err != nil {
		c.Close()
		return nil, err
	}
	return d, nil
}

// Backend is what the models compute on.
func (d *Device) Backend() backend.Backend {
	if d.gpu != nil {
		return d.gpu
	}
	return d.cpu
}

// CodecBackend is what the codec computes on: the backend, except that on
// the CPU its transformers' KV rings are float32 whatever --kv-dtype says.
func (d *Device) CodecBackend() backend.Backend {
	if d.gpu != nil {
		return d.gpu
	}
	return d.codec
}

// Host is the CPU engine beside the backend (the codec's convolutions).
func (d *Device) Host() *ops.Engine { return d.cpu.Engine() }

// CPU is the CPU backend (the backend itself unless on a GPU).
func (d *Device) CPU() *cpu.CPU { return d.cpu }

// GPU is the CUDA backend (nil unless DeviceCUDA).
func (d *Device) GPU() *cuda.CUDA { return d.gpu }

// Plan is the offload plan: the GPU's, or the simulated device's once
// Place has made it (nil without one).
func (d *Device) Plan() *offload.Plan {
	if d.placed != nil {
		return d.placed.Plan()
	}
	return d.plan
}

// Name describes the backend for a log line.
func (d *Device) Name() string { return d.Backend().Name() }

// Place starts the LM's offload executor where the device has a plan (the
// simulated device, a --cpu-offload GPU) and returns the Weights the LM
// engine runs on: nil (the model's own) without a plan.
func (d *Device) Place(model *lm.Model, batch int) (lm.Weights, error) {
	switch {
	case d.Kind == DeviceSim:
		mem := d.o.Offload.Memory
		if mem < 0 {
			mem = DefaultSimMemory
		}
		dev := offload.NewSimDevice(mem)
		units, err := lm.UnitsOf(&model.Cfg, offload.DefaultDepSteps(&model.Cfg), storedDTypes(d.o, JobShape{}, model))
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		plan, err := planUnits(units, batch, dev.Budget()-dev.Used(), d.o.Offload, false)
		if err != nil {
			return nil, err
		}
		if d.placed, err = lm.NewPlaced(model, plan, dev); err != nil {
			return nil, err
		}
		d.placed.Runtime().Verify = d.o.Offload.Verify
		for _, line := range d.placed.Summary() {
			d.log.Infof("%s", line)
		}
		return d.placed, nil
	case d.gpu != nil && d.plan != nil:
		placed, err := lm.NewPlaced(model, d.plan, d.gpu.OffloadDevice())
		if err != nil {
			return nil, err
		}
		rt := placed.Runtime()
		rt.DeviceCompute = true
		if err := d.gpu.UseRuntimeStream(rt.ComputeStream()); err != nil {
			placed.Close()
			return nil, err
		}
		d.placed = placed
		m := d.plan.Memory
		d.log.Infof("offload plan for the GPU (%s): %s; device: %s resident, %s staging, %s KV and workspace",
			offload.FormatSize(placed.Device().Budget()), d.plan.Summary(), offload.FormatSize(m.GPUResident), offload.FormatSize(m.GPUStaging), offload.FormatSize(m.GPUKV+m.GPUDepKV+m.GPUWorkspace))
		return placed, nil
	}
	return nil, nil
}

// Finish ends the offload executor's run and returns its report line (""
// without one).
func (d *Device) Finish() (string, error) {
	if d.placed == nil {
		return "", nil
	}
	return d.placed.Finish()
}

// Close releases the executor, the GPU and the CPU backend's workers.
func (d *Device) Close() {
	if d.placed != nil {
		d.placed.Close()
		d.placed = nil
	}
	if d.gpu != nil {
		d.gpu.Close()
	}
	d.cpu.Close()
}

// openCUDA opens the GPU backend with the size check, or the offload plan
// of --cpu-offload (made for the device budget before anything is
// allocated: the limit the backend will enforce).
func openCUDA(o DeviceOptions, job JobShape, c *cpu.CPU) (*cuda.CUDA, *offload.Plan, error) {
	cfg := job.Config
	if cfg == nil {
		cfg = config.Default()
	}
	dt := o.ComputeDType
	if dt == "" {
		dt = c.Engine().ComputeDType()
	}
	co := cuda.Options{Memory: o.Offload.Memory, ComputeDType: dt, CPU: c}
	var plan *offload.Plan
	if o.CPUOffload {
		budget := o.Offload.Memory
		if budget <= 0 {
			free, err := gpuFreeMemory()
			if err != nil {
				return nil, nil, err
			}
			budget = free
		}
		units, err := lm.UnitsOf(&cfg.LM, offload.DefaultDepSteps(&cfg.LM), storedDTypes(o, job, nil))
		if err != nil {
			return nil, nil, fmt.Errorf("offload: %w", err)
		}
		gpuOffload := o.Offload
		gpuOffload.Workspace = -1
		if job.PromptStates >= budget {
			return nil, nil, fmt.Errorf("offload: the prompt cache's states (%s) leave no room on the device (%s): use a smaller --prompt-cache, or 0", offload.FormatSize(job.PromptStates), offload.FormatSize(budget))
		}
		// The codec's transformers run on the device too, beside the plan.
		mc := cfg.Mimi
		if mc == nil {
			mc = config.DefaultMimi()
		}
		codec, err := mimi.DeviceBytes(mc, job.BatchSize)
		if err != nil {
			return nil, nil, err
		}
		// So does the backend's upload arena, from the start.
		fixed := job.PromptStates + codec + cuda.ArenaBytes
		if fixed >= budget {
			return nil, nil, fmt.Errorf("offload: --gpu-memory %s leaves no room for the LM: the codec's transformers take %s of it, the backend's upload arena %s and the prompt cache's states %s", offload.FormatSize(budget), offload.FormatSize(codec), offload.FormatSize(cuda.ArenaBytes), offload.FormatSize(job.PromptStates))
		}
		if plan, err = planUnits(units, max(1, job.BatchSize), budget-fixed, gpuOffload, true); err != nil {
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
	if !o.CPUOffload {
		if err := checkFits(job, cfg, g); err != nil {
			g.Close()
			return nil, nil, err
		}
	}
	return g, plan, nil
}

// storedDTypes is the block format each LM tensor of the job will be held
// in, for sizing an offload plan: a loaded model's own when given, else,
// before anything is loaded, a quantized checkpoint's (read from its
// header), else what --weights makes of it; nil (all bf16) otherwise, and
// when the file cannot be read (loading reports that).
func storedDTypes(o DeviceOptions, job JobShape, model *lm.Model) func(tensor string) weights.DType {
	if model != nil {
		return model.StoredDTypes()
	}
	dt := map[string]weights.DType{}
	for _, s := range checkpointSpecs(job.MoshiWeight) {
		if s.DType.Quantized() {
			dt[s.Name] = s.DType
		}
	}
	if len(dt) > 0 {
		return func(n string) weights.DType { return dt[n] }
	}
	if format, err := weights.ParseQuantFormat(job.Quantize); err == nil {
		return lm.StoredAs(format)
	}
	return nil
}

// planUnits solves the offload plan of units for a device budget: the one
// planner path of the simulated device and the GPU. On the GPU
// (kvOnDevice) the backend keeps every temporal layer's KV cache on the
// device (attention runs there for CPU units too), which the planner
// counts in host memory for CPU layers: so the budget given to the planner
// is lowered by that KV until the plan and its KV fit the device.
func planUnits(units *offload.LM, batch int, budget int64, o OffloadOptions, kvOnDevice bool) (*offload.Plan, error) {
	fig := offload.DefaultFigures()
	if o.Figures != nil {
		fig = *o.Figures
	}
	planned := budget
	for try := 0; ; try++ {
		p := offload.NewProblem(units, offload.Workload{Batch: batch}, fig, planned, o.HostMemory)
		if o.Workspace >= 0 {
			p.Workspace = o.Workspace
		}
		plan, err := p.Solve()
		if err != nil {
			return nil, fmt.Errorf("offload: %w", err)
		}
		if !kvOnDevice {
			return plan, nil
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
// (float32 keys and values over the context), the prompt cache's states
// and a workspace, against the device budget.
type Fits struct {
	Weights, KV, PromptStates, Workspace, Budget int64
}

// Need is the device memory the job needs.
func (f Fits) Need() int64 { return f.Weights + f.KV + f.PromptStates + f.Workspace }

// Error is the message of a job that does not fit ("" when it fits).
func (f Fits) Error() string {
	if f.Need() <= f.Budget {
		return ""
	}
	cache, fix := "", ""
	if f.PromptStates > 0 {
		cache = ", prompt cache " + offload.FormatSize(f.PromptStates)
		if f.Need()-f.PromptStates <= f.Budget {
			fix = " or a smaller --prompt-cache (0: none)"
		}
	}
	return fmt.Sprintf("the model needs %s of device memory (weights %s, KV cache %s%s, workspace %s) but %s is available: run with --cpu-offload to split it between the GPU and host memory (see pp-offline plan)%s",
		offload.FormatSize(f.Need()), offload.FormatSize(f.Weights), offload.FormatSize(f.KV), cache, offload.FormatSize(f.Workspace), offload.FormatSize(f.Budget), fix)
}

// FitsFor computes the size check for a checkpoint of weightBytes.
func FitsFor(cfg *config.Config, weightBytes int64, batch int, budget int64) Fits {
	c := &cfg.LM
	kv := 2 * 4 * int64(c.Dim) * int64(c.NumLayers) * int64(c.Context) * int64(max(1, batch))
	return Fits{Weights: weightBytes, KV: kv, Workspace: offload.DefaultWorkspace, Budget: budget}
}

func checkFits(o JobShape, cfg *config.Config, g *cuda.CUDA) error {
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
	_, saved := quantSizes(o.Quantize, checkpointSpecs(o.MoshiWeight))
	n -= saved
	_, _, limit := g.Memory()
	f := FitsFor(cfg, n, o.BatchSize, limit)
	f.PromptStates = o.PromptStates
	if msg := f.Error(); msg != "" {
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

package ops

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
)

// Engine is one CPU compute context: a kernel variant, a compute dtype and a
// worker pool. Engines are independent: two of them, with different
// settings, can run products at the same time from different goroutines
// without affecting each other (each has its own workers; a caller that
// finds its engine's pool busy runs its work inline). An Engine is safe for
// concurrent use.
//
// An engine's settings are fixed by NewEngine. The package-level
// conveniences (Mat.MatVec, Mat.MatMul, Dot, Axpy, Parallel) run on the
// default engine, Default(): all cores, the best kernel variant, f32.
type Engine struct {
	k    atomic.Pointer[kernelSet] // kernel variant (changed only by this package's tests)
	bf16 atomic.Bool               // compute dtype bf16 (changed only by this package's tests)
	pool *pool
}

// EngineOptions configures NewEngine.
type EngineOptions struct {
	Threads      int    // participants incl. the caller; <= 0: runtime.GOMAXPROCS(0)
	Kernel       string // "" = best for this CPU; else one of KernelNames()
	ComputeDType string // "" or "f32" (default, exact), "bf16"
}

// defaultEngine is the engine of the package-level functions, made at init
// (after addArchKernels) with runtime.NumCPU() threads and the best kernel
// variant.
var defaultEngine *Engine

func init() {
	addArchKernels()
	defaultEngine = newEngine(runtime.NumCPU(), bestKernel(), false)
}

func newEngine(threads int, k *kernelSet, bf16 bool) *Engine {
	e := &Engine{pool: newPool(min(threads, maxThreads))}
	e.k.Store(k)
	e.bf16.Store(bf16)
	return e
}

// Default returns the package's default engine: the one the package-level
// functions use. Its Close does nothing.
func Default() *Engine { return defaultEngine }

// NewEngine starts an engine: o.Threads−1 worker goroutines (at most 1023),
// which Close stops. An engine that becomes unreachable without Close has
// its workers stopped by the garbage collector, eventually. It returns an
// error for a kernel variant this CPU cannot run or an unknown compute
// dtype ("float32" and "bfloat16" are accepted too, as by ParseComputeDType).
func NewEngine(o EngineOptions) (*Engine, error) {
	k := bestKernel()
	if o.Kernel != "" {
		if k = kernelByName(o.Kernel); k == nil {
			return nil, fmt.Errorf("ops: unknown or unsupported kernel variant %q (have %s)", o.Kernel, strings.Join(KernelNames(), ", "))
		}
	}
	bf16 := false
	if o.ComputeDType != "" {
		var err error
		if bf16, err = parseComputeDType(o.ComputeDType); err != nil {
			return nil, err
		}
	}
	n := o.Threads
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	e := newEngine(n, k, bf16)
	// The workers reference the pool, not the engine.
	runtime.AddCleanup(e, func(p *pool) { p.close() }, e.pool)
	return e, nil
}

// Close stops the engine's workers, after the product running on them if
// any. The engine stays usable, running everything on the calling goroutine
// (Threads reports 1). Close is idempotent; it must not be called from
// inside the engine's Parallel function. On the default engine it does
// nothing.
func (e *Engine) Close() {
	if e == defaultEngine {
		return
	}
	e.pool.close()
}

// Parallel runs f(i) for i in [0, n) on the engine's pool (inline when it
// is busy), each i exactly once, in no fixed order. It is for coarse work:
// the closure may allocate.
func (e *Engine) Parallel(n int, f func(i int)) { e.pool.parallel(n, f) }

// Threads reports the threads the engine's products use, the caller
// included.
func (e *Engine) Threads() int { return int(e.pool.nthreads.Load()) }

// KernelName names the engine's matrix kernel variant ("avx512", "avx2",
// "neon", "portable").
func (e *Engine) KernelName() string { return e.k.Load().name }

// ComputeDType reports the engine's compute dtype: "f32" or "bf16".
func (e *Engine) ComputeDType() string {
	if e.bf16.Load() {
		return "bf16"
	}
	return "f32"
}

// BF16KernelName names the kernel the engine's bf16 compute mode runs on:
// "avx512bf16" (VDPBF16PS) or "portable".
func (e *Engine) BF16KernelName() string {
	if bf16Asm(e.k.Load()) {
		return "avx512bf16"
	}
	return "portable"
}

package ops

// TEMPORARY shim until the ops-engine branch lands: the Engine API over the
// package globals.

import (
	"fmt"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/weights"
)

type Engine struct{}

type EngineOptions struct {
	Threads      int
	Kernel       string
	ComputeDType string
}

var defEngine = &Engine{}

func Default() *Engine { return defEngine }

func NewEngine(o EngineOptions) (*Engine, error) {
	if o.Threads > 0 {
		SetThreads(o.Threads)
	}
	if o.Kernel != "" && !SetKernel(o.Kernel) {
		return nil, fmt.Errorf("unknown kernel %q", o.Kernel)
	}
	if o.ComputeDType != "" {
		if err := SetComputeDType(o.ComputeDType); err != nil {
			return nil, err
		}
	}
	return defEngine, nil
}
func (e *Engine) Close()                                     {}
func (e *Engine) MatVec(m Mat, dst, x []float32)             { m.MatVec(dst, x) }
func (e *Engine) MatMul(m Mat, dst, xs [][]float32)          { m.MatMul(dst, xs) }
func (e *Engine) Dot(a, b []float32) float32                 { return Dot(a, b) }
func (e *Engine) Axpy(dst []float32, a float32, x []float32) { Axpy(dst, a, x) }
func (e *Engine) Parallel(n int, f func(i int))              { Parallel(n, f) }
func (e *Engine) Threads() int                               { return Threads() }
func (e *Engine) KernelName() string                         { return KernelName() }
func (e *Engine) ComputeDType() string                       { return ComputeDType() }

func MatFromBytes(rows, cols int, dt weights.DType, b []byte) (Mat, error) {
	if len(b) != rows*cols*dt.Size() {
		return Mat{}, fmt.Errorf("%d bytes for [%d, %d] %s", len(b), rows, cols, dt)
	}
	m := Mat{Rows: rows, Cols: cols, DType: dt}
	if len(b) == 0 {
		return m, nil
	}
	switch dt {
	case weights.BF16, weights.F16:
		m.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), rows*cols)
	case weights.F32:
		m.f32 = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), rows*cols)
	default:
		return Mat{}, fmt.Errorf("dtype %s", dt)
	}
	return m, nil
}

// Package cuda is the CUDA backend: every op of backend.Backend on an
// NVIDIA GPU, through the driver API loaded at run time (package cu, no
// cgo, no toolkit), with kernels written in CUDA C (kernels/*.cu) and
// embedded as PTX. See docs/CUDA.md.
//
// Activations, KV rings and rotary tables live in device memory. A weight
// says where it lives: at Weight.Dev+DevOffset when it is bound to device
// memory (an offload plan's resident or streamed unit, which
// offload.Runtime uploads, stages and fences on OffloadDevice), in host
// memory to be multiplied by the CPU backend when Weight.OnCPU (the plan's
// CPU units), else it is uploaded once into a resident cache keyed by its
// host bytes. The backend streams nothing itself. All device memory it
// allocates is accounted against a limit (Options.Memory, --gpu-memory).
//
// Work is queued on one compute stream and runs asynchronously; Download
// synchronizes. A backend is used from one goroutine at a time; every call
// makes the backend's context current on the calling thread first.
package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cuda/cu"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// Options configure a CUDA backend.
type Options struct {
	Ordinal int // device ordinal
	// Memory caps the device memory the backend allocates (0: the free
	// memory at start, less a reserve for the driver).
	Memory int64
	// ComputeDType is "f32" (f32 activations, the parity path) or "bf16"
	// (bf16 weights multiplied on tensor cores with bf16 activations).
	ComputeDType string
	// CPU computes the products of weights bound with OnCPU (an offload
	// plan's CPU units).
	CPU backend.Backend
}

// Available loads the driver and reports whether a usable device exists:
// nil, or an error saying why not (cu.ErrNoDriver, cu.ErrNoDevice, a
// device too old).
func Available() error {
	if err := cu.Load(); err != nil {
		return err
	}
	d, err := cu.GetDevice(0)
	if err != nil {
		return err
	}
	major, err := d.Attribute(cu.AttrComputeCapabilityMajor)
	if err != nil {
		return err
	}
	if major < 8 {
		return fmt.Errorf("%w: compute capability %d.x (the CUDA backend needs 8.0 or later)", cu.ErrNoDevice, major)
	}
	return nil
}

// driverReserve is the device memory left to the driver and the JIT-ed
// modules when no limit is given.
const driverReserve = 512 << 20

// CUDA is the CUDA backend.
type CUDA struct {
	o      Options
	dev    cu.Device
	name   string
	major  int
	g      *gpu   // nil on a fake driver
	drv    driver // g, or a test's fake
	mem    *allocator
	rc     *residentCache
	bf16   bool
	arena  *arena
	cpuAct map[[3]int]backend.Acts
	host   []float32 // scratch: host staging of activations and embedding rows
	use    []uint32  // scratch: Embed's per-row table masks
	embs   []ops.Mat // scratch: Embed's tables as matrices
	args   args
	closed bool

	attendShared int // attend's dynamic shared memory limit
}

// Buffer is device memory a placement owns (Weight.Dev).
type Buffer struct {
	Ptr cu.DevPtr
	N   int64
}

// Len implements backend.Buffer.
func (b *Buffer) Len() int64 { return b.N }

// devBuf is the storage of an activation buffer or a ring half.
type devBuf struct {
	p cu.DevPtr
	n int64
}

type devRing struct{ k, v devBuf }

// New opens device o.Ordinal and loads the kernels.
func New(o Options) (c *CUDA, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	switch o.ComputeDType {
	case "", "f32", "bf16":
	default:
		return nil, fmt.Errorf("cuda: compute dtype %q (f32 or bf16)", o.ComputeDType)
	}
	// The context made current below is current on this OS thread only:
	// the setup's driver calls all run on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := cu.GetDevice(o.Ordinal)
	if err != nil {
		return nil, err
	}
	c = &CUDA{o: o, dev: dev, bf16: o.ComputeDType == "bf16", cpuAct: map[[3]int]backend.Acts{}}
	if c.name, err = dev.Name(); err != nil {
		return nil, err
	}
	if c.major, err = dev.Attribute(cu.AttrComputeCapabilityMajor); err != nil {
		return nil, err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	b := c // the results are nil on an error return: release what b holds
	defer func() {
		if err != nil {
			if b.mem != nil {
				_ = b.mem.freeAll()
			}
			_ = dev.ReleasePrimaryContext()
			c = nil
		}
	}()
	c.g = &gpu{ctx: ctx, fn: map[string]cu.Function{}}
	c.drv = c.g
	if c.g.compute, err = cu.NewStream(); err != nil {
		return nil, err
	}
	free, _, err := cu.MemInfo()
	if err != nil {
		return nil, err
	}
	limit := o.Memory
	if limit <= 0 {
		limit = max(free-driverReserve, 0)
	}
	if limit > free {
		return nil, fmt.Errorf("cuda: --gpu-memory %s is more than the device's free memory (%s)", offload.FormatSize(limit), offload.FormatSize(free))
	}
	if err := c.loadKernels(); err != nil {
		return nil, err
	}
	return c, c.start(limit)
}

// start sets up what New and the tests' fake drivers share: the
// allocator, the arena and the resident cache over c.drv.
func (c *CUDA) start(limit int64) error {
	c.mem = newAllocator(c.drv, limit)
	c.mem.sync = c.drv.sync
	c.rc = newResidentCache(c.drv, c.mem)
	var err error
	c.arena, err = newArena(c, arenaBytes)
	return err
}

func (c *CUDA) loadKernels() error {
	names := map[string][]string{
		"matmul":      {"matmul_fma", "matmul_fma_vec", "matmul_fma_rows", "matmul_mma_bf16"},
		"norm":        {"rmsnorm", "layernorm"},
		"elementwise": {"copy2d", "add_scaled", "gate", "activate", "rope", "embed_sum"},
		"attention":   {"ring_write", "attend", "fill_ring"},
	}
	for _, fam := range families {
		ptx, err := ptxFor(fam, c.major)
		if err != nil {
			return err
		}
		m, err := cu.LoadModule(ptx)
		if err != nil {
			return fmt.Errorf("cuda: loading the %s kernels: %w", fam, err)
		}
		for _, n := range names[fam] {
			if c.g.fn[n], err = m.Function(n); err != nil {
				return err
			}
		}
	}
	optin, err := c.dev.Attribute(cu.AttrMaxSharedPerBlockOptin)
	if err != nil {
		return err
	}
	c.attendShared = min(optin, maxAttendShared)
	return c.g.fn["attend"].SetMaxDynamicShared(c.attendShared)
}

// maxAttendShared bounds attend's dynamic shared memory (scores of every
// slot): rings of up to ~50 000 positions on Hopper (227 KiB per block),
// ~40 000 on the A100 (163 KiB).
const maxAttendShared = 200 << 10

// Name implements backend.Backend.
func (c *CUDA) Name() string {
	dt := "f32"
	if c.bf16 {
		dt = "bf16"
	}
	return fmt.Sprintf("cuda (%s, sm_%d0 PTX, %s compute, %s device memory)", c.name, min(c.major, 9), dt, offload.FormatSize(c.mem.limit))
}

// Memory reports the device memory the backend holds now, at most, and
// may hold.
func (c *CUDA) Memory() (used, peak, limit int64) { return c.mem.used, c.mem.peak, c.mem.limit }

// Resident reports the bytes of weights uploaded once into the resident
// cache (those bound without Dev and not OnCPU).
func (c *CUDA) Resident() int64 { return c.rc.bytes }

// ArenaWraps is the number of times the upload arena wrapped: each waits
// for the queued work (one per arena's worth of small uploads, 8 MiB at
// first), the host's only waits besides downloads, Close and freeing.
func (c *CUDA) ArenaWraps() int { return c.arena.wraps }

// Close frees every buffer and releases the context.
func (c *CUDA) Close() {
	if c.closed {
		return
	}
	c.closed = true
	defer c.enter()()
	_ = c.drv.sync()
	_ = c.mem.freeAll()
	if c.g != nil {
		_ = c.dev.ReleasePrimaryContext()
	}
}

// enter locks the calling goroutine to its OS thread and makes the
// context current there, for the driver calls of one op; the caller
// defers the returned unlock (defer c.enter()()). A context is current per
// OS thread, and a goroutine moves between threads: after any long driver
// call (a JIT load, a stream synchronisation) the runtime may hand its P
// to another thread, and the next call would find no context
// (CUDA_ERROR_INVALID_CONTEXT) without the lock.
func (c *CUDA) enter() (unlock func()) {
	runtime.LockOSThread()
	if err := c.drv.setCurrent(); err != nil {
		runtime.UnlockOSThread()
		fail(err)
	}
	return runtime.UnlockOSThread
}

// Failure is a device error inside an op (an allocation past the memory
// limit, a driver error): the Backend interface has no error results, so
// the op panics with a *Failure, which infer's jobs recover into their
// error.
type Failure struct{ Err error }

func (f *Failure) Error() string {
	if strings.HasPrefix(f.Err.Error(), "cuda:") {
		return f.Err.Error()
	}
	return "cuda: " + f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

func fail(err error) {
	if err != nil {
		panic(&Failure{err})
	}
}

// args marshals kernel arguments: each value in an 8-byte cell, and the
// array of pointers to the cells cuLaunchKernel reads.
// The kinds, as launch checks them against signatures: p a device
// pointer, i an int, l an int64, f a float32.
type args struct {
	v     [24]uint64
	ptr   [24]unsafe.Pointer
	kinds [24]byte
	n     int
}

func (a *args) reset() *args { a.n = 0; return a }
func (a *args) put(v uint64, kind byte) *args {
	a.v[a.n], a.kinds[a.n] = v, kind
	a.n++
	return a
}
func (a *args) p(p cu.DevPtr) *args { return a.put(uint64(p), 'p') }
func (a *args) i(v int) *args       { return a.put(uint64(uint32(int32(v))), 'i') }
func (a *args) i64(v int64) *args   { return a.put(uint64(v), 'l') }
func (a *args) f(v float32) *args   { return a.put(uint64(math.Float32bits(v)), 'f') }

// signatures are the kernels' parameter lists (kernels/*.cu), in args'
// kinds; TestSignaturesMatchPTX checks them against the PTX's .param
// lists, and launch checks every call against them.
var signatures = map[string]string{
	"matmul_fma":      "pipipiiiii",
	"matmul_fma_vec":  "ppiipi",
	"matmul_fma_rows": "pipipiiiii",
	"matmul_mma_bf16": "pipipiiii",
	"rmsnorm":         "pipiipif",
	"layernorm":       "pipiipipif",
	"copy2d":          "pipiii",
	"add_scaled":      "pipiiipi",
	"gate":            "pipiiii",
	"activate":        "piiii",
	"rope":            "piiiipp",
	"embed_sum":       "pippiiii",
	"ring_write":      "ppiiii",
	"attend":          "pippiiii",
	"fill_ring":       "ppl",
}

func (c *CUDA) launch(name string, grid, block [3]uint32, shared uint32) {
	a := &c.args
	if got := string(a.kinds[:a.n]); got != signatures[name] {
		panic(fmt.Sprintf("cuda: kernel %s launched with arguments %q, its signature is %q", name, got, signatures[name]))
	}
	for i := 0; i < a.n; i++ {
		a.ptr[i] = unsafe.Pointer(&a.v[i])
	}
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return
	}
	fail(c.drv.launch(name, grid, block, shared, unsafe.Pointer(&a.ptr[0])))
}

func blocks(n, per int) uint32 { return uint32((n + per - 1) / per) }

// NewActs implements backend.Backend.
func (c *CUDA) NewActs(rows, cols int) backend.Acts {
	defer c.enter()()
	n := int64(rows) * int64(cols) * 4
	p, err := c.mem.allocWork(fmt.Sprintf("activations %d×%d", rows, cols), n)
	fail(err)
	fail(c.drv.memset(p, n))
	b := &backend.ActBuf{Rows: rows, Cols: cols, Data: c.track(&devBuf{p, n})}
	return backend.Acts{Buf: b, Rows: rows, Cols: cols}
}

func bufOf(a backend.Acts) *devBuf {
	d, ok := a.Buf.Data.(*devBuf)
	if !ok {
		panic(fmt.Sprintf("cuda: a view of a %T buffer (another backend's)", a.Buf.Data))
	}
	return d
}

// ptr is the address of the view's first element; ld its row stride.
func ptr(a backend.Acts) cu.DevPtr {
	return bufOf(a).p + cu.DevPtr(4*(int64(a.R0)*int64(a.Buf.Cols)+int64(a.C0)))
}
func ld(a backend.Acts) int { return a.Buf.Cols }

func contiguous(a backend.Acts) bool { return a.C0 == 0 && a.Cols == a.Buf.Cols }

func sameShape(op string, a, b backend.Acts) {
	if a.Rows != b.Rows || a.Cols != b.Cols {
		panic(fmt.Sprintf("cuda: %s: views of %d×%d and %d×%d", op, a.Rows, a.Cols, b.Rows, b.Cols))
	}
}

func (c *CUDA) copy2d(dst cu.DevPtr, ldd int, src cu.DevPtr, lds, rows, cols int) {
	c.args.reset().p(dst).i(ldd).p(src).i(lds).i(rows).i(cols)
	c.launch("copy2d", [3]uint32{blocks(cols, 256), uint32(rows), 1}, [3]uint32{256, 1, 1}, 0)
}

// Upload implements backend.Backend.
func (c *CUDA) Upload(dst backend.Acts, src []float32) {
	defer c.enter()()
	n := dst.Rows * dst.Cols
	if n == 0 {
		return
	}
	b := f32bytes(src[:n])
	if contiguous(dst) {
		c.arena.upload(ptr(dst), b)
		return
	}
	tmp := c.arena.uploadTemp(b)
	c.copy2d(ptr(dst), ld(dst), tmp, dst.Cols, dst.Rows, dst.Cols)
}

// Sync implements backend.Syncer: it waits for the queued work.
func (c *CUDA) Sync() {
	defer c.enter()()
	fail(c.drv.sync())
}

// Download implements backend.Backend (it waits for the queued work).
func (c *CUDA) Download(dst []float32, src backend.Acts) {
	defer c.enter()()
	n := src.Rows * src.Cols
	if n == 0 {
		return
	}
	c.arena.download(f32bytes(dst[:n]), src)
}

// DownloadRows implements backend.RowsDownloader: every block in one
// device→host copy and one wait (the logits of every conversation of a
// batch, the codec's streams).
func (c *CUDA) DownloadRows(dsts [][]float32, src backend.Acts) {
	defer c.enter()()
	n := src.Rows * src.Cols
	if n == 0 {
		return
	}
	h := c.arena.fetch(src, 4*n)
	for _, d := range dsts {
		h = h[copy(f32bytes(d), h):]
	}
}

// UploadRows implements backend.RowsUploader: the blocks gathered on the
// host, one host→device copy (queued, not waited for).
func (c *CUDA) UploadRows(dst backend.Acts, srcs [][]float32) {
	defer c.enter()()
	n := dst.Rows * dst.Cols
	if n == 0 {
		return
	}
	if contiguous(dst) {
		c.arena.gather(srcs, 4*n, ptr(dst))
		return
	}
	tmp := c.arena.gather(srcs, 4*n, 0)
	c.copy2d(ptr(dst), ld(dst), tmp, dst.Cols, dst.Rows, dst.Cols)
}

// Copy implements backend.Backend.
func (c *CUDA) Copy(dst, src backend.Acts) {
	sameShape("Copy", dst, src)
	defer c.enter()()
	c.copy2d(ptr(dst), ld(dst), ptr(src), ld(src), dst.Rows, dst.Cols)
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func dtypeCode(d weights.DType) int {
	switch d {
	case weights.F32:
		return 0
	case weights.BF16:
		return 1
	case weights.F16:
		return 2
	case weights.Q8_0:
		return 3
	case weights.Q4_K:
		return 4
	}
	panic(fmt.Sprintf("cuda: weight dtype %s", d))
}

// weight is the device address of w's bytes: Dev+DevOffset when it is
// bound to device memory, else its resident upload.
func (c *CUDA) weight(w *backend.Weight) cu.DevPtr {
	if w.Dev != nil {
		b, ok := w.Dev.(*Buffer)
		if !ok {
			panic(fmt.Sprintf("cuda: weight %q is in a %T, not this device's memory", w.Name, w.Dev))
		}
		if w.DevOffset < 0 || w.DevOffset+w.Bytes() > b.N {
			panic(fmt.Sprintf("cuda: weight %q: %d bytes at %d of a buffer of %d", w.Name, w.Bytes(), w.DevOffset, b.N))
		}
		return b.Ptr + cu.DevPtr(w.DevOffset)
	}
	if int64(len(w.Host)) != w.Bytes() {
		panic(fmt.Sprintf("cuda: weight %q: %d host bytes for [%d, %d] %s", w.Name, len(w.Host), w.Rows, w.Cols, w.DType))
	}
	p, err := c.rc.get(w.Name, w.Host)
	fail(err)
	return p
}

// vecWeight is a vector weight's address (0 for nil) and dtype code; such
// small weights are resident (uploaded once) whatever their unit's
// placement, even OnCPU.
func (c *CUDA) vecWeight(w *backend.Weight) (cu.DevPtr, int) {
	if w == nil {
		return 0, 0
	}
	return c.weight(w), dtypeCode(w.DType)
}

// MatMul implements backend.Backend. Every output element is reduced in
// an order that depends on the weight's shape only, so row r of a batch
// has the bits of row r alone.
func (c *CUDA) MatMul(dst, x backend.Acts, w *backend.Weight) {
	if x.Rows != dst.Rows || x.Cols != w.Cols || dst.Cols != w.Rows {
		panic(fmt.Sprintf("cuda: MatMul: %d×%d · %q [%d, %d] into %d×%d", x.Rows, x.Cols, w.Name, w.Rows, w.Cols, dst.Rows, dst.Cols))
	}
	defer c.enter()()
	if w.Dev == nil && w.OnCPU {
		if c.o.CPU == nil {
			fail(fmt.Errorf("weight %s is placed on the CPU but the backend has no CPU backend (Options.CPU)", w.Name))
		}
		c.cpuMatMul(dst, x, w)
		return
	}
	B, N, K := x.Rows, w.Rows, w.Cols
	if B == 0 {
		return
	}
	wp := c.weight(w)
	vec := 0 // the float rows' 16-byte loads (block rows are read by bytes)
	if es := int64(w.DType.Size()); !w.DType.Quantized() && K%8 == 0 && int64(wp)%16 == 0 && (int64(K)*es)%16 == 0 {
		vec = 1
	}
	if c.bf16 && w.DType == weights.BF16 {
		c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(x)).i(ld(x)).p(wp).i(N).i(K).i(B).i(vec)
		c.launch("matmul_mma_bf16", [3]uint32{blocks(N, 16), blocks(B, 8), 1}, [3]uint32{32 * 8, 1, 1}, 0)
	} else {
		// One output row a warp at B = 1 (memory-bound: the most warps
		// streaming weights); fmaRows a warp for B > 1, where loading the
		// activations bounds the product. Both sum every element in the
		// same order, so the batching contract holds across the two.
		const warps = 8
		if B == 1 && vec == 1 && uint64(ptr(x))%16 == 0 {
			// A float row and an aligned activation row: the kernel that
			// keeps several chunks of the row in flight (same sums).
			c.args.reset().p(ptr(dst)).p(ptr(x)).i(N).i(K).p(wp).i(dtypeCode(w.DType))
			c.launch("matmul_fma_vec", [3]uint32{blocks(N, warps), 1, 1}, [3]uint32{32 * warps, 1, 1}, 0)
			return
		}
		c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(x)).i(ld(x)).p(wp).i(dtypeCode(w.DType)).i(N).i(K).i(B).i(vec)
		if B == 1 {
			c.launch("matmul_fma", [3]uint32{blocks(N, warps), 1, 1}, [3]uint32{32 * warps, 1, 1}, 0)
		} else {
			c.launch("matmul_fma_rows", [3]uint32{blocks(N, warps*fmaRows), 1, 1}, [3]uint32{32 * warps, 1, 1}, 0)
		}
	}
}

// fmaRows is matmul_fma_rows' output rows a warp (FMA_ROWS in matmul.cu).
const fmaRows = 4

// cpuMatMul runs a CPU-placed product on the CPU backend: x down, y up.
func (c *CUDA) cpuMatMul(dst, x backend.Acts, w *backend.Weight) {
	cb := c.o.CPU
	hx, hy := c.cpuActs(0, x.Rows, x.Cols), c.cpuActs(1, dst.Rows, dst.Cols)
	n := max(x.Rows*x.Cols, dst.Rows*dst.Cols)
	if cap(c.host) < n {
		c.host = make([]float32, n)
	}
	c.Download(c.host[:x.Rows*x.Cols], x)
	cb.Upload(hx, c.host[:x.Rows*x.Cols])
	cb.MatMul(hy, hx, w)
	cb.Download(c.host[:dst.Rows*dst.Cols], hy)
	c.Upload(dst, c.host[:dst.Rows*dst.Cols])
}

// cpuActs is the CPU backend's buffer for a CPU-placed product's input
// (role 0) or output (1) of that shape: the two never share one, even
// when the weight is square (the product's input and output alias
// otherwise).
func (c *CUDA) cpuActs(role, rows, cols int) backend.Acts {
	k := [3]int{role, rows, cols}
	a, ok := c.cpuAct[k]
	if !ok {
		a = c.o.CPU.NewActs(rows, cols)
		c.cpuAct[k] = a
	}
	return a
}

// Norm implements backend.Backend.
func (c *CUDA) Norm(dst, x backend.Acts, n *backend.Norm) {
	sameShape("Norm", dst, x)
	defer c.enter()()
	w, wdt := c.vecWeight(n.W)
	grid, block := [3]uint32{uint32(x.Rows), 1, 1}, [3]uint32{256, 1, 1}
	if n.RMS {
		c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(x)).i(ld(x)).i(x.Cols).p(w).i(wdt).f(n.Eps)
		c.launch("rmsnorm", grid, block, 0)
		return
	}
	b, bdt := c.vecWeight(n.B)
	c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(x)).i(ld(x)).i(x.Cols).p(w).i(wdt).p(b).i(bdt).f(n.Eps)
	c.launch("layernorm", grid, block, 0)
}

// AddScaled implements backend.Backend.
func (c *CUDA) AddScaled(dst, src backend.Acts, scale *backend.Weight) {
	sameShape("AddScaled", dst, src)
	defer c.enter()()
	s, sdt := c.vecWeight(scale)
	c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(src)).i(ld(src)).i(dst.Rows).i(dst.Cols).p(s).i(sdt)
	c.launch("add_scaled", [3]uint32{blocks(dst.Cols, 256), uint32(dst.Rows), 1}, [3]uint32{256, 1, 1}, 0)
}

func actCode(a backend.Activation) int {
	switch a {
	case backend.SiLU:
		return 0
	case backend.GELU:
		return 1
	case backend.ReLU:
		return 2
	}
	panic(fmt.Sprintf("cuda: activation %d", a))
}

// Gate implements backend.Backend.
func (c *CUDA) Gate(dst, src backend.Acts, act backend.Activation) {
	h := dst.Cols
	if src.Cols != 2*h || src.Rows != dst.Rows {
		panic(fmt.Sprintf("cuda: Gate: %d×%d into %d×%d", src.Rows, src.Cols, dst.Rows, dst.Cols))
	}
	defer c.enter()()
	c.args.reset().p(ptr(dst)).i(ld(dst)).p(ptr(src)).i(ld(src)).i(dst.Rows).i(h).i(actCode(act))
	c.launch("gate", [3]uint32{blocks(h, 256), uint32(dst.Rows), 1}, [3]uint32{256, 1, 1}, 0)
}

// Activate implements backend.Backend.
func (c *CUDA) Activate(x backend.Acts, act backend.Activation) {
	defer c.enter()()
	c.args.reset().p(ptr(x)).i(ld(x)).i(x.Rows).i(x.Cols).i(actCode(act))
	c.launch("activate", [3]uint32{blocks(x.Cols, 256), uint32(x.Rows), 1}, [3]uint32{256, 1, 1}, 0)
}

// NewRope implements backend.Backend: the CPU's frequency table, on the
// device.
func (c *CUDA) NewRope(dh int, maxPeriod float64) *backend.Rope {
	defer c.enter()()
	cf := float32(-math.Log(maxPeriod) * 2 / float64(dh))
	freqs := make([]float32, dh/2)
	for i := range freqs {
		freqs[i] = float32(math.Exp(float64(float32(i) * cf)))
	}
	b := c.NewActs(1, max(len(freqs), 1))
	c.Upload(b.Columns(0, len(freqs)), freqs)
	return &backend.Rope{Dh: dh, MaxPeriod: maxPeriod, Data: b}
}

// RoPE implements backend.Backend.
func (c *CUDA) RoPE(x backend.Acts, r *backend.Rope, pos []int) {
	if x.Rows == 0 {
		return
	}
	defer c.enter()()
	if len(pos) < x.Rows {
		panic(fmt.Sprintf("cuda: RoPE: %d positions for %d rows", len(pos), x.Rows))
	}
	p := make([]int32, x.Rows)
	for i := range p {
		p[i] = int32(pos[i])
	}
	pp := c.arena.uploadTemp(unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), 4*len(p)))
	freqs := ptr(r.Data.(backend.Acts))
	pairs := x.Cols / r.Dh * (r.Dh / 2)
	c.args.reset().p(ptr(x)).i(ld(x)).i(x.Rows).i(x.Cols).i(r.Dh).p(freqs).p(pp)
	c.launch("rope", [3]uint32{blocks(pairs, 256), uint32(x.Rows), 1}, [3]uint32{256, 1, 1}, 0)
}

// Embed implements backend.Backend. The tables stay in host memory (the
// mapped checkpoint: 17 tables of the 7B are 1.1 GB that a step reads a
// few rows of): the host gathers each row's table rows, widened to
// float32, uploads them, and a kernel sums them into dst in table order.
func (c *CUDA) Embed(dst backend.Acts, tables []*backend.Weight, ids []int, accumulate bool) {
	K := len(tables)
	if len(ids) < dst.Rows*K {
		panic(fmt.Sprintf("cuda: Embed: %d ids for %d rows of %d tables", len(ids), dst.Rows, K))
	}
	if dst.Rows == 0 || dst.Cols == 0 {
		return
	}
	defer c.enter()()
	D := dst.Cols
	words := (K + 31) / 32
	n := dst.Rows * K * D
	if cap(c.host) < n {
		c.host = make([]float32, n)
	}
	rows := c.host[:n]
	nw := max(dst.Rows*words, 1)
	if cap(c.use) < nw {
		c.use = make([]uint32, nw)
	}
	use := c.use[:nw]
	clear(use)
	c.embs = c.embs[:0]
	for _, t := range tables {
		m, err := ops.MatFromBytes(t.Rows, t.Cols, t.DType, t.Host)
		if err != nil {
			panic(fmt.Sprintf("cuda: embedding %q: %v", t.Name, err))
		}
		c.embs = append(c.embs, m)
	}
	for i := 0; i < dst.Rows; i++ {
		for k, t := range tables {
			tok := ids[i*K+k]
			if tok == backend.ZeroToken {
				continue
			}
			if tok < 0 || tok >= t.Rows {
				panic(fmt.Sprintf("cuda: token %d out of range for embedding %q of %d rows", tok, t.Name, t.Rows))
			}
			c.embs[k].Row(tok, rows[(i*K+k)*D:(i*K+k+1)*D])
			use[i*words+k/32] |= 1 << (k % 32)
		}
	}
	c.arena.reserve(4*len(rows) + 4*len(use) + 512)
	src := c.arena.uploadTemp(f32bytes(rows))
	up := c.arena.uploadTemp(unsafe.Slice((*byte)(unsafe.Pointer(&use[0])), 4*len(use)))
	acc := 0
	if accumulate {
		acc = 1
	}
	c.args.reset().p(ptr(dst)).i(ld(dst)).p(src).p(up).i(dst.Rows).i(D).i(K).i(acc)
	c.launch("embed_sum", [3]uint32{blocks(D, 256), uint32(dst.Rows), 1}, [3]uint32{256, 1, 1}, 0)
	clear(c.embs) // no references to the caller's tables kept
}

func ringOf(r *backend.Ring) *devRing {
	d, ok := r.Data.(*devRing)
	if !ok {
		panic(fmt.Sprintf("cuda: a ring of %T (another backend's)", r.Data))
	}
	return d
}

func (c *CUDA) newRingData(heads, dh, capacity int) *devRing {
	n := 4 * int64(heads) * int64(dh) * int64(capacity)
	k, err := c.mem.allocWork("KV ring keys", n)
	fail(err)
	v, err := c.mem.allocWork("KV ring values", n)
	fail(err)
	fail(c.drv.memset(k, n))
	fail(c.drv.memset(v, n))
	r := &devRing{devBuf{k, n}, devBuf{v, n}}
	// The models never free a ring (the interface has no Free): a
	// conversation's rings are freed once it is garbage.
	mem := c.mem
	runtime.SetFinalizer(r, func(r *devRing) { mem.release(r.k.p); mem.release(r.v.p) })
	return r
}

// track frees d's device memory once d is garbage (the models never free
// their buffers; they grow them by doubling and drop the old ones).
func (c *CUDA) track(d *devBuf) *devBuf {
	mem := c.mem
	runtime.SetFinalizer(d, func(d *devBuf) { mem.release(d.p) })
	return d
}

// freeBuf frees d now (after the queued work that reads it).
func (c *CUDA) freeBuf(d *devBuf) {
	runtime.SetFinalizer(d, nil)
	fail(c.drv.sync())
	fail(c.mem.free(d.p))
}

// freeRing frees a ring's storage once the queued work that reads it ran.
func (c *CUDA) freeRing(d *devRing) {
	runtime.SetFinalizer(d, nil)
	fail(c.drv.sync())
	fail(c.mem.free(d.k.p))
	fail(c.mem.free(d.v.p))
}

// NewRing implements backend.Backend.
func (c *CUDA) NewRing(heads, dh, capacity int) *backend.Ring {
	defer c.enter()()
	return &backend.Ring{Heads: heads, Dh: dh, Capacity: capacity, Data: c.newRingData(heads, dh, capacity)}
}

// GrowRing implements backend.Backend.
func (c *CUDA) GrowRing(r *backend.Ring, capacity int) {
	if capacity <= r.Capacity {
		return
	}
	if r.End > r.Capacity {
		panic("cuda: GrowRing after the ring wrapped")
	}
	defer c.enter()()
	old := ringOf(r)
	nr := c.newRingData(r.Heads, r.Dh, capacity)
	if r.End > 0 {
		// Head h's first End positions: [h][cap][dh] → [h][capacity][dh].
		c.copy2d(nr.k.p, capacity*r.Dh, old.k.p, r.Capacity*r.Dh, r.Heads, r.End*r.Dh)
		c.copy2d(nr.v.p, capacity*r.Dh, old.v.p, r.Capacity*r.Dh, r.Heads, r.End*r.Dh)
	}
	c.freeRing(old)
	r.Capacity, r.Data = capacity, nr
}

// CopyRing implements backend.Backend.
func (c *CUDA) CopyRing(dst, src *backend.Ring) {
	defer c.enter()()
	s := ringOf(src)
	if dst.Capacity != src.Capacity || dst.Data == nil || ringOf(dst).k.n != s.k.n {
		if dst.Data != nil {
			c.freeRing(ringOf(dst))
		}
		dst.Capacity = src.Capacity
		dst.Data = c.newRingData(src.Heads, src.Dh, src.Capacity)
	}
	d := ringOf(dst)
	fail(c.drv.copyDtoD(d.k.p, s.k.p, s.k.n))
	fail(c.drv.copyDtoD(d.v.p, s.v.p, s.v.n))
	dst.Heads, dst.Dh, dst.End = src.Heads, src.Dh, src.End
}

// FillRing implements backend.Backend.
func (c *CUDA) FillRing(r *backend.Ring, n int) {
	defer c.enter()()
	d := ringOf(r)
	m := d.k.n / 4
	c.args.reset().p(d.k.p).p(d.v.p).i64(m)
	c.launch("fill_ring", [3]uint32{uint32((m + 255) / 256), 1, 1}, [3]uint32{256, 1, 1}, 0)
	r.End += n
}

// ringRow is the kernels' per-row descriptor (struct ringrow).
type ringRow struct {
	k, v                   uint64
	capacity, end, q, slot int32
}

// Attend implements backend.Backend. Chunk mode: one launch writes every
// row's key and value, one computes every row's attention. Groups of rows
// (Stepwise: one): the rows of a sequence are taken a group at a time
// across the sequences (write group k of every sequence, then attend it),
// as if the groups ran one by one.
func (c *CUDA) Attend(out, qkv backend.Acts, seqs []backend.Seq, context, group int) {
	D := out.Cols
	if qkv.Cols != 3*D || qkv.Rows != out.Rows {
		panic(fmt.Sprintf("cuda: Attend: qkv %d×%d, out %d×%d", qkv.Rows, qkv.Cols, out.Rows, out.Cols))
	}
	defer c.enter()()
	total, most := 0, 0
	heads, dh := 0, 0
	for _, s := range seqs {
		if s.Ring.Heads*s.Ring.Dh != D {
			panic(fmt.Sprintf("cuda: Attend: ring of %d×%d for rows of %d", s.Ring.Heads, s.Ring.Dh, D))
		}
		if group > 0 && min(group, s.Rows) > s.Ring.Capacity {
			// One launch writes a group: its rows need slots of their own.
			panic(fmt.Sprintf("cuda: Attend: a group of %d rows in a ring of %d", group, s.Ring.Capacity))
		}
		heads, dh = s.Ring.Heads, s.Ring.Dh
		total += s.Rows
		most = max(most, s.Rows)
	}
	if total != qkv.Rows {
		panic(fmt.Sprintf("cuda: Attend: sequences cover %d of %d rows", total, qkv.Rows))
	}
	if total == 0 {
		return
	}
	end0 := make([]int, len(seqs))
	for i, s := range seqs {
		end0[i] = s.Ring.End
	}
	if group <= 0 {
		// Writes in row order; a group of more rows than its ring holds is
		// written one row at a time (later rows overwrite earlier ones, as
		// on the CPU).
		wrapped := false
		for _, s := range seqs {
			wrapped = wrapped || s.Rows > s.Ring.Capacity
		}
		if wrapped {
			for k := 0; k < most; k++ {
				c.attendPhase(out, qkv, seqs, end0, k, k+1, context, true, false, heads, dh, group)
			}
		} else {
			c.attendPhase(out, qkv, seqs, end0, 0, most, context, true, false, heads, dh, group)
		}
		for i, s := range seqs {
			s.Ring.End = end0[i] + s.Rows
		}
		c.attendPhase(out, qkv, seqs, end0, 0, most, context, false, true, heads, dh, group)
		return
	}
	for k := 0; k < most; k += group {
		c.attendPhase(out, qkv, seqs, end0, k, k+group, context, true, true, heads, dh, group)
	}
	for i, s := range seqs {
		s.Ring.End = end0[i] + s.Rows
	}
}

// attendPhase writes (write) and/or attends (attend) rows [k0, k1) of every
// sequence; a row attends over the ring as after its group's writes
// (backend.GroupEnd: in chunk mode, every row's).
func (c *CUDA) attendPhase(out, qkv backend.Acts, seqs []backend.Seq, end0 []int, k0, k1, context int, write, attend bool, heads, dh, group int) {
	var rows []ringRow
	var rowIdx []int
	capMax := 0
	r0 := 0
	for i, s := range seqs {
		d := ringOf(s.Ring)
		for k := k0; k < min(k1, s.Rows); k++ {
			end := backend.GroupEnd(end0[i], k, s.Rows, group)
			rows = append(rows, ringRow{k: uint64(d.k.p), v: uint64(d.v.p), capacity: int32(s.Ring.Capacity),
				end: int32(end), q: int32(end0[i] + k), slot: int32((end0[i] + k) % s.Ring.Capacity)})
			rowIdx = append(rowIdx, r0+k)
			capMax = max(capMax, s.Ring.Capacity)
		}
		r0 += s.Rows
	}
	if len(rows) == 0 {
		return
	}
	// The rows of a phase are not contiguous in qkv/out in general: gather
	// them when needed.
	contig := true
	for j, r := range rowIdx {
		contig = contig && r == rowIdx[0]+j
	}
	q, o := qkv.Slice(rowIdx[0], rowIdx[0]+len(rows)), out.Slice(rowIdx[0], rowIdx[0]+len(rows))
	var gq, gout backend.Acts
	if !contig {
		gq, gout = c.scratchActs(0, len(rows), qkv.Cols), c.scratchActs(1, len(rows), out.Cols)
		for j, r := range rowIdx {
			c.copy2d(ptr(gq.Slice(j, j+1)), ld(gq), ptr(qkv.Slice(r, r+1)), ld(qkv), 1, qkv.Cols)
		}
		q, o = gq, gout
	}
	desc := c.arena.uploadTemp(unsafe.Slice((*byte)(unsafe.Pointer(&rows[0])), int(unsafe.Sizeof(rows[0]))*len(rows)))
	D := heads * dh
	if write {
		c.args.reset().p(desc).p(ptr(q)).i(ld(q)).i(len(rows)).i(heads).i(dh)
		c.launch("ring_write", [3]uint32{blocks(D, 256), uint32(len(rows)), 1}, [3]uint32{256, 1, 1}, 0)
	}
	if attend {
		shared := 4 * (capMax + dh + 32)
		if shared > c.attendShared {
			panic(fmt.Sprintf("cuda: Attend: a ring of %d positions is more than the kernel's shared memory holds", capMax))
		}
		c.args.reset().p(ptr(o)).i(ld(o)).p(desc).p(ptr(q)).i(ld(q)).i(heads).i(dh).i(context)
		c.launch("attend", [3]uint32{uint32(len(rows)), uint32(heads), 1}, [3]uint32{128, 1, 1}, uint32(shared))
		if !contig {
			for j, r := range rowIdx {
				c.copy2d(ptr(out.Slice(r, r+1)), ld(out), ptr(o.Slice(j, j+1)), ld(o), 1, out.Cols)
			}
		}
	}
}

// scratchActs is a reusable device buffer (index i) of at least rows × cols.
func (c *CUDA) scratchActs(i, rows, cols int) backend.Acts {
	for len(c.arena.scratch) <= i {
		c.arena.scratch = append(c.arena.scratch, backend.Acts{})
	}
	s := c.arena.scratch[i]
	if s.Buf == nil || s.Buf.Rows < rows || s.Buf.Cols != cols {
		if s.Buf != nil {
			c.freeBuf(bufOf(s))
		}
		s = c.NewActs(max(rows, 8), cols)
		c.arena.scratch[i] = s
	}
	return s.Slice(0, rows)
}

var (
	_ backend.Backend        = (*CUDA)(nil)
	_ backend.RowsDownloader = (*CUDA)(nil)
	_ backend.RowsUploader   = (*CUDA)(nil)
)

// IsUnavailable reports whether err says there is no usable GPU (no
// driver, no device, too old a device) rather than a failure of one.
func IsUnavailable(err error) bool {
	return errors.Is(err, cu.ErrNoDriver) || errors.Is(err, cu.ErrNoDevice) || (err != nil && strings.Contains(err.Error(), "compute capability"))
}

// FreeMemory is the free memory of device 0 (for planning before New).
func FreeMemory() (int64, error) {
	if err := Available(); err != nil {
		return 0, err
	}
	runtime.LockOSThread() // the context is current on this thread only
	defer runtime.UnlockOSThread()
	d, err := cu.GetDevice(0)
	if err != nil {
		return 0, err
	}
	if _, err := d.PrimaryContext(); err != nil {
		return 0, err
	}
	defer d.ReleasePrimaryContext()
	free, _, err := cu.MemInfo()
	return max(free-driverReserve, 0), err
}

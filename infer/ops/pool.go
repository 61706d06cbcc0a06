package ops

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Each Engine has one persistent worker pool that runs its large kernels on
// several cores (the package-level functions use the default engine's). A job
// is split into chunks of output rows; the caller and the workers claim
// chunks from a shared counter until none is left. Each output element is
// computed by exactly one participant with the same code whatever the
// chunking, so results never depend on the thread count.
//
// Workers that run out of work spin for a short while (spinFor) watching for
// the next job before they park: the kernels of one decode step come back to
// back, and waking a parked thread costs tens of microseconds on a VM.
//
// One job runs at a time on a pool. A caller that finds the pool busy
// (another goroutine's job, or a kernel called from inside a job) runs its
// work inline instead of waiting, so concurrent callers never deadlock.
// Pools of different engines are independent: each has its own workers.

// task is a job's work, one chunk at a time.
type task interface {
	runChunk(i int)
}

// spinFor is how long an idle worker watches for the next job.
var spinFor = 100 * time.Microsecond

const (
	// maxChunks bounds the chunks of one job (16 bits of the job word).
	maxChunks = 1<<16 - 1
	// maxThreads bounds the threads of an engine (NewEngine).
	maxThreads = 1024
)

type worker struct {
	sleeping atomic.Bool // parked (or about to park) on wake
	quit     atomic.Bool
	wake     chan struct{}
}

type pool struct {
	mu       sync.Mutex   // held while a job runs, and by setThreads and close
	threads  int          // participants including the caller
	nthreads atomic.Int32 // threads, for lock-free readers
	workers  []*worker
	gen      uint32

	// word is the current job: generation (32 bits) | chunks (16) | next
	// unclaimed chunk (16). A chunk is claimed by a CAS that advances next;
	// the generation makes a stale claim fail.
	word      atomic.Uint64
	completed atomic.Int64        // chunks of the current job finished
	fault     atomic.Pointer[any] // the first panic of the current job's chunks
	job       task                // read only by a participant holding a claim

	// The job descriptions, reused so that starting a job allocates nothing.
	mv mvTask
	mm mmTask
	fn fnTask
}

// newPool starts a pool of n threads (1 ≤ n ≤ maxThreads): n−1 workers.
func newPool(n int) *pool {
	p := &pool{}
	p.resize(n)
	return p
}

// setThreads resizes the pool to n threads (1 ≤ n ≤ maxThreads).
func (p *pool) setThreads(n int) {
	p.mu.Lock()
	p.resize(n)
	p.mu.Unlock()
}

// close stops the workers (after the running job, if any); the pool then
// runs every job inline on its caller. Idempotent.
func (p *pool) close() { p.setThreads(1) }

// resize starts or stops workers so that n threads (the caller and n−1
// workers) take part in a job; p.mu is held or p is not shared yet.
func (p *pool) resize(n int) {
	for len(p.workers) > n-1 {
		w := p.workers[len(p.workers)-1]
		p.workers = p.workers[:len(p.workers)-1]
		w.quit.Store(true)
		if w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	for len(p.workers) < n-1 {
		w := &worker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.worker(w)
	}
	p.threads = n
	p.nthreads.Store(int32(n))
}

func (p *pool) hasWork() bool {
	w := p.word.Load()
	return w&0xffff < w>>16&0xffff
}

// claim takes the next chunk of the current job, or returns −1.
func (p *pool) claim() int {
	for {
		w := p.word.Load()
		if w&0xffff >= w>>16&0xffff {
			return -1
		}
		if p.word.CompareAndSwap(w, w+1) {
			return int(w & 0xffff)
		}
	}
}

func (p *pool) work() {
	for {
		i := p.claim()
		if i < 0 {
			return
		}
		p.chunk(i)
		p.completed.Add(1)
	}
}

// chunk runs chunk i; a panic in it (a fault reading a memory-mapped file
// that shrank, say) is kept for run to raise on the job's caller, where it
// can be recovered, instead of killing the process from a worker.
func (p *pool) chunk(i int) {
	defer p.keepPanic()
	p.job.runChunk(i)
}

// keepPanic records a chunk's panic (the deferred function itself, so that
// recover works; it allocates only when there is one).
func (p *pool) keepPanic() {
	if r := recover(); r != nil {
		v := r
		p.fault.CompareAndSwap(nil, &v)
	}
}

func (p *pool) worker(w *worker) {
	// A fault in mapped memory becomes a panic (kept by chunk) rather than
	// a fatal error, as on the job's own goroutine.
	debug.SetPanicOnFault(true)
	for !w.quit.Load() {
		p.work()
		if p.spin(w) {
			continue
		}
		// Park. Announce it, then look once more: a job published before
		// the announcement is seen here, one published after it wakes us.
		w.sleeping.Store(true)
		if p.hasWork() || w.quit.Load() {
			if w.sleeping.CompareAndSwap(true, false) {
				continue
			}
			// A waker claimed us first: its token is on the way.
		}
		<-w.wake
	}
}

// spin watches for new work for up to spinFor; true if some appeared.
func (p *pool) spin(w *worker) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if p.hasWork() {
			return true
		}
		if i%64 == 0 {
			if w.quit.Load() || time.Since(start) > spinFor {
				return false
			}
			runtime.Gosched()
		}
	}
}

// start claims the pool for a job of nchunks chunks; false if it is busy or
// the job would run on one thread anyway. On true the caller fills its task
// and calls run.
func (p *pool) start(nchunks int) bool {
	if nchunks < 2 || nchunks > maxChunks || !p.mu.TryLock() {
		return false
	}
	if p.threads < 2 {
		p.mu.Unlock()
		return false
	}
	return true
}

// run executes the job on the caller and the workers and releases the pool.
func (p *pool) run(job task, nchunks int) {
	p.job = job
	p.completed.Store(0)
	p.gen++
	p.word.Store(uint64(p.gen)<<32 | uint64(nchunks)<<16)
	for _, w := range p.workers[:min(len(p.workers), nchunks-1)] {
		if w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	p.work()
	for i := 1; p.completed.Load() < int64(nchunks); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
	// Drop the references to the caller's data before releasing the pool.
	p.job = nil
	p.mv, p.mm, p.fn = mvTask{}, mmTask{}, fnTask{}
	fault := p.fault.Swap(nil)
	p.mu.Unlock()
	if fault != nil {
		panic(*fault)
	}
}

// chunksPerThread is how finely a job is split: enough chunks that a late
// or slowed participant leaves little imbalance at the end, few enough that
// the per-chunk start (no prefetch of its first rows) is small. 8 measured
// best of 4–64 for 32–90 MiB bf16 matrices on 2 threads.
const chunksPerThread = 8

// chunkRows splits rows into about chunksPerThread chunks per thread, each
// a multiple of 12 rows (of the register tiles' 1 or 3 rows) and at least
// minRows.
func chunkRows(rows, threads, minRows int) (size, n int) {
	c := chunksPerThread * threads
	size = (rows + c - 1) / c
	size = max(size, minRows)
	size = (size + 11) / 12 * 12
	return size, (rows + size - 1) / size
}

type mvTask struct {
	k      *kernelSet
	m      Mat
	dst, x []float32
	size   int
}

func (t *mvTask) runChunk(i int) {
	r0 := i * t.size
	r1 := min(r0+t.size, t.m.Rows)
	t.m.mvRange(t.k, r0, r1, t.dst, t.x)
}

type mmTask struct {
	k       *kernelSet
	m       Mat
	dst, xs [][]float32
	in      *mmtInputs
	size    int
}

func (t *mmTask) runChunk(i int) {
	r0 := i * t.size
	r1 := min(r0+t.size, t.m.Rows)
	t.m.mmRange(t.k, r0, r1, t.dst, t.xs, t.in)
}

// fnTask runs f(i) for chunk i (setup code, bandwidth measurement; it may
// allocate the closure).
type fnTask struct{ f func(i int) }

func (t *fnTask) runChunk(i int) { t.f(i) }

// parallelMatVec runs a MatVec on the pool; false if it did not (pool busy
// or one thread), and the caller runs it inline.
func (p *pool) parallelMatVec(k *kernelSet, m Mat, dst, x []float32) bool {
	// ≥ 32 KiB of weights per chunk.
	minRows := (32 << 10) / max(1, int(m.DType.RowBytes(m.Cols)))
	size, n := chunkRows(m.Rows, int(p.nthreads.Load()), minRows)
	if !p.start(n) {
		return false
	}
	p.mv = mvTask{k: k, m: m, dst: dst, x: x, size: size}
	p.run(&p.mv, n)
	return true
}

func (p *pool) parallelMatMul(k *kernelSet, m Mat, dst, xs [][]float32, in *mmtInputs) bool {
	size, n := chunkRows(m.Rows, int(p.nthreads.Load()), 12)
	if !p.start(n) {
		return false
	}
	p.mm = mmTask{k: k, m: m, dst: dst, xs: xs, in: in, size: size}
	p.run(&p.mm, n)
	return true
}

// Parallel runs f(i) for i in [0, n) on the default engine's pool (inline
// when it is busy), each i exactly once, in no fixed order. It is for coarse
// work: the closure may allocate.
func Parallel(n int, f func(i int)) { defaultEngine.Parallel(n, f) }

// parallel is Parallel on p.
func (p *pool) parallel(n int, f func(i int)) {
	for base := 0; base < n; base += maxChunks {
		m := min(n-base, maxChunks)
		g := f
		if base > 0 {
			g = func(i int) { f(base + i) }
		}
		if !p.start(m) {
			for i := range m {
				g(i)
			}
			continue
		}
		p.fn = fnTask{f: g}
		p.run(&p.fn, m)
	}
}

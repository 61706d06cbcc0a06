package ops

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestParallelRunsEachIndexOnce(t *testing.T) {
	for _, th := range []int{1, 2, 3, 5} {
		withThreads(th, func() {
			if defaultEngine.Threads() != th {
				t.Fatalf("defaultEngine.Threads() = %d, want %d", defaultEngine.Threads(), th)
			}
			for _, n := range []int{0, 1, 2, 7, 100, maxChunks + 5} {
				counts := make([]atomic.Int32, n)
				Parallel(n, func(i int) { counts[i].Add(1) })
				for i := range counts {
					if c := counts[i].Load(); c != 1 {
						t.Fatalf("threads %d n %d: index %d ran %d times", th, n, i, c)
					}
				}
			}
		})
	}
}

// A kernel called from inside a pool job runs inline instead of deadlocking.
func TestParallelNested(t *testing.T) {
	withThreads(2, func() {
		var total atomic.Int32
		Parallel(4, func(i int) {
			Parallel(3, func(j int) { total.Add(1) })
		})
		if total.Load() != 12 {
			t.Fatalf("nested Parallel ran %d", total.Load())
		}
	})
}

// Workers are started and stopped while jobs keep coming; parked and
// spinning workers both pick the jobs up.
func TestResizeWhileRunning(t *testing.T) {
	defer setThreads(0)
	var total atomic.Int64
	want := int64(0)
	for round := range 200 {
		setThreads(1 + round%4)
		n := 1 + round%9
		Parallel(n, func(int) { total.Add(1) })
		want += int64(n)
		if round%50 == 0 {
			time.Sleep(2 * spinFor) // let the workers park
		}
	}
	if total.Load() != want {
		t.Fatalf("ran %d chunks, want %d", total.Load(), want)
	}
}

func TestChunkRows(t *testing.T) {
	for _, rows := range []int{1, 3, 4, 5, 100, 4096, 11264} {
		for _, th := range []int{1, 2, 3, 16} {
			size, n := chunkRows(rows, th, 8)
			if size%12 != 0 || size < 8 || size < min(12, rows) || n*size < rows || (n-1)*size >= rows {
				t.Fatalf("chunkRows(%d, %d) = %d×%d", rows, th, n, size)
			}
		}
	}
}

// BenchmarkPoolWake is the cost of one pool job of two empty chunks: the
// latency a parallel kernel pays to wake the workers.
func BenchmarkPoolWake(b *testing.B) {
	withThreads(2, func() {
		f := func(int) {}
		for b.Loop() {
			Parallel(2, f)
		}
	})
}

// A panic in a chunk run by a worker (as a fault in a memory-mapped file
// that shrank would be) reaches the job's caller, where it can be
// recovered, and the pool stays usable.
func TestPanicInAChunkReachesTheCaller(t *testing.T) {
	e, err := NewEngine(EngineOptions{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := func() (r any) {
		defer func() { r = recover() }()
		e.Parallel(64, func(i int) {
			if i == 37 {
				panic("chunk 37")
			}
		})
		return nil
	}()
	if got != "chunk 37" {
		t.Fatalf("recovered %v", got)
	}
	var n atomic.Int64
	e.Parallel(64, func(int) { n.Add(1) })
	if n.Load() != 64 {
		t.Fatalf("after the panic the pool ran %d of 64 chunks", n.Load())
	}
}

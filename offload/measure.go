package offload

import (
	"encoding/binary"
	"runtime"
	"sync"
	"time"
)

// MeasureCPUBandwidth measures this machine's host memory read bandwidth in
// GB/s: all cores summing a buffer of size bytes (much larger than the
// caches: 256 MiB or more for a real figure), repeated for at least minDur,
// best pass kept. It is an upper bound for what CPU kernels reading bf16
// weights achieve; declare a lower figure when they are compute-bound.
func MeasureCPUBandwidth(size int, minDur time.Duration) float64 {
	size = max(size, 1<<20) &^ 7
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i)
	}
	workers := runtime.GOMAXPROCS(0)
	chunk := (size / workers) &^ 7
	var sink uint64
	var mu sync.Mutex
	best := 0.0
	start := time.Now()
	for pass := 0; pass < 3 || time.Since(start) < minDur; pass++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			lo, hi := w*chunk, (w+1)*chunk
			if w == workers-1 {
				hi = size
			}
			wg.Add(1)
			go func(b []byte) {
				defer wg.Done()
				var s0, s1, s2, s3 uint64
				for i := 0; i+32 <= len(b); i += 32 {
					s0 += binary.LittleEndian.Uint64(b[i:])
					s1 += binary.LittleEndian.Uint64(b[i+8:])
					s2 += binary.LittleEndian.Uint64(b[i+16:])
					s3 += binary.LittleEndian.Uint64(b[i+24:])
				}
				mu.Lock()
				sink += s0 + s1 + s2 + s3
				mu.Unlock()
			}(buf[lo:hi])
		}
		wg.Wait()
		if d := time.Since(t0).Seconds(); d > 0 {
			best = max(best, float64(size)/d/1e9)
		}
	}
	runtime.KeepAlive(sink)
	return best
}

package ops

import (
	"time"
	"unsafe"
)

// MeasureReadBandwidth measures this machine's memory read bandwidth in GB/s
// (1e9 bytes per second): the engine's threads (e.Threads()) stream 1 MiB
// chunks of a buffer of the given size (use several times the last-level
// cache; at least 1 MiB is used) and sum them, with the same software
// prefetch as the matrix-vector kernels. After a warm-up pass it runs passes
// for about half a second and reports the fastest: the capability of the
// machine (on a shared machine slower passes measure the neighbours). It
// allocates and touches the buffer first, so it takes a moment.
func (e *Engine) MeasureReadBandwidth(bytes int) float64 {
	const block = 1 << 20 // per-chunk bytes, a multiple of the kernels' 128
	bytes = max(bytes, block) / block * block
	buf := make([]uint64, bytes/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	nchunks := bytes / block
	sums := make([]uint64, nchunks)
	pass := func() time.Duration {
		start := time.Now()
		e.Parallel(nchunks, func(i int) {
			part := buf[i*block/8 : (i+1)*block/8]
			sums[i] += readSum(unsafe.Slice((*byte)(unsafe.Pointer(&part[0])), block))
		})
		return time.Since(start)
	}
	pass()
	best := time.Duration(1<<63 - 1)
	var total time.Duration
	for n := 0; n < 3 || (total < 500*time.Millisecond && n < 50); n++ {
		d := pass()
		best = min(best, d)
		total += d
	}
	sink = sums[0]
	return float64(bytes) / best.Seconds() / 1e9
}

// sink keeps the measured sums observable so the reads cannot be optimised away.
//
//lint:ignore U1000 written, deliberately never read
var sink uint64

// readSumGo adds up p as little-endian uint64 words (len(p) a multiple of
// 128), eight independent sums to keep the loads in flight.
func readSumGo(p []byte) uint64 {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(p))), len(p)/8)
	var s [8]uint64
	for i := 0; i+8 <= len(w); i += 8 {
		v := w[i : i+8 : i+8]
		s[0] += v[0]
		s[1] += v[1]
		s[2] += v[2]
		s[3] += v[3]
		s[4] += v[4]
		s[5] += v[5]
		s[6] += v[6]
		s[7] += v[7]
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
}

package ops

import (
	"testing"
	"unsafe"
)

func TestReadSum(t *testing.T) {
	buf := make([]uint64, 4096)
	var want uint64
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
		want += buf[i]
	}
	p := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	if got := readSum(p); got != want {
		t.Fatalf("readSum = %x, want %x", got, want)
	}
	if got := readSumGo(p); got != want {
		t.Fatalf("readSumGo = %x, want %x", got, want)
	}
}

func TestMeasureReadBandwidth(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory bandwidth")
	}
	gbps := defaultEngine.MeasureReadBandwidth(8 << 20)
	if !(gbps > 0.1) {
		t.Fatalf("bandwidth %v GB/s", gbps)
	}
	t.Logf("read bandwidth (8 MiB, %d threads): %.1f GB/s", defaultEngine.Threads(), gbps)
}

// BenchmarkReadBandwidth streams a 512 MiB buffer (16× the 32 MiB L3).
func BenchmarkReadBandwidth(b *testing.B) {
	best := 0.0
	for range b.N {
		best = max(best, defaultEngine.MeasureReadBandwidth(512<<20))
	}
	b.ReportMetric(best, "GB/s")
}

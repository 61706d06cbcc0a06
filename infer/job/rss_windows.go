//go:build windows

package job

// peakRSS is the process's peak resident set: unknown (0) on Windows,
// where it would be GetProcessMemoryInfo's PeakWorkingSetSize, not bound
// yet (the benchmark report then shows a peak RSS of 0).
func peakRSS() int64 { return 0 }

package ops

import "runtime"

// The tests of this package switch the default engine's settings in place
// (every variant and thread count must give the same bits); nothing outside
// the tests changes an engine after NewEngine.

func setKernel(name string) bool {
	k := kernelByName(name)
	if k == nil {
		return false
	}
	defaultEngine.k.Store(k)
	return true
}

func setThreads(n int) {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	defaultEngine.pool.setThreads(min(n, maxThreads))
}

func setComputeDType(name string) error {
	bf16, err := parseComputeDType(name)
	if err != nil {
		return err
	}
	defaultEngine.bf16.Store(bf16)
	return nil
}

// Package testalloc counts allocations for the tests that hold a hot path
// to none, except under the race detector, whose instrumentation allocates
// in the code it checks (the count there says nothing of the code's own).
package testalloc

import "testing"

// PerRun is testing.AllocsPerRun(runs, f); under the race detector it runs
// f once (its effects may matter to the test) and reports 0.
func PerRun(t testing.TB, runs int, f func()) float64 {
	t.Helper()
	if raceEnabled {
		f()
		return 0
	}
	return testing.AllocsPerRun(runs, f)
}

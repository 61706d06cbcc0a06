package batchjob

import "testing"

// mustMkfifo makes a named pipe at p, or skips the test where the system
// has none (Windows).
func mustMkfifo(t *testing.T, p string) {
	t.Helper()
	if err := mkfifo(p); err != nil {
		t.Skip("no named pipes here:", err)
	}
}

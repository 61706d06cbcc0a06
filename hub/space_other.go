//go:build !unix && !windows

package hub

// freeSpace is unknown where statfs does not exist: no check.
func freeSpace(string) (int64, bool) { return 0, false }

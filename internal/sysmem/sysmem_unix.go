//go:build unix

package sysmem

import "golang.org/x/sys/unix"

// rlimInfinity is RLIMIT_AS's "no limit".
const rlimInfinity = unix.RLIM_INFINITY

var system = env{rlimitAS: func() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}}

func memAvailable(path string) (int64, error) {
	return statusKB(path, "MemAvailable:")
}

//go:build windows

package sysmem

import "errors"

// rlimInfinity stands for "no limit"; Windows has no RLIMIT_AS.
const rlimInfinity = ^uint64(0)

// On Windows there is no /proc, no cgroup and no RLIMIT_AS: Read finds no
// bound (Memory.OK is false, "no limit known"), as on a Linux system
// without /proc. Reading the machine's free memory there
// (GlobalMemoryStatusEx) is not done yet.
var system = env{rlimitAS: func() (uint64, error) {
	return 0, errors.New("RLIMIT_AS does not exist on Windows")
}}

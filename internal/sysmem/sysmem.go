// Package sysmem says how much memory a process may still use: the
// machine's available memory (/proc/meminfo MemAvailable), capped by the
// cgroup's limit (v2 memory.max − memory.current, or v1
// memory.limit_in_bytes − memory.usage_in_bytes) where the process runs in
// a container or a batch scheduler's allocation.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Available is the memory the process can still allocate, in bytes, and
// where the figure comes from; ok is false where nothing could be read
// (then no limit is known).
func Available() (n int64, source string, ok bool) {
	if v, err := memAvailable("/proc/meminfo"); err == nil {
		n, source, ok = v, "MemAvailable", true
	}
	if lim, err := cgroupFree(); err == nil && (!ok || lim < n) {
		n, source, ok = lim, "the cgroup's memory limit", true
	}
	return n, source, ok
}

func memAvailable(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemAvailable")
}

// cgroupFree is limit − usage of the process's memory cgroup.
func cgroupFree() (int64, error) {
	v2 := func(dir string) (int64, error) {
		lim, err := readInt(dir + "/memory.max")
		if err != nil {
			return 0, err
		}
		cur, err := readInt(dir + "/memory.current")
		if err != nil {
			return 0, err
		}
		return max(0, lim-cur), nil
	}
	v1 := func(dir string) (int64, error) {
		lim, err := readInt(dir + "/memory.limit_in_bytes")
		if err != nil {
			return 0, err
		}
		if lim >= 1<<62 { // "no limit"
			return 0, fmt.Errorf("unlimited")
		}
		cur, err := readInt(dir + "/memory.usage_in_bytes")
		if err != nil {
			return 0, err
		}
		return max(0, lim-cur), nil
	}
	if n, err := v2("/sys/fs/cgroup"); err == nil {
		return n, nil
	}
	return v1("/sys/fs/cgroup/memory")
}

// readInt reads a cgroup value ("max" is no limit: an error here).
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, fmt.Errorf("unlimited")
	}
	return strconv.ParseInt(s, 10, 64)
}

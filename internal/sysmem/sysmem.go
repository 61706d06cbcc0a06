// Package sysmem says how much memory a process may still use: the lowest
// of the machine's available memory (/proc/meminfo MemAvailable), the
// cgroup's limit less its usage (v2 memory.max − memory.current, or v1
// memory.limit_in_bytes − memory.usage_in_bytes, for the process's own
// cgroup from /proc/self/cgroup and each of its parents) where the process
// runs in a container or a batch scheduler's allocation, and the address
// space limit (RLIMIT_AS, `ulimit -v`) less the address space the process
// already holds (/proc/self/status VmSize), and which of them applied.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// The sources of the figure, as Available and Read name them (for log
// lines: "… leaves 3.1 GiB").
const (
	SourceMemAvailable = "MemAvailable"
	SourceCgroup       = "the cgroup's memory limit"
	SourceAddressSpace = "RLIMIT_AS (ulimit -v) less the address space in use"
)

// Bound is one limit on the memory the process may still use.
type Bound struct {
	Known bool  // false: not found or unlimited
	Bytes int64 // what it leaves, ≥ 0
}

// Memory is what Read found: the lowest known bound and each bound.
type Memory struct {
	Bytes  int64  // the lowest of the known bounds
	Source string // which bound that is (one of the Source constants)
	OK     bool   // false where no bound is known (then no limit is known)

	MemAvailable Bound // the machine's available memory
	Cgroup       Bound // the cgroup's limit less usage (the lowest along the path)
	AddressSpace Bound // RLIMIT_AS less VmSize
}

// AddressSpaceLimited reports whether the address-space limit is the one
// that applies. Under it, memory-mapped files take address space as heap
// does: a checkpoint that is mapped after this was read needs its size
// counted too (it cannot be paged out of an address-space limit).
func (m Memory) AddressSpaceLimited() bool { return m.OK && m.Source == SourceAddressSpace }

// Available is the memory the process can still allocate, in bytes, and
// where the figure comes from; ok is false where nothing could be read
// (then no limit is known). See Read for each bound.
func Available() (n int64, source string, ok bool) {
	m := Read()
	return m.Bytes, m.Source, m.OK
}

// Read reads every bound of the real system.
func Read() Memory { return system.read() }

// env is where the bounds are read from: the real system, or a test's
// fake files and limit.
type env struct {
	root     string                         // prefix of /proc and /sys paths ("" for the real ones)
	rlimitAS func() (cur uint64, err error) // RLIMIT_AS's soft limit
}

func (e env) read() Memory {
	var m Memory
	if v, err := memAvailable(e.root + "/proc/meminfo"); err == nil {
		m.MemAvailable = Bound{true, v}
	}
	if v, ok := e.cgroupFree(); ok {
		m.Cgroup = Bound{true, v}
	}
	if v, ok := e.addressSpaceFree(); ok {
		m.AddressSpace = Bound{true, v}
	}
	for _, b := range []struct {
		b      Bound
		source string
	}{{m.MemAvailable, SourceMemAvailable}, {m.Cgroup, SourceCgroup}, {m.AddressSpace, SourceAddressSpace}} {
		if b.b.Known && (!m.OK || b.b.Bytes < m.Bytes) {
			m.Bytes, m.Source, m.OK = b.b.Bytes, b.source, true
		}
	}
	return m
}

// statusKB reads the "key: N kB" line of a /proc file, in bytes.
func statusKB(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, err
			}
			if kb < 0 || kb > 1<<52 {
				return 0, fmt.Errorf("%s %d kB out of range", key, kb)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

// addressSpaceFree is RLIMIT_AS less the process's VmSize, when a limit is
// set.
func (e env) addressSpaceFree() (int64, bool) {
	lim, err := e.rlimitAS()
	if err != nil || lim == rlimInfinity || lim > 1<<62 {
		return 0, false
	}
	used, err := statusKB(e.root+"/proc/self/status", "VmSize:")
	if err != nil {
		return 0, false
	}
	return max(0, int64(lim)-used), true
}

// cgroupFree is the lowest limit − usage over the process's memory cgroup
// and its parents (v2, else v1); false when no level sets a limit.
func (e env) cgroupFree() (int64, bool) {
	v2, v1 := e.cgroupPaths()
	base2 := e.root + "/sys/fs/cgroup"
	if n, ok := walkCgroup(base2, v2, "memory.max", "memory.current"); ok {
		return n, true
	}
	// v1: the memory controller's own hierarchy; inside a container the
	// process's path may not exist under the mount (its cgroup is the
	// mount's root), which walkCgroup's root level covers.
	return walkCgroup(e.root+"/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes")
}

// cgroupPaths reads the process's v2 path ("0::/…") and v1 memory path
// ("N:…memory…:/…") from /proc/self/cgroup ("/" when absent).
func (e env) cgroupPaths() (v2, v1 string) {
	v2, v1 = "/", "/"
	b, err := os.ReadFile(e.root + "/proc/self/cgroup")
	if err != nil || len(b) > 1<<20 {
		return v2, v1
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case ctrlHas(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	return path.Clean(v2), path.Clean(v1)
}

func ctrlHas(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// walkCgroup returns the lowest limit − usage over base+p and each parent
// up to base, for the levels whose limit file holds a number below "no
// limit".
func walkCgroup(base, p, limitFile, usageFile string) (int64, bool) {
	best, found := int64(0), false
	for {
		dir := base + p
		if p == "/" {
			dir = base
		}
		if lim, err := readInt(dir + "/" + limitFile); err == nil && lim < 1<<62 {
			if cur, err := readInt(dir + "/" + usageFile); err == nil {
				if n := max(0, lim-cur); !found || n < best {
					best, found = n, true
				}
			}
		}
		if p == "/" {
			return best, found
		}
		p = path.Dir(p)
	}
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

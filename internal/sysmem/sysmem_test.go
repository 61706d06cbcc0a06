//go:build unix

package sysmem

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

const gib = 1 << 30

// fakeSystem writes files under a temporary root (paths as on the real
// system) and returns the env reading them with the given RLIMIT_AS.
func fakeSystem(t *testing.T, files map[string]string, rlimit uint64) env {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return env{root: root, rlimitAS: func() (uint64, error) { return rlimit, nil }}
}

const meminfo = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20971520 kB\n" // 20 GiB

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		rlimit  uint64
		bytes   int64
		source  string
		as      bool // AddressSpaceLimited
		cg, asp Bound
	}{
		{"MemAvailable only", map[string]string{"proc/meminfo": meminfo}, unix.RLIM_INFINITY,
			20 * gib, SourceMemAvailable, false, Bound{}, Bound{}},
		{"cgroup v2 at the root", map[string]string{"proc/meminfo": meminfo,
			"sys/fs/cgroup/memory.max": "8589934592\n", "sys/fs/cgroup/memory.current": "1073741824\n"}, unix.RLIM_INFINITY,
			7 * gib, SourceCgroup, false, Bound{true, 7 * gib}, Bound{}},
		{"cgroup v2 unlimited", map[string]string{"proc/meminfo": meminfo,
			"sys/fs/cgroup/memory.max": "max\n", "sys/fs/cgroup/memory.current": "1073741824\n"}, unix.RLIM_INFINITY,
			20 * gib, SourceMemAvailable, false, Bound{}, Bound{}},
		// The process's own cgroup and a parent limit it; the lowest wins.
		{"cgroup v2 path and parents", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/slurm/job7/step0\n",
			"sys/fs/cgroup/slurm/job7/memory.max": "6442450944", "sys/fs/cgroup/slurm/job7/memory.current": "2147483648",
			"sys/fs/cgroup/slurm/job7/step0/memory.max": "max", "sys/fs/cgroup/slurm/job7/step0/memory.current": "1",
			"sys/fs/cgroup/slurm/memory.max": "17179869184", "sys/fs/cgroup/slurm/memory.current": "1"}, unix.RLIM_INFINITY,
			4 * gib, SourceCgroup, false, Bound{true, 4 * gib}, Bound{}},
		{"cgroup v1 path", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "5:cpu:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712", "sys/fs/cgroup/memory/memory.usage_in_bytes": "5",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "3221225472", "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "1073741824"},
			unix.RLIM_INFINITY, 2 * gib, SourceCgroup, false, Bound{true, 2 * gib}, Bound{}},
		{"cgroup v1 at the root (container)", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "3221225472", "sys/fs/cgroup/memory/memory.usage_in_bytes": "0"},
			unix.RLIM_INFINITY, 3 * gib, SourceCgroup, false, Bound{true, 3 * gib}, Bound{}},
		// ulimit -v 6G with 1.5 GiB of address space in use.
		{"RLIMIT_AS", map[string]string{"proc/meminfo": meminfo, "proc/self/status": "Name:\tpp-offline\nVmPeak:\t 2000000 kB\nVmSize:\t 1572864 kB\n",
			"sys/fs/cgroup/memory.max": "8589934592", "sys/fs/cgroup/memory.current": "0"}, 6 * gib,
			gib * 9 / 2, SourceAddressSpace, true, Bound{true, 8 * gib}, Bound{true, gib * 9 / 2}},
		{"RLIMIT_AS above the others", map[string]string{"proc/meminfo": meminfo, "proc/self/status": "VmSize:\t 1048576 kB\n"}, 64 * gib,
			20 * gib, SourceMemAvailable, false, Bound{}, Bound{true, 63 * gib}},
		{"RLIMIT_AS used up", map[string]string{"proc/meminfo": meminfo, "proc/self/status": "VmSize:\t 8388608 kB\n"}, 6 * gib,
			0, SourceAddressSpace, true, Bound{}, Bound{true, 0}},
		{"RLIMIT_AS without VmSize", map[string]string{"proc/meminfo": meminfo}, 6 * gib,
			20 * gib, SourceMemAvailable, false, Bound{}, Bound{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fakeSystem(t, tc.files, tc.rlimit).read()
			if !m.OK || m.Bytes != tc.bytes || m.Source != tc.source || m.AddressSpaceLimited() != tc.as ||
				m.Cgroup != tc.cg || m.AddressSpace != tc.asp || m.MemAvailable != (Bound{true, 20 * gib}) {
				t.Errorf("%+v", m)
			}
		})
	}
}

func TestNothingKnown(t *testing.T) {
	e := fakeSystem(t, map[string]string{"proc/meminfo": "MemTotal: 1 kB\n"}, 0)
	e.rlimitAS = func() (uint64, error) { return 0, errors.New("no") }
	if m := e.read(); m.OK || m.Bytes != 0 || m.Source != "" {
		t.Errorf("%+v", m)
	}
	bad := fakeSystem(t, map[string]string{"proc/meminfo": "MemAvailable: lots kB\n", "proc/self/status": "VmSize: -5 kB\n"}, gib)
	if m := bad.read(); m.OK {
		t.Errorf("garbage read as a bound: %+v", m)
	}
}

// The real system: whatever it holds, Available agrees with Read, and the
// address-space bound is known exactly when RLIMIT_AS is set.
func TestRealSystem(t *testing.T) {
	m := Read()
	n, source, ok := Available()
	if ok != m.OK || source != m.Source || ok && n <= 0 {
		t.Errorf("Available %d %q %v, Read %+v", n, source, ok, m)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err == nil && (rl.Cur == unix.RLIM_INFINITY) == m.AddressSpace.Known {
		t.Errorf("RLIMIT_AS %d, bound %+v", rl.Cur, m.AddressSpace)
	}
}

// Under a real RLIMIT_AS (the test lowers its own soft limit to its
// address space plus 1 GiB, as `ulimit -v` would, and restores it) the
// figure is that bound, said in Source.
func TestRealRlimitAS(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &old); err != nil {
		t.Skip(err)
	}
	used, err := statusKB("/proc/self/status", "VmSize:")
	if err != nil {
		t.Skip(err)
	}
	lim := uint64(used) + gib
	if lim > old.Max {
		t.Skipf("hard limit %d", old.Max)
	}
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: old.Max}); err != nil {
		t.Skip(err)
	}
	m := Read()
	if err := unix.Setrlimit(unix.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	if !m.AddressSpace.Known || m.AddressSpace.Bytes > gib || m.AddressSpace.Bytes < gib/2 {
		t.Fatalf("address space bound %+v under a limit of VmSize + 1 GiB", m.AddressSpace)
	}
	if m.MemAvailable.Known && m.MemAvailable.Bytes > gib && (!m.Cgroup.Known || m.Cgroup.Bytes > gib) &&
		(m.Source != SourceAddressSpace || !m.AddressSpaceLimited() || m.Bytes != m.AddressSpace.Bytes) {
		t.Errorf("%+v", m)
	}
}

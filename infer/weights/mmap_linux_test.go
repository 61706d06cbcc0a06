package weights

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// mappingFlags returns the VmFlags of the mapping in /proc/self/smaps that
// holds addr.
func mappingFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(line)[1:]
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return nil
}

// advisedHuge reports whether the mapping holding data is marked
// MADV_HUGEPAGE ("hg"), with its VmFlags.
func advisedHuge(t *testing.T, data []byte) ([]string, bool) {
	fl := mappingFlags(t, uintptr(unsafe.Pointer(&data[0])))
	for _, x := range fl {
		if x == "hg" {
			return fl, true
		}
	}
	return fl, false
}

// The weight mapping carries MADV_HUGEPAGE ("hg" in smaps), so that the
// kernel reads a cold file into 2 MiB folios; the mapping is still the
// file's bytes.
func TestWeightMappingAdvisedForHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("this kernel has no transparent huge pages:", err)
	}
	p := filepath.Join(t.TempDir(), "w.safetensors")
	v := make([]float32, 1<<20)
	for i := range v {
		v[i] = float32(i)
	}
	if err := WriteFile(p, []*Tensor{Float32Tensor("x", []int{len(v)}, v)}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fl, ok := advisedHuge(t, f.data); !ok {
		t.Fatalf("the weight mapping has VmFlags %v, want hg (MADV_HUGEPAGE)", fl)
	}
	x, err := f.Get("x", len(v))
	if err != nil {
		t.Fatal(err)
	}
	got := x.Float32s()
	for i, g := range got {
		if g != float32(i) {
			t.Fatalf("x[%d] = %v through the mapping, want %d", i, g, i)
		}
	}
}

// RandomMapped's memory is an anonymous mapping with the same advice as a
// weight mapping (benchmarks on random weights read huge pages, as a real
// run reads its checkpoint's folios).
func TestRandomMappedAdvisedForHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("this kernel has no transparent huge pages:", err)
	}
	f := RandomMapped([]Spec{{"x", F32, []int{1 << 20}, 1}}, 1)
	defer f.Close()
	if !f.mapped {
		t.Fatal("RandomMapped fell back to the heap")
	}
	if fl, ok := advisedHuge(t, f.data); !ok {
		t.Fatalf("RandomMapped's mapping has VmFlags %v, want hg (MADV_HUGEPAGE)", fl)
	}
}

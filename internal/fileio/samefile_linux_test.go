package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A folder bind-mounted elsewhere is one folder: its new files under both
// names are one output (root only: skipped when the mount fails).
func TestCheckOutputsBindMount(t *testing.T) {
	defer ResetInputs()
	dir := t.TempDir()
	out, out2 := filepath.Join(dir, "out"), filepath.Join(dir, "out2")
	os.Mkdir(out, 0o755)
	os.Mkdir(out2, 0o755)
	if err := syscall.Mount(out, out2, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(out2, syscall.MNT_DETACH) })
	a, b := filepath.Join(out, "r.wav"), filepath.Join(out2, "r.wav")
	if err := CheckOutputs([]string{a, b}, nil); err == nil || !strings.Contains(err.Error(), a+" and "+b+" are the same file") {
		t.Errorf("bind mount: %v", err)
	}
}

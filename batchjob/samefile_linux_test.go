package batchjob

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Two items writing one file through a folder and its bind mount are
// refused (root only: skipped when the mount fails).
func TestCheckBindMount(t *testing.T) {
	defer fileio.ResetInputs()
	dir := t.TempDir()
	out, out2 := filepath.Join(dir, "out"), filepath.Join(dir, "out2")
	os.Mkdir(out, 0o755)
	os.Mkdir(out2, 0o755)
	if err := syscall.Mount(out, out2, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(out2, syscall.MNT_DETACH) })
	items := []*Item{
		{Line: 1, InputWAV: filepath.Join(dir, "a.wav"), OutputWAV: filepath.Join(out, "r.wav"), OutputText: filepath.Join(out, "a.json"), Settings: def},
		{Line: 2, InputWAV: filepath.Join(dir, "b.wav"), OutputWAV: filepath.Join(out2, "r.wav"), OutputText: filepath.Join(out2, "b.json"), Settings: def},
	}
	want := ":2: output_wav " + items[1].OutputWAV + " is also the output_wav " + items[0].OutputWAV + " of line 1"
	if err := Check(items, "jobs.jsonl", nil, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

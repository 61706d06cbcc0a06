package hub

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A download that fills the disk says which file it was fetching and
// where the write failed, in one line; the partial file is never linked.
// An unsized body (no declared size) skips the free-space check up front,
// so the write itself meets ENOSPC. Needs root for the small tmpfs.
func TestDiskFullNamesTheFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	s := newHub(t, fixtureFiles(t))
	s.Unsized("model.safetensors", true)
	_, err := testClient(s, nil).Fetch(context.Background(), Cache{Dir: dir}, repo, "main", []File{{Name: "model.safetensors"}})
	if err == nil || !strings.HasPrefix(err.Error(), "model.safetensors: writing ") || !strings.Contains(err.Error(), "no space left") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v", err)
	}
}

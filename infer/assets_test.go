package infer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Model files missing from the flags are found in the local Hugging Face
// cache (newest snapshot first), never downloaded.
func TestResolveAssetFromLocalCache(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", home)
	snap := filepath.Join(home, "hub", "models--nvidia--personaplex-7b-v1", "snapshots", "abc123")
	os.MkdirAll(filepath.Join(snap, "voices"), 0o755)
	os.WriteFile(filepath.Join(snap, MoshiName), []byte("x"), 0o644)

	got, err := ResolveAsset("", DefaultRepo, MoshiName, "--moshi-weight")
	if err != nil || got != filepath.Join(snap, MoshiName) {
		t.Fatalf("got %q, %v", got, err)
	}
	if d := CachedVoicesDir(DefaultRepo); d != filepath.Join(snap, "voices") {
		t.Fatalf("voices dir %q", d)
	}
	_, err = ResolveAsset("", DefaultRepo, MimiName, "--mimi-weight")
	if err == nil || !strings.Contains(err.Error(), "does not download") || !strings.Contains(err.Error(), "--mimi-weight") {
		t.Fatalf("missing asset: %v", err)
	}
	// An explicit path wins and must exist.
	if _, err := ResolveAsset(filepath.Join(home, "nope"), DefaultRepo, MimiName, "--mimi-weight"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("explicit missing path: %v", err)
	}
	if _, err := ResolveAsset(home, DefaultRepo, MimiName, "--mimi-weight"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory: %v", err)
	}
}

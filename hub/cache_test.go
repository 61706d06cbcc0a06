package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestCacheDirAndTokenFromEnvironment(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix paths and $HOME (Windows: USERPROFILE)")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "TRANSFORMERS_OFFLINE"} {
		t.Setenv(v, "")
	}
	check := func(want string) {
		t.Helper()
		if got, err := CacheDir(); err != nil || got != want {
			t.Fatalf("CacheDir %q, %v; want %q", got, err, want)
		}
	}
	check(filepath.Join(home, ".cache", "huggingface", "hub"))
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	check("/xdg/huggingface/hub")
	t.Setenv("HF_HOME", "/hfhome")
	check("/hfhome/hub")
	t.Setenv("HF_HUB_CACHE", "/hubcache")
	check("/hubcache")

	// Token: HF_TOKEN, else HF_TOKEN_PATH, else HF_HOME/token (HF_HOME
	// defaulting through XDG_CACHE_HOME).
	xdg := t.TempDir()
	t.Setenv("HF_HOME", "")
	t.Setenv("XDG_CACHE_HOME", xdg)
	if tok, src, err := Token(); tok != "" || src != "" || err != nil {
		t.Fatalf("no token: %q %q %v", tok, src, err)
	}
	os.MkdirAll(filepath.Join(xdg, "huggingface"), 0o755)
	os.WriteFile(filepath.Join(xdg, "huggingface", "token"), []byte("hf_file\n"), 0o600)
	if tok, src, _ := Token(); tok != "hf_file" || src != filepath.Join(xdg, "huggingface", "token") {
		t.Fatalf("token file: %q %q", tok, src)
	}
	other := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(other, []byte("hf_path"), 0o600)
	t.Setenv("HF_TOKEN_PATH", other)
	if tok, _, _ := Token(); tok != "hf_path" {
		t.Fatalf("HF_TOKEN_PATH: %q", tok)
	}
	// Expanded as huggingface_hub expands it: $VAR and ~.
	t.Setenv("PP_TOKEN_DIR", filepath.Dir(other))
	t.Setenv("HF_TOKEN_PATH", "$PP_TOKEN_DIR/tok")
	if tok, _, _ := Token(); tok != "hf_path" {
		t.Fatalf("HF_TOKEN_PATH with $VAR: %q", tok)
	}
	t.Setenv("HF_TOKEN", "hf_env")
	if tok, src, _ := Token(); tok != "hf_env" || src != "HF_TOKEN" {
		t.Fatalf("HF_TOKEN: %q %q", tok, src)
	}
	t.Setenv("HF_TOKEN", "two words")
	if _, _, err := Token(); err == nil {
		t.Fatal("a token with a space accepted")
	}
	for v, want := range map[string]bool{"1": true, "TRUE": true, "yes": true, "0": false, "": false} {
		t.Setenv("HF_HUB_OFFLINE", v)
		if Offline() != want {
			t.Errorf("HF_HUB_OFFLINE=%q: %v", v, !want)
		}
	}
}

func TestValidateNames(t *testing.T) {
	for _, r := range []string{"nvidia/personaplex-7b-v1", "gpt2", "a.b/c_d"} {
		if err := ValidateRepo(r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	for _, r := range []string{"", "a/b/c", "../x", "a/..", "a--b/c", "/abs", "a/b c"} {
		if ValidateRepo(r) == nil {
			t.Errorf("repo %q accepted", r)
		}
	}
	// A fine-tune's folder, as huggingface_hub names it.
	if got := (Cache{Dir: "/c"}).RepoDir("someone/personaplex-ft"); got != filepath.Join("/c", "models--someone--personaplex-ft") {
		t.Errorf("RepoDir %q", got)
	}
	// A revision with slashes goes to the URL as one segment.
	if got := (&Client{Endpoint: "https://h"}).resolveURL("a/b", "refs/pr/1", "voices.tgz"); got != "https://h/a/b/resolve/refs%2Fpr%2F1/voices.tgz" {
		t.Errorf("resolve URL %q", got)
	}
	for _, r := range []string{"main", "v1.0", "refs/pr/1", strings.Repeat("a", 40)} {
		if err := ValidateRevision(r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	for _, r := range []string{"", "..", "a/../../b", "/main", "a b", "main/"} {
		if ValidateRevision(r) == nil {
			t.Errorf("revision %q accepted", r)
		}
	}
}

// hfCache writes a cache as huggingface_hub does: content in blobs/,
// relative symlinks in snapshots/<commit>/, refs/main.
type hfCache struct {
	t       *testing.T
	cache   Cache
	repoDir string
}

func newHFCache(t *testing.T) *hfCache {
	c := Cache{Dir: t.TempDir()}
	return &hfCache{t: t, cache: c, repoDir: c.RepoDir(repo)}
}

func (h *hfCache) add(commit, name, content string) {
	blob := filepath.Join(h.repoDir, "blobs", blobName(content))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	if err := os.WriteFile(blob, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	ptr := filepath.Join(h.repoDir, "snapshots", commit, name)
	os.MkdirAll(filepath.Dir(ptr), 0o755)
	if err := os.Symlink(filepath.Join("..", "..", "blobs", blobName(content)), ptr); err != nil {
		h.t.Fatal(err)
	}
}

// blobName is the etag huggingface_hub names an LFS blob by: its sha256.
func blobName(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// With two snapshots, the one refs/main names is used — not the newest by
// modification time — and every file comes from it; offline, no request is
// sent (online, the branch is checked first: TestCachedBranchRevalidated).
func TestHuggingfaceHubCacheFollowsRefs(t *testing.T) {
	h := newHFCache(t)
	oldC, newC := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for _, f := range wanted {
		h.add(oldC, f.Name, "main "+f.Name)
		h.add(newC, f.Name, "newer "+f.Name)
	}
	os.MkdirAll(filepath.Join(h.repoDir, "refs"), 0o755)
	os.WriteFile(filepath.Join(h.repoDir, "refs", "main"), []byte(oldC), 0o644)
	// The other snapshot is the newest on disk.
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(h.repoDir, "snapshots", newC), future, future)

	s := newHub(t, fixtureFiles(t))
	offline := testClient(s, nil)
	offline.Offline = true
	snap, err := offline.Resolve(context.Background(), h.cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != oldC {
		t.Fatalf("commit %s, want refs/main's %s", snap.Commit, oldC)
	}
	for _, f := range wanted {
		data, err := os.ReadFile(snap.Path(f.Name))
		if err != nil || string(data) != "main "+f.Name {
			t.Fatalf("%s: %q, %v", f.Name, data, err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests for a complete cache", n)
	}
	// A commit hash as the revision picks that snapshot.
	if snap, _, err := h.cache.Lookup(repo, newC, wanted); err != nil || snap.Dir != filepath.Join(h.repoDir, "snapshots", newC) {
		t.Fatalf("by commit: %+v, %v", snap, err)
	}
	// A file missing from refs/main's snapshot is not taken from the other.
	os.Remove(filepath.Join(h.repoDir, "snapshots", oldC, "tokenizer_spm_32k_3.model"))
	if _, missing, _ := h.cache.Lookup(repo, "main", wanted); strings.Join(missing, ",") != "tokenizer_spm_32k_3.model" {
		t.Fatalf("missing %q", missing)
	}
	// A damaged ref is an error naming the file.
	os.WriteFile(filepath.Join(h.repoDir, "refs", "main"), []byte("junk"), 0o644)
	if _, _, err := h.cache.Lookup(repo, "main", wanted); err == nil || !strings.Contains(err.Error(), filepath.Join("refs", "main")) {
		t.Fatalf("damaged ref: %v", err)
	}
}

// huggingface_hub's order (constants.py): HF_HUB_CACHE, then the legacy
// HUGGINGFACE_HUB_CACHE, then HF_HOME/hub, then XDG_CACHE_HOME, with ~ and
// $VARS expanded.
func TestCacheDirLegacyNameAndExpansion(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix paths and $HOME (Windows: USERPROFILE)")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(v, "")
	}
	check := func(want string) {
		t.Helper()
		if got, err := CacheDir(); err != nil || got != want {
			t.Fatalf("CacheDir %q, %v; want %q", got, err, want)
		}
	}
	t.Setenv("HF_HOME", "/hfhome")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "/legacy")
	check("/legacy")
	t.Setenv("HF_HUB_CACHE", "/hubcache")
	check("/hubcache")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "~/legacy")
	check(filepath.Join(home, "legacy"))
	t.Setenv("PP_TEST_ROOT", "/data")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_HOME", "$PP_TEST_ROOT/hf/${PP_TEST_ROOT}/$PP_NO_SUCH_VAR")
	check("/data/hf/data/$PP_NO_SUCH_VAR/hub")
	t.Setenv("HF_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "~")
	check(filepath.Join(home, "huggingface", "hub"))
}

// TRANSFORMERS_OFFLINE counts when HF_HUB_OFFLINE is unset or empty, with
// huggingface_hub's values (1, ON, YES, TRUE, any case, not trimmed); an
// offline client sends no request, and says which variable.
func TestTransformersOffline(t *testing.T) {
	for _, c := range []struct {
		hub, tr string
		want    bool
	}{
		{"", "1", true}, {"", "On", true}, {"", "yes", true}, {"", "TRUE", true},
		{"", "0", false}, {"", " 1", false}, {"", "", false},
		{"0", "1", false}, // HF_HUB_OFFLINE set decides alone, as `a or b` in Python
		{"1", "0", true},
	} {
		t.Setenv("HF_HUB_OFFLINE", c.hub)
		t.Setenv("TRANSFORMERS_OFFLINE", c.tr)
		if Offline() != c.want {
			t.Errorf("HF_HUB_OFFLINE=%q TRANSFORMERS_OFFLINE=%q: offline %v", c.hub, c.tr, !c.want)
		}
	}
	s := newHub(t, fixtureFiles(t))
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("TRANSFORMERS_OFFLINE", "1")
	t.Setenv("HF_ENDPOINT", s.Endpoint())
	t.Setenv("HF_TOKEN", "hf_test")
	c, err := NewClient()
	if err != nil || !c.Offline {
		t.Fatalf("NewClient: %+v, %v", c, err)
	}
	_, err = c.Resolve(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", wanted)
	var oe *OfflineError
	if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), "TRANSFORMERS_OFFLINE is set") {
		t.Fatalf("error %v", err)
	}
	if _, err := c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", wanted); err == nil || !strings.Contains(err.Error(), "TRANSFORMERS_OFFLINE") {
		t.Fatalf("Fetch: %v", err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("offline client sent %d requests", n)
	}
}

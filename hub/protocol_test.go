package hub

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/hub/hubtest"
)

// The token goes only to the origin it is for: a redirect of the hub's GET
// to another port of 127.0.0.1 arrives without it; a redirect to a path of
// the hub itself keeps it (as Python's requests does).
func TestTokenStaysOnItsOrigin(t *testing.T) {
	files := fixtureFiles(t)
	const name = "config.json" // stored in git: the hub serves it itself
	for _, to := range []string{"cdn", "hub"} {
		s := newHub(t, files)
		s.SetAccess("hf_test", true)
		s.RedirectGet(name, to)
		fetchOne(t, testClient(s, nil), Cache{Dir: t.TempDir()}, name, files[name])
		var raw []hubtest.Request
		for _, r := range s.Requests() {
			if strings.HasPrefix(r.Path, "/raw/") {
				raw = append(raw, r)
			}
		}
		if len(raw) != 1 || raw[0].Server != to {
			t.Fatalf("%s: raw requests %+v", to, raw)
		}
		if want := map[string]string{"cdn": "", "hub": "Bearer hf_test"}[to]; raw[0].Authorization != want {
			t.Fatalf("redirect to the %s: Authorization %q, want %q", to, raw[0].Authorization, want)
		}
	}
}

func TestKeepAuthRule(t *testing.T) {
	for _, c := range []struct {
		from, to string
		keep     bool
	}{
		{"https://huggingface.co/a", "https://huggingface.co/b", true},
		{"https://huggingface.co/a", "https://HuggingFace.co:443/b", true},
		{"http://127.0.0.1:8000/a", "http://127.0.0.1:8000/b", true},
		{"http://hub.local/a", "https://hub.local/b", true}, // upgrade on the default ports
		{"http://127.0.0.1:8000/a", "http://127.0.0.1:8001/b", false},
		{"https://huggingface.co/a", "https://cdn-lfs.huggingface.co/b", false},
		{"https://huggingface.co/a", "http://huggingface.co/b", false},
		{"http://hub.local:8080/a", "https://hub.local/b", false},
		{"https://huggingface.co/a", "https://huggingface.co:8443/b", false},
	} {
		from, _ := url.Parse(c.from)
		to, _ := url.Parse(c.to)
		if keepAuth(from, to) != c.keep {
			t.Errorf("%s → %s: keep %v, want %v", c.from, c.to, !c.keep, c.keep)
		}
	}
}

func cdnRanges(s *hubtest.Server, server string) []string {
	var out []string
	for _, r := range s.Requests() {
		if r.Server == server && r.Method == "GET" {
			out = append(out, r.Range)
		}
	}
	return out
}

// A body whose size nobody declared is never taken as complete on its
// word: a Range request from its end must confirm it (416 with the total)
// or continues it (206), and the content is checked against the ETag when
// it is a hash.
func TestUnsizedBodiesAreCompletedOrRefused(t *testing.T) {
	files := fixtureFiles(t)
	for _, c := range []struct {
		name, file          string
		opaque, chunked     bool
		ignoreRange, sized  bool
		cut                 bool
		wantErr, wantRanges string
	}{
		// git sha1 ETag, cut close-delimited body: resumed, then confirmed.
		{name: "git sha1, cut", file: "config.json", cut: true, wantRanges: ",bytes=988-,bytes=1976-"},
		// An opaque ETag: the probe is the only proof, and it is given.
		{name: "opaque, cut", file: "config.json", opaque: true, cut: true, wantRanges: ",bytes=988-,bytes=1976-"},
		{name: "opaque, chunked", file: "config.json", opaque: true, chunked: true, wantRanges: ",bytes=1976-"},
		// An opaque ETag, a server that ignores Range: nothing shows the
		// body complete, cut or not.
		{name: "opaque, cut, no Range", file: "config.json", opaque: true, cut: true, ignoreRange: true, wantErr: "cannot show the download complete"},
		{name: "opaque, whole, no Range", file: "config.json", opaque: true, chunked: true, ignoreRange: true, wantErr: "cannot show the download complete"},
		// An opaque ETag with a declared size: the size is the proof.
		{name: "opaque, sized, cut", file: "config.json", opaque: true, sized: true, cut: true},
		// LFS (sha256 ETag) on the CDN.
		{name: "sha256, cut", file: "tokenizer_spm_32k_3.model", cut: true},
		{name: "sha256, cut, no Range", file: "tokenizer_spm_32k_3.model", cut: true, ignoreRange: true, wantErr: "sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newHub(t, files)
			data := files[c.file]
			if !c.sized {
				s.Unsized(c.file, c.chunked)
			}
			if c.opaque {
				s.OpaqueETag(c.file)
			}
			if c.ignoreRange {
				s.IgnoreRange(c.file)
			}
			if c.cut {
				s.DropEvery(c.file, int64(len(data)/2))
			}
			cache := Cache{Dir: t.TempDir()}
			cl := testClient(s, nil)
			snap, err := cl.Fetch(context.Background(), cache, repo, "main", []File{{Name: c.file}})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.file+": ") {
					t.Fatalf("error %v, want one line with %q", err, c.wantErr)
				}
				if _, err := os.Lstat(snap.Path(c.file)); err == nil {
					t.Fatal("linked an unverified body")
				}
				if m, _ := filepath.Glob(filepath.Join(cache.RepoDir(repo), "blobs", "*")); len(m) != 0 {
					t.Fatalf("kept %v", m)
				}
				// The next offline run reports the file missing, not a
				// truncated one.
				off := testClient(s, nil)
				off.Offline = true
				var oe *OfflineError
				if _, err := off.Resolve(context.Background(), cache, repo, "main", []File{{Name: c.file}}); !errors.As(err, &oe) {
					t.Fatalf("offline rerun: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(snap.Path(c.file)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("content differs (%d of %d bytes, %v)", len(got), len(data), err)
			}
			if c.wantRanges != "" {
				if got := strings.Join(cdnRanges(s, "hub"), ","); got != c.wantRanges {
					t.Fatalf("GET ranges %q, want %q", got, c.wantRanges)
				}
			}
		})
	}
}

// A blob of the wrong size in the cache (left by a faulty download) is
// downloaded again, not linked.
func TestCachedBlobOfWrongSizeReplaced(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	const name = "tokenizer_spm_32k_3.model"
	cache := Cache{Dir: t.TempDir()}
	blob := filepath.Join(cache.RepoDir(repo), "blobs", s.SHA256(name))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob, files[name][:1000], 0o644)
	fetchOne(t, testClient(s, nil), cache, name, files[name])
}

// A server that drops every transfer halfway and ignores Range makes no
// progress: it is given up on after Retries+1 attempts, in one line. One
// that drops every transfer but resumes is bounded by MaxAttempts, and
// retries stop after RetryFor.
func TestRetriesBounded(t *testing.T) {
	files := fixtureFiles(t)
	const name = "model.safetensors"
	s := newHub(t, files)
	s.DropEvery(name, int64(len(files[name])/2))
	s.IgnoreRange(name)
	c := testClient(s, nil)
	_, err := c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: name}})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), name+": ") || !strings.Contains(err.Error(), "gave up after 4 attempts, the last 3 without progress") {
		t.Fatalf("error %v", err)
	}
	if n := countRequests(s, "cdn"); n != 4 {
		t.Fatalf("%d CDN requests, want 4", n)
	}

	s2 := newHub(t, files)
	s2.DropEvery(name, 1000)
	c = testClient(s2, nil)
	c.MaxAttempts = 7
	_, err = c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: name}})
	if err == nil || !strings.Contains(err.Error(), "gave up after 7 attempts in all") {
		t.Fatalf("error %v", err)
	}
	if n := countRequests(s2, "cdn"); n != 7 {
		t.Fatalf("%d CDN requests, want 7", n)
	}

	// The first wait would already pass RetryFor: no retry at all.
	s3 := newHub(t, files)
	s3.DropEvery(name, 1000)
	c = testClient(s3, nil)
	c.Backoff, c.RetryFor = time.Hour, time.Minute
	_, err = c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: name}})
	if err == nil || !strings.Contains(err.Error(), "gave up after 1 attempts in") {
		t.Fatalf("error %v", err)
	}
	if n := countRequests(s3, "cdn"); n != 1 {
		t.Fatalf("%d CDN requests, want 1", n)
	}
}

// A declared size beyond the free disk space is refused before any byte is
// fetched.
func TestDeclaredSizeBeyondFreeSpaceRefused(t *testing.T) {
	if _, ok := freeSpace(t.TempDir()); !ok {
		t.Skip("no free-space query on this system")
	}
	s := newHub(t, fixtureFiles(t))
	const name = "model.safetensors"
	s.DeclareSize(name, 1<<61)
	cache := Cache{Dir: t.TempDir()}
	_, err := testClient(s, nil).Fetch(context.Background(), cache, repo, "main", []File{{Name: name}})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), name+": ") || !strings.Contains(err.Error(), "free") {
		t.Fatalf("error %v", err)
	}
	if n := countRequests(s, "cdn"); n != 0 {
		t.Fatalf("%d CDN requests", n)
	}
}

// A cached branch is checked with one HEAD: unchanged, nothing else is
// sent; moved, the new commit's files are fetched (only the changed blob is
// downloaded) and refs/main follows. A cached commit hash, or offline mode,
// sends nothing; a hub that cannot be reached leaves the cached snapshot in
// use; a revision the hub no longer has is an error.
func TestCachedBranchRevalidated(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	cache := Cache{Dir: t.TempDir()}
	ctx := context.Background()
	old, err := testClient(s, nil).Resolve(ctx, cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}

	const changed = "tokenizer_spm_32k_3.model"
	newData := append(bytes.Clone(files[changed]), "v2"...)
	commit := s.Update(map[string][]byte{changed: newData})
	before := len(s.Requests())
	var log []string
	snap, err := testClient(s, &log).Resolve(ctx, cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()[before:]
	heads, gets := 0, 0
	for _, r := range reqs {
		switch {
		case r.Method == "HEAD":
			heads++
		case r.Server == "cdn" && r.Path == "/repos/"+s.SHA256(changed):
			gets++
		default:
			t.Fatalf("unexpected request %+v", r)
		}
	}
	if snap.Commit != commit || heads != len(wanted) || gets != 1 {
		t.Fatalf("commit %s (want %s), %d HEADs, %d downloads", snap.Commit, commit, heads, gets)
	}
	if !strings.Contains(strings.Join(log, "\n"), "moved from commit "+old.Commit) {
		t.Fatalf("log %q", log)
	}
	if ref, _ := os.ReadFile(filepath.Join(cache.RepoDir(repo), "refs", "main")); string(ref) != commit {
		t.Fatalf("refs/main %q", ref)
	}
	for _, f := range wanted {
		want := files[f.Name]
		if f.Name == changed {
			want = newData
		}
		if got, err := os.ReadFile(snap.Path(f.Name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs (%v)", f.Name, err)
		}
		if got, err := os.ReadFile(old.Path(f.Name)); err != nil || !bytes.Equal(got, files[f.Name]) {
			t.Fatalf("old snapshot %s changed (%v)", f.Name, err)
		}
	}

	// Unchanged now: one HEAD.
	before = len(s.Requests())
	if again, err := testClient(s, nil).Resolve(ctx, cache, repo, "main", wanted); err != nil || again != snap || len(s.Requests()) != before+1 {
		t.Fatalf("unchanged: %v, %d requests", err, len(s.Requests())-before)
	}
	// Offline, or the cached commit by its hash: nothing.
	off := testClient(s, nil)
	off.Offline = true
	before = len(s.Requests())
	if got, err := off.Resolve(ctx, cache, repo, "main", wanted); err != nil || got.Commit != commit {
		t.Fatalf("offline: %+v, %v", got, err)
	}
	if got, err := testClient(s, nil).Resolve(ctx, cache, repo, old.Commit, wanted); err != nil || got.Dir != old.Dir {
		t.Fatalf("by commit: %+v, %v", got, err)
	}
	if n := len(s.Requests()) - before; n != 0 {
		t.Fatalf("%d requests offline or by cached commit", n)
	}
	// A tag the hub no longer has: an error, not the cache.
	writeRef(cache, repo, "v1", old.Commit)
	if _, err := testClient(s, nil).Resolve(ctx, cache, repo, "v1", wanted); err == nil || !strings.Contains(err.Error(), `no revision "v1"`) {
		t.Fatalf("gone tag: %v", err)
	}
	// The hub down: the cached snapshot, said in the log, in one attempt.
	s.Close()
	log = nil
	if got, err := testClient(s, &log).Resolve(ctx, cache, repo, "main", wanted); err != nil || got != snap {
		t.Fatalf("hub down: %+v, %v", got, err)
	}
	if len(log) != 1 || !strings.Contains(log[0], "using the cached commit "+commit) {
		t.Fatalf("log %q", log)
	}
}

// refs/<revision> is written as soon as the commit is known: a run stopped
// after the first file leaves refs/main naming the commit.
func TestRefWrittenBeforeTheFiles(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	cache := Cache{Dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testClient(s, nil)
	var first string
	c.Progress = func(name string, _, _ int64) {
		if first == "" {
			first = name
		} else if name != first {
			cancel()
		}
	}
	snap, err := c.Fetch(ctx, cache, repo, "main", wanted)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if ref, err := os.ReadFile(filepath.Join(cache.RepoDir(repo), "refs", "main")); err != nil || string(ref) != s.Commit {
		t.Fatalf("refs/main %q, %v", ref, err)
	}
	if got, err := os.ReadFile(snap.Path(first)); err != nil || !bytes.Equal(got, files[first]) {
		t.Fatalf("first file %s: %v", first, err)
	}
	_, missing, err := cache.Lookup(repo, "main", wanted)
	if err != nil || len(missing) != len(wanted)-1 {
		t.Fatalf("missing %q, %v", missing, err)
	}
}

// A download that fails after the branch moved says how to run from the
// former commit's complete snapshot: the ref names the new commit already
// (as huggingface_hub writes it), so offline mode alone would not find it.
func TestMovedRefHint(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	cache := Cache{Dir: t.TempDir()}
	ctx := context.Background()
	old, err := testClient(s, nil).Resolve(ctx, cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}
	const changed = "tokenizer_spm_32k_3.model"
	s.Update(map[string][]byte{changed: append(bytes.Clone(files[changed]), "v2"...)})
	s.Fail500(changed, 1000)
	_, err = testClient(s, nil).Resolve(ctx, cache, repo, "main", wanted)
	if err == nil || !strings.Contains(err.Error(), "the cache holds main's former commit "+old.Commit+" complete: --revision "+old.Commit) {
		t.Fatalf("got %v", err)
	}
	if _, err := testClient(s, nil).Resolve(ctx, cache, repo, old.Commit, wanted); err != nil {
		t.Fatalf("--revision %s: %v", old.Commit, err)
	}
}

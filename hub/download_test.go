package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/hub/hubtest"
)

const repo = "nvidia/personaplex-7b-v1"

// The fixture files under the names of the real repository.
func fixtureFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, src := range map[string]string{
		"model.safetensors":                            "model.safetensors",
		"tokenizer-e351c8d8-checkpoint125.safetensors": "mimi.safetensors",
		"tokenizer_spm_32k_3.model":                    "tokenizer.model",
		"config.json":                                  "config.json",
	} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "tiny", src))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

var wanted = []File{{Name: "model.safetensors"}, {Name: "tokenizer-e351c8d8-checkpoint125.safetensors"}, {Name: "tokenizer_spm_32k_3.model"}, {Name: "config.json", Optional: true}}

func newHub(t *testing.T, files map[string][]byte) *hubtest.Server {
	s := hubtest.New(repo, files)
	t.Cleanup(s.Close)
	return s
}

// testClient talks to s with a token and retries without real waits.
func testClient(s *hubtest.Server, log *[]string) *Client {
	c := &Client{Endpoint: s.Endpoint(), Token: "hf_test", TokenSource: "HF_TOKEN", Retries: 3, Backoff: time.Microsecond}
	if log != nil {
		c.Logf = func(f string, a ...any) { *log = append(*log, fmt.Sprintf(f, a...)) }
	}
	return c
}

// fetchOne fetches name into cache and checks its content.
func fetchOne(t *testing.T, c *Client, cache Cache, name string, want []byte) {
	t.Helper()
	snap, err := c.Fetch(context.Background(), cache, repo, "main", []File{{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(snap.Path(name)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: content differs (%v)", name, err)
	}
}

func countRequests(s *hubtest.Server, server string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Server == server {
			n++
		}
	}
	return n
}

// A cold cache is filled exactly as huggingface_hub lays it out: blobs named
// by their etag, relative symlinks in snapshots/<commit>, refs/main; the
// token goes to the hub only, never to the CDN. A warm cache sends nothing.
func TestColdCacheLayoutThenWarm(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	s.SetAccess("hf_test", true)
	cache := Cache{Dir: t.TempDir()}
	snap, err := testClient(s, nil).Resolve(context.Background(), cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(cache.Dir, "models--nvidia--personaplex-7b-v1")
	if snap.Commit != s.Commit || snap.Dir != filepath.Join(repoDir, "snapshots", s.Commit) {
		t.Fatalf("snapshot %+v", snap)
	}
	if ref, _ := os.ReadFile(filepath.Join(repoDir, "refs", "main")); string(ref) != s.Commit {
		t.Fatalf("refs/main = %q", ref)
	}
	for name, data := range files {
		etag := s.SHA256(name)
		if name == "config.json" {
			etag = hubtest.GitBlobSHA1(data)
		}
		target, err := os.Readlink(snap.Path(name))
		if err != nil || target != filepath.Join("..", "..", "blobs", etag) {
			t.Fatalf("%s: link %q, %v", name, target, err)
		}
		got, err := os.ReadFile(snap.Path(name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: content differs (%v)", name, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(repoDir, "blobs", "*.incomplete")); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
	for _, r := range s.Requests() {
		if r.Server == "cdn" && r.Authorization != "" {
			t.Fatalf("the token was sent to the CDN: %+v", r)
		}
		if r.Server == "hub" && r.Authorization != "Bearer hf_test" {
			t.Fatalf("hub request without the token: %+v", r)
		}
	}
	if countRequests(s, "cdn") != 3 {
		t.Fatalf("CDN requests %d, want one per LFS file", countRequests(s, "cdn"))
	}
	// Warm: main is checked with one HEAD, nothing is downloaded.
	before := len(s.Requests())
	snap2, err := testClient(s, nil).Resolve(context.Background(), cache, repo, "main", wanted)
	if err != nil || snap2 != snap {
		t.Fatalf("warm: %+v, %v", snap2, err)
	}
	if reqs := s.Requests()[before:]; len(reqs) != 1 || reqs[0].Method != "HEAD" || reqs[0].Server != "hub" {
		t.Fatalf("warm cache sent %+v, want one HEAD", reqs)
	}
}

// A connection dropped mid-transfer is resumed with a Range request from
// where it stopped; a .incomplete blob left by an earlier run is resumed too.
func TestInterruptedDownloadResumesWithRange(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	const name = "model.safetensors"
	s.DropAt(name, 1_000_000)
	fetchOne(t, testClient(s, nil), Cache{Dir: t.TempDir()}, name, files[name])
	var ranges []string
	for _, r := range s.Requests() {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if len(ranges) != 2 || ranges[0] != "" || ranges[1] != "bytes=1000000-" {
		t.Fatalf("CDN ranges %q", ranges)
	}

	// A partial blob from a killed run.
	cache2 := Cache{Dir: t.TempDir()}
	blobs := filepath.Join(cache2.RepoDir(repo), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, s.SHA256(name)+".incomplete"), files[name][:12345], 0o644)
	before := len(s.Requests())
	fetchOne(t, testClient(s, nil), cache2, name, files[name])
	reqs := s.Requests()[before:]
	if last := reqs[len(reqs)-1]; last.Server != "cdn" || last.Range != "bytes=12345-" {
		t.Fatalf("last request %+v", last)
	}
}

// A wrong sha256 is refused: no blob, no link, no partial file, no ref.
func TestWrongSHA256Rejected(t *testing.T) {
	s := newHub(t, fixtureFiles(t))
	const name = "tokenizer_spm_32k_3.model"
	s.WrongSHA(name)
	cache := Cache{Dir: t.TempDir()}
	_, err := testClient(s, nil).Fetch(context.Background(), cache, repo, "main", []File{{Name: "config.json"}, {Name: name}})
	if err == nil || !strings.Contains(err.Error(), name+": ") || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("error %v", err)
	}
	repoDir := cache.RepoDir(repo)
	if _, err := os.Lstat(filepath.Join(repoDir, "snapshots", s.Commit, name)); err == nil {
		t.Fatal("linked a file with a wrong sha256")
	}
	if m, _ := filepath.Glob(filepath.Join(repoDir, "blobs", "0000*")); len(m) != 0 {
		t.Fatalf("kept %v", m)
	}
	// The ref is written as soon as the commit is known, as huggingface_hub
	// does; the snapshot it names lacks the file, so an offline run says so.
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err != nil || string(ref) != s.Commit {
		t.Fatalf("refs/main %q, %v", ref, err)
	}
	offline := testClient(s, nil)
	offline.Offline = true
	var oe *OfflineError
	if _, err := offline.Resolve(context.Background(), cache, repo, "main", []File{{Name: name}}); !errors.As(err, &oe) || len(oe.Missing) != 1 {
		t.Fatalf("offline after the refusal: %v", err)
	}
}

// 500s are retried with backoff, within a bound.
func TestRetriesOn500(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	const name = "tokenizer-e351c8d8-checkpoint125.safetensors"
	s.Fail500(name, 2) // the HEAD twice
	var log []string
	fetchOne(t, testClient(s, &log), Cache{Dir: t.TempDir()}, name, files[name])
	if !strings.Contains(strings.Join(log, "\n"), "retrying") {
		t.Fatalf("no retry logged: %q", log)
	}
	s.Fail500(name, 10)
	c := testClient(s, nil)
	c.Retries = 2
	_, err := c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: name}})
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("error %v", err)
	}
}

// Refusals are one line each, and say what to do.
func TestRefusalMessages(t *testing.T) {
	s := newHub(t, fixtureFiles(t))
	get := func(c *Client, repoID, rev, name string) string {
		t.Helper()
		_, err := c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repoID, rev, []File{{Name: name}})
		if err == nil {
			t.Fatal("no error")
		}
		if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), name+": ") {
			t.Fatalf("not one line naming the file: %q", err)
		}
		return err.Error()
	}
	page := s.Endpoint() + "/" + repo
	s.SetAccess("hf_good", true)
	noToken := testClient(s, nil)
	noToken.Token, noToken.TokenSource = "", ""
	for _, c := range []struct {
		client         *Client
		repo, rev, msg string
		want           []string
	}{
		{noToken, repo, "main", "401 no token", []string{"401", "HF_TOKEN", page, "licence"}},
		{testClient(s, nil), repo, "main", "401 bad token", []string{"401", "refused the token from HF_TOKEN"}},
	} {
		got := get(c.client, c.repo, c.rev, "model.safetensors")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.msg, got, w)
			}
		}
	}
	s.SetAccess("hf_test", false)
	if got := get(testClient(s, nil), repo, "main", "model.safetensors"); !strings.Contains(got, "403") || !strings.Contains(got, "accept its licence at "+page) {
		t.Errorf("403: %q", got)
	}
	s.SetAccess("hf_test", true)
	for _, c := range []struct{ repo, rev, name, want string }{
		{repo, "main", "nope.bin", "no such file in " + repo + " at revision main (404)"},
		{repo, "v9", "model.safetensors", `no revision "v9"`},
		{"nvidia/nope", "main", "model.safetensors", "no repository nvidia/nope"},
	} {
		if got := get(testClient(s, nil), c.repo, c.rev, c.name); !strings.Contains(got, c.want) {
			t.Errorf("%q lacks %q", got, c.want)
		}
	}
}

// Offline, every missing file is listed in one message and nothing is sent.
func TestOfflineListsEveryMissingFile(t *testing.T) {
	s := newHub(t, fixtureFiles(t))
	cache := Cache{Dir: t.TempDir()}
	c := testClient(s, nil)
	c.Offline = true
	_, err := c.Resolve(context.Background(), cache, repo, "main", wanted)
	var oe *OfflineError
	if !errors.As(err, &oe) || len(oe.Missing) != len(wanted) || !oe.NoRef {
		t.Fatalf("error %v", err)
	}
	for _, f := range wanted {
		if !strings.Contains(err.Error(), f.Name) {
			t.Fatalf("%q does not name %s", err, f.Name)
		}
	}
	// Part of it cached: only the rest is listed.
	online := testClient(s, nil)
	if _, err := online.Fetch(context.Background(), cache, repo, "main", wanted[:2]); err != nil {
		t.Fatal(err)
	}
	before := len(s.Requests())
	_, err = c.Resolve(context.Background(), cache, repo, "main", wanted)
	if !errors.As(err, &oe) || strings.Join(oe.Missing, ",") != "tokenizer_spm_32k_3.model,config.json" || oe.NoRef {
		t.Fatalf("error %v", err)
	}
	if len(s.Requests()) != before {
		t.Fatal("offline mode sent requests")
	}
}

// An optional file absent from the repo is recorded in .no_exist/, so the
// next lookup needs only the HEAD that checks main.
func TestOptionalFileAbsent(t *testing.T) {
	files := fixtureFiles(t)
	delete(files, "config.json")
	s := newHub(t, files)
	cache := Cache{Dir: t.TempDir()}
	snap, err := testClient(s, nil).Resolve(context.Background(), cache, repo, "main", wanted)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache.RepoDir(repo), ".no_exist", s.Commit, "config.json")); err != nil {
		t.Fatal(err)
	}
	before := len(s.Requests())
	if snap2, err := testClient(s, nil).Resolve(context.Background(), cache, repo, "main", wanted); err != nil || snap2 != snap || len(s.Requests()) != before+1 {
		t.Fatalf("second lookup: %v, %d requests (want the one HEAD of the check)", err, len(s.Requests())-before)
	}
}

// Cancelling the context stops a transfer that hangs.
func TestCancelStopsDownload(t *testing.T) {
	s := newHub(t, fixtureFiles(t))
	const name = "model.safetensors"
	s.Block(name, 100_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testClient(s, nil)
	c.Progress = func(_ string, done, _ int64) {
		if done >= 100_000 {
			cancel()
		}
	}
	_, err := c.Fetch(ctx, Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: name}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

// A stalled transfer counts as dropped and is resumed.
func TestStalledTransferResumes(t *testing.T) {
	files := fixtureFiles(t)
	s := newHub(t, files)
	const name = "model.safetensors"
	s.Block(name, 50_000)
	c := testClient(s, nil)
	c.Stall = 100 * time.Millisecond
	fetchOne(t, c, Cache{Dir: t.TempDir()}, name, files[name])
	// Whatever else a slow machine stalls on, the hang at 50000 bytes is
	// resumed from there.
	resumed := false
	for _, r := range s.Requests() {
		resumed = resumed || r.Server == "cdn" && r.Range == "bytes=50000-"
	}
	if !resumed {
		t.Fatalf("no resume at the stall: %+v", s.Requests())
	}
}

// An ETag names its blob: one that ends as a partial download's file
// (<name>.incomplete) is refused, so a hub or mirror sending it cannot get
// a half-written file linked into snapshots/ as complete.
func TestIncompleteETagRefused(t *testing.T) {
	etag := strings.Repeat("ab", 32) + ".incomplete"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repo-Commit", strings.Repeat("c", 40))
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", "1000")
		w.Header().Set("Content-Length", "1000")
		if r.Method == http.MethodGet {
			w.Write(make([]byte, 1000))
		}
	}))
	defer srv.Close()
	cache := Cache{Dir: t.TempDir()}
	blobs := filepath.Join(cache.RepoDir(repo), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, etag), make([]byte, 1000), 0o644) // another download's partial file
	c := &Client{Endpoint: srv.URL, Retries: 1, Backoff: time.Microsecond}
	_, err := c.Fetch(context.Background(), cache, repo, "main", []File{{Name: "tokenizer.model"}})
	if err == nil || !strings.Contains(err.Error(), "sent no usable ETag") {
		t.Fatalf("got %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(cache.RepoDir(repo), "snapshots", "*", "*")); len(m) != 0 {
		t.Fatalf("linked: %v", m)
	}
}

// A download server (CDN) that cannot be reached is named, not the hub
// that redirected to it, and by its origin only (no signed query).
func TestUnreachableCDNNamed(t *testing.T) {
	s := newHub(t, fixtureFiles(t))
	deadURL := s.CDN.URL
	s.CDN.Close() // the hub answers; its CDN, where LFS files are, does not
	c := testClient(s, nil)
	_, err := c.Fetch(context.Background(), Cache{Dir: t.TempDir()}, repo, "main", []File{{Name: "model.safetensors"}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+deadURL+":") || strings.Contains(err.Error(), "Signature") {
		t.Fatalf("got %v", err)
	}
}

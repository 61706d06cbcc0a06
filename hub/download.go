package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// DefaultEndpoint is the public hub (HF_ENDPOINT overrides it).
const DefaultEndpoint = "https://huggingface.co"

// Client downloads files from a hub. The zero value is not usable: build one
// with NewClient and adjust the fields.
type Client struct {
	Endpoint    string // e.g. https://huggingface.co, no trailing slash
	Token       string // sent as "Authorization: Bearer" to the endpoint's host only
	TokenSource string // where Token came from (HF_TOKEN, a token file), for messages
	Offline     bool   // HF_HUB_OFFLINE: never send a request
	// HTTP does the requests (nil: a client on a clone of
	// http.DefaultTransport, which honours HTTPS_PROXY).
	HTTP *http.Client
	// Retries is how many consecutive failed attempts (5xx, 429, dropped or
	// stalled connections) are retried; an attempt that received data resets
	// the count. Backoff is the first wait, doubled each time up to MaxBackoff.
	Retries             int
	Backoff, MaxBackoff time.Duration
	// Stall is how long a transfer may go without a byte before the attempt
	// counts as dropped (0: no limit).
	Stall     time.Duration
	UserAgent string
	// Logf gets one-line messages (start, resume, retry); Progress the
	// bytes done of each transfer. Both may be nil.
	Logf     func(format string, a ...any)
	Progress func(file string, done, total int64)
}

// NewClient reads the environment: HF_ENDPOINT, the token (see Token) and
// HF_HUB_OFFLINE.
func NewClient() (*Client, error) {
	ep := DefaultEndpoint
	if e := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"); e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("HF_ENDPOINT %q: want an http(s) URL such as %s", e, DefaultEndpoint)
		}
		ep = e
	}
	tok, src, err := Token()
	if err != nil {
		return nil, err
	}
	return &Client{Endpoint: ep, Token: tok, TokenSource: src, Offline: Offline(),
		Retries: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second, Stall: 2 * time.Minute,
		UserAgent: "pp-offline"}, nil
}

// Token is the token huggingface_hub would send: $HF_TOKEN, else the token
// file ($HF_TOKEN_PATH, else $HF_HOME/token, which `huggingface-cli login`
// writes). source says which; "" and no error when there is none.
func Token() (token, source string, err error) {
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(v)); t != "" {
			if !validToken(t) {
				return "", "", fmt.Errorf("%s: not one token (it holds spaces or control characters)", v)
			}
			return t, v, nil
		}
	}
	path := os.Getenv("HF_TOKEN_PATH")
	if path == "" {
		home, err := homeDir()
		if err != nil {
			return "", "", nil
		}
		path = filepath.Join(home, "token")
	}
	data, err := readSmall(path, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("token file %v", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", "", nil
	}
	if !validToken(t) {
		return "", "", fmt.Errorf("token file %s: not one token (it holds spaces or control characters)", path)
	}
	return t, path, nil
}

func validToken(t string) bool {
	for _, r := range t {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// Resolve returns the snapshot of repo at revision that holds every file:
// the local cache's when it has them all (no request is sent), else the
// snapshot the hub's revision names now, downloading what it lacks. With
// Offline set, a missing file is an *OfflineError listing every missing file.
func (c *Client) Resolve(ctx context.Context, cache Cache, repo, revision string, files []File) (Snapshot, error) {
	if err := validate(repo, revision, files); err != nil {
		return Snapshot{Repo: repo, Revision: revision}, err
	}
	snap, missing, err := cache.Lookup(repo, revision, files)
	if err != nil || len(missing) == 0 {
		return snap, err
	}
	if c.Offline {
		oe := &OfflineError{Cache: cache.Dir, Repo: repo, Revision: revision, Missing: missing, NoRef: snap.Commit == ""}
		if oe.NoRef {
			oe.Snapshots = cache.Snapshots(repo)
		}
		return snap, oe
	}
	c.logf("%s not in the local Hugging Face cache of %s at %s: downloading from %s", strings.Join(missing, ", "), repo, revision, c.Endpoint)
	return c.Fetch(ctx, cache, repo, revision, files)
}

func validate(repo, revision string, files []File) error {
	if err := ValidateRepo(repo); err != nil {
		return err
	}
	if err := ValidateRevision(revision); err != nil {
		return err
	}
	for _, f := range files {
		if err := validFileName(f.Name); err != nil {
			return err
		}
	}
	return nil
}

// Fetch asks the hub which commit revision names now and makes every file of
// that commit present in the cache (downloading the blobs it lacks), then
// points refs/<revision> at it. Every file comes from that one commit.
func (c *Client) Fetch(ctx context.Context, cache Cache, repo, revision string, files []File) (Snapshot, error) {
	snap := Snapshot{Repo: repo, Revision: revision}
	if err := validate(repo, revision, files); err != nil {
		return snap, err
	}
	if c.Offline {
		return snap, errors.New("HF_HUB_OFFLINE is set: not contacting the hub")
	}
	// Required files first, so that the commit is known before an optional
	// file turns out to be absent.
	order := slices.Clone(files)
	slices.SortStableFunc(order, func(a, b File) int {
		switch {
		case a.Optional == b.Optional:
			return 0
		case b.Optional:
			return -1
		}
		return 1
	})
	pinned := revision
	for _, f := range order {
		m, err := c.head(ctx, repo, pinned, f.Name)
		var se *StatusError
		if f.Optional && errors.As(err, &se) && se.Status == http.StatusNotFound && se.Code == "EntryNotFound" {
			commit := se.Commit
			if !commitHash.MatchString(commit) {
				commit = snap.Commit
			}
			if commitHash.MatchString(commit) {
				markAbsent(cache, repo, commit, f.Name)
			}
			c.logf("%s: not in %s (optional)", f.Name, repo)
			continue
		}
		if err != nil {
			return snap, err
		}
		if snap.Commit == "" {
			snap.Commit, pinned = m.Commit, m.Commit
			snap.Dir = filepath.Join(cache.RepoDir(repo), "snapshots", m.Commit)
		} else if m.Commit != snap.Commit {
			return snap, fmt.Errorf("%s: the hub answered commit %s, the other files are from %s", f.Name, m.Commit, snap.Commit)
		}
		if err := c.fetchFile(ctx, cache, snap, f.Name, m); err != nil {
			return snap, err
		}
	}
	if snap.Commit == "" {
		return snap, fmt.Errorf("none of %s is in %s at revision %s", strings.Join(Names(files), ", "), repo, revision)
	}
	if revision != snap.Commit {
		ref := filepath.Join(cache.RepoDir(repo), "refs", filepath.FromSlash(revision))
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			return snap, fmt.Errorf("%s: %v", ref, fileio.PathErr(err))
		}
		if err := fileio.WriteAtomic(ref, []byte(snap.Commit)); err != nil {
			return snap, err
		}
	}
	return snap, nil
}

// markAbsent records that name is not in commit (.no_exist/, as
// huggingface_hub does); failing to is harmless.
func markAbsent(cache Cache, repo, commit, name string) {
	p := cache.noExistPath(repo, commit, name)
	if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
}

// fileMeta is what the resolve endpoint's HEAD answers.
type fileMeta struct {
	Commit   string // X-Repo-Commit
	Etag     string // X-Linked-Etag (LFS: the sha256) or ETag (git blob sha1)
	Size     int64  // X-Linked-Size or Content-Length; -1 unknown
	Location string // where to GET the content (a CDN for LFS files)
}

var etagChars = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

func (c *Client) resolveURL(repo, revision, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.Endpoint + "/" + repo + "/resolve/" + url.PathEscape(revision) + "/" + strings.Join(segs, "/")
}

func (c *Client) head(ctx context.Context, repo, revision, name string) (fileMeta, error) {
	var m fileMeta
	err := c.withRetries(ctx, name, func() (bool, error) {
		var err error
		m, err = c.headOnce(ctx, repo, revision, name)
		return false, err
	})
	return m, err
}

// headOnce asks the resolve endpoint for a file's metadata. Redirects are
// not followed except relative ones (a renamed repository): an absolute one
// is the CDN location of an LFS file.
func (c *Client) headOnce(ctx context.Context, repo, revision, name string) (fileMeta, error) {
	u := c.resolveURL(repo, revision, name)
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
		if err != nil {
			return fileMeta{}, fmt.Errorf("%s: %v", name, err)
		}
		c.setHeaders(req)
		resp, err := c.client(false).Do(req)
		if err != nil {
			return fileMeta{}, c.netError(ctx, name, err)
		}
		resp.Body.Close()
		h := resp.Header
		loc := resp.Request.URL.String()
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			raw := h.Get("Location")
			target, err := url.Parse(raw)
			if raw == "" || err != nil {
				return fileMeta{}, fmt.Errorf("%s: the hub answered %s without a usable Location", name, resp.Status)
			}
			if target.Host == "" {
				if hops >= 5 {
					return fileMeta{}, fmt.Errorf("%s: too many redirects from %s", name, c.Endpoint)
				}
				u = resp.Request.URL.ResolveReference(target).String()
				continue
			}
			loc = target.String()
		case resp.StatusCode != http.StatusOK:
			return fileMeta{}, c.statusError(resp, repo, revision, name)
		}
		m := fileMeta{Commit: h.Get("X-Repo-Commit"), Location: loc, Size: -1}
		m.Etag = normalizeEtag(h.Get("X-Linked-Etag"))
		if m.Etag == "" {
			m.Etag = normalizeEtag(h.Get("ETag"))
		}
		size := h.Get("X-Linked-Size")
		if size == "" && resp.StatusCode == http.StatusOK {
			size = h.Get("Content-Length")
		}
		if size != "" {
			n, err := strconv.ParseInt(size, 10, 64)
			if err != nil || n < 0 {
				return fileMeta{}, fmt.Errorf("%s: the hub sent a bad size %q", name, size)
			}
			m.Size = n
		}
		if !commitHash.MatchString(m.Commit) {
			return fileMeta{}, fmt.Errorf("%s: %s sent no commit hash (X-Repo-Commit %q): is HF_ENDPOINT a Hugging Face hub?", name, c.Endpoint, m.Commit)
		}
		if !etagChars.MatchString(m.Etag) {
			return fileMeta{}, fmt.Errorf("%s: %s sent no usable ETag (%q)", name, c.Endpoint, m.Etag)
		}
		return m, nil
	}
}

// normalizeEtag drops the weak marker and the quotes.
func normalizeEtag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

func (c *Client) setHeaders(req *http.Request) {
	ua := c.UserAgent
	if ua == "" {
		ua = "pp-offline"
	}
	req.Header.Set("User-Agent", ua)
	// The ETag and sizes are those of the bytes as stored.
	req.Header.Set("Accept-Encoding", "identity")
	if ep, err := url.Parse(c.Endpoint); err == nil && c.Token != "" && req.URL.Host == ep.Host {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// client returns the HTTP client, following redirects (CDN hops; net/http
// drops the Authorization header on a redirect to another host) or not.
func (c *Client) client(follow bool) *http.Client {
	base := c.HTTP
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = time.Minute
		base = &http.Client{Transport: t}
		c.HTTP = base
	}
	if follow {
		return base
	}
	cl := *base
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cl
}

// retryable marks a failure worth another attempt.
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

func (c *Client) netError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", name, ctx.Err())
	}
	return &retryable{fmt.Errorf("%s: cannot reach %s: %v", name, c.Endpoint, unwrapURLError(err))}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// withRetries runs attempt until it succeeds, fails for good, or fails
// Retries+1 times in a row (an attempt that made progress resets the count).
func (c *Client) withRetries(ctx context.Context, name string, attempt func() (progressed bool, err error)) error {
	fails := 0
	wait := c.Backoff
	for {
		progressed, err := attempt()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		var r *retryable
		if !errors.As(err, &r) {
			return err
		}
		if progressed {
			fails, wait = 0, c.Backoff
		}
		fails++
		if fails > c.Retries {
			hint := ""
			if !c.Offline {
				hint = "; set HF_HUB_OFFLINE=1 to use only the local cache"
			}
			return fmt.Errorf("%v (gave up after %d attempts%s)", r.err, fails, hint)
		}
		c.logf("%v; retrying in %v", r.err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", name, ctx.Err())
		case <-t.C:
		}
		if wait *= 2; c.MaxBackoff > 0 && wait > c.MaxBackoff {
			wait = c.MaxBackoff
		}
	}
}

func (c *Client) logf(format string, a ...any) {
	if c.Logf != nil {
		c.Logf(format, a...)
	}
}

// StatusError is a refusal by the hub, worded for the user.
type StatusError struct {
	Status                   int
	Code, Message            string // X-Error-Code, X-Error-Message
	Commit                   string // X-Repo-Commit (sent with EntryNotFound)
	Endpoint, Repo, Revision string
	File, TokenSource        string // TokenSource "": no token was sent
}

func (c *Client) statusError(resp *http.Response, repo, revision, name string) error {
	e := &StatusError{Status: resp.StatusCode, Code: resp.Header.Get("X-Error-Code"), Message: oneLine(resp.Header.Get("X-Error-Message")),
		Commit: resp.Header.Get("X-Repo-Commit"), Endpoint: c.Endpoint, Repo: repo, Revision: revision, File: name}
	if c.Token != "" {
		e.TokenSource = c.TokenSource
		if e.TokenSource == "" {
			e.TokenSource = "the token"
		}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		return &retryable{e}
	}
	return e
}

// oneLine keeps a server message printable, on one line and short.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return strings.TrimSpace(s)
}

func (e *StatusError) Error() string {
	page := e.Endpoint + "/" + e.Repo
	var msg string
	switch e.Status {
	case http.StatusUnauthorized:
		if e.TokenSource == "" {
			msg = fmt.Sprintf("%s needs a Hugging Face token and none is set (401): accept the licence at %s, create a read token at %s/settings/tokens and set HF_TOKEN to it (or run `huggingface-cli login`)", e.Repo, page, e.Endpoint)
		} else {
			msg = fmt.Sprintf("the hub refused the token from %s (401: invalid or expired, or no repository %s): set HF_TOKEN to a valid read token from %s/settings/tokens", e.TokenSource, e.Repo, e.Endpoint)
		}
	case http.StatusForbidden:
		who := "without a token"
		if e.TokenSource != "" {
			who = "for the account of the token from " + e.TokenSource
		}
		msg = fmt.Sprintf("access to %s is refused %s (403): the model is gated — accept its licence at %s (signed in as that account), then run again; or the token lacks read access", e.Repo, who, page)
	case http.StatusNotFound:
		switch e.Code {
		case "EntryNotFound":
			msg = fmt.Sprintf("no such file in %s at revision %s (404)", e.Repo, e.Revision)
		case "RevisionNotFound":
			msg = fmt.Sprintf("no revision %q in %s (404): check --revision", e.Revision, e.Repo)
		default:
			msg = fmt.Sprintf("no repository %s on %s (404): check --hf-repo", e.Repo, e.Endpoint)
		}
	default:
		msg = fmt.Sprintf("%s answered %d %s", e.Endpoint, e.Status, http.StatusText(e.Status))
	}
	if e.Repo == "" { // the content server (CDN) refused
		msg = fmt.Sprintf("the download server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Message != "" && e.Status != http.StatusNotFound {
		msg += " [hub: " + e.Message + "]"
	}
	return e.File + ": " + msg
}

// fetchFile makes snapshots/<commit>/<name> present: the blob is downloaded
// (or found, shared with another snapshot) and linked.
func (c *Client) fetchFile(ctx context.Context, cache Cache, snap Snapshot, name string, m fileMeta) error {
	pointer := snap.Path(name)
	if st, err := os.Stat(pointer); err == nil && st.Mode().IsRegular() {
		return nil
	}
	repoDir := cache.RepoDir(snap.Repo)
	blob := filepath.Join(repoDir, "blobs", m.Etag)
	for _, d := range []string{filepath.Dir(blob), filepath.Dir(pointer)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("%s: %v", d, fileio.PathErr(err))
		}
	}
	unlock, err := lockFile(ctx, filepath.Join(cache.Dir, ".locks", filepath.Base(repoDir), m.Etag+".lock"), func() {
		c.logf("%s: waiting for another download of it to finish", name)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer unlock()
	if st, err := os.Stat(blob); err != nil || !st.Mode().IsRegular() {
		if err := c.download(ctx, name, blob, m); err != nil {
			return err
		}
	}
	return link(blob, pointer)
}

// link points pointer at blob with a relative symlink (as huggingface_hub),
// else a hard link, replacing whatever was there in one rename.
func link(blob, pointer string) error {
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		return fmt.Errorf("%s: %v", pointer, err)
	}
	tmp := fmt.Sprintf("%s.link%d", pointer, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		// A filesystem without symlinks: a hard link still shares the blob
		// (huggingface_hub keeps a plain file there too).
		if lerr := os.Link(blob, tmp); lerr != nil {
			return fmt.Errorf("%s: cannot create a symlink (%v) nor a hard link (%v)", pointer, fileio.PathErr(err), fileio.PathErr(lerr))
		}
	}
	if err := os.Rename(tmp, pointer); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %v", pointer, fileio.PathErr(err))
	}
	return nil
}

// verifier checks content against its ETag: the sha256 of an LFS file, the
// git blob sha1 of a file stored in git; other ETags cannot be checked.
type verifier struct {
	kind, want string
	h          hash.Hash
	prefix     []byte
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func newVerifier(etag string, size int64) *verifier {
	switch {
	case sha256Hex.MatchString(etag):
		return &verifier{kind: "sha256", want: etag, h: sha256.New()}
	case commitHash.MatchString(etag) && size >= 0:
		v := &verifier{kind: "git blob sha1", want: etag, h: sha1.New(), prefix: fmt.Appendf(nil, "blob %d\x00", size)}
		v.h.Write(v.prefix)
		return v
	}
	return nil
}

func (v *verifier) Write(p []byte) (int, error) {
	if v == nil {
		return len(p), nil
	}
	return v.h.Write(p)
}

func (v *verifier) reset() {
	if v != nil {
		v.h.Reset()
		v.h.Write(v.prefix)
	}
}

func (v *verifier) check(name string) error {
	if v == nil {
		return nil
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
		return fmt.Errorf("%s: the downloaded content has %s %s but the hub's ETag is %s: download discarded, nothing cached; run again", name, v.kind, got, v.want)
	}
	return nil
}

// maxUnknownSize bounds a download whose size the hub did not declare.
const maxUnknownSize = 1 << 40

// download fetches m into blob through blob.incomplete, resuming what an
// earlier attempt or run left there, and checks the content before the
// rename; a mismatch removes the partial file.
func (c *Client) download(ctx context.Context, name, blob string, m fileMeta) error {
	inc := blob + ".incomplete"
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	d := &transfer{c: c, name: name, m: m, f: f, off: st.Size(), v: newVerifier(m.Etag, m.Size)}
	if m.Size >= 0 && d.off > m.Size {
		if err := d.restart(); err != nil {
			return err
		}
	}
	if d.off > 0 {
		if d.v != nil {
			// Hash what is there (GBs, maybe), stopping when ctx is done.
			if _, err := io.Copy(d.v, ctxReader{ctx, io.NewSectionReader(f, 0, d.off)}); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("%s: %w", name, ctx.Err())
				}
				return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
			}
		}
		c.logf("%s: resuming the download at %s of %s", name, FormatBytes(d.off), FormatBytes(m.Size))
	} else {
		c.logf("%s: downloading %s from %s", name, FormatBytes(m.Size), c.Endpoint)
	}
	c.progress(name, d.off, m.Size)
	if err := c.withRetries(ctx, name, func() (bool, error) { return d.attempt(ctx) }); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	if err := d.v.check(name); err != nil {
		f.Close()
		os.Remove(inc)
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	if err := os.Rename(inc, blob); err != nil {
		return fmt.Errorf("%s: %v", blob, fileio.PathErr(err))
	}
	return nil
}

func (c *Client) progress(name string, done, total int64) {
	if c.Progress != nil {
		c.Progress(name, done, total)
	}
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// transfer is one file's download state across attempts.
type transfer struct {
	c    *Client
	name string
	m    fileMeta
	f    *os.File
	off  int64
	v    *verifier
}

func (d *transfer) restart() error {
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
	}
	d.off = 0
	d.v.reset()
	return nil
}

var errStalled = errors.New("no data received for too long")

// attempt is one GET from the current offset; progressed tells whether any
// byte arrived.
func (d *transfer) attempt(ctx context.Context) (progressed bool, err error) {
	if d.m.Size >= 0 && d.off == d.m.Size {
		return false, nil
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var watchdog *time.Timer
	if d.c.Stall > 0 {
		watchdog = time.AfterFunc(d.c.Stall, func() { cancel(errStalled) })
		defer watchdog.Stop()
	}
	req, err := http.NewRequestWithContext(actx, http.MethodGet, d.m.Location, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %v", d.name, err)
	}
	d.c.setHeaders(req)
	if d.off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.off))
	}
	fail := func(err error) error {
		if ctx.Err() == nil && context.Cause(actx) == errStalled {
			return &retryable{fmt.Errorf("%s: %v", d.name, errStalled)}
		}
		return d.c.netError(ctx, d.name, err)
	}
	resp, err := d.c.client(true).Do(req)
	if err != nil {
		return false, fail(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != d.off {
			if err := d.restart(); err != nil {
				return false, err
			}
			return false, &retryable{fmt.Errorf("%s: the server sent the wrong range (%q for offset %d)", d.name, resp.Header.Get("Content-Range"), d.off)}
		}
	case http.StatusOK:
		if d.off > 0 {
			d.c.logf("%s: the server does not resume (no Range support): starting over", d.name)
			if err := d.restart(); err != nil {
				return false, err
			}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if err := d.restart(); err != nil {
			return false, err
		}
		return false, &retryable{fmt.Errorf("%s: the server refused to resume at offset %d", d.name, d.off)}
	default:
		return false, d.c.statusError(resp, "", "", d.name)
	}
	limit := d.m.Size
	if limit < 0 {
		limit = maxUnknownSize
	}
	if _, err := d.f.Seek(d.off, io.SeekStart); err != nil {
		return false, fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			progressed = true
			if watchdog != nil {
				watchdog.Reset(d.c.Stall)
			}
			if d.off+int64(n) > limit {
				return progressed, fmt.Errorf("%s: the server sent more than the %d bytes the hub declared", d.name, limit)
			}
			if _, err := d.f.Write(buf[:n]); err != nil {
				return progressed, fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
			}
			d.v.Write(buf[:n])
			d.off += int64(n)
			d.c.progress(d.name, d.off, d.m.Size)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return progressed, fail(rerr)
		}
	}
	if d.m.Size >= 0 && d.off < d.m.Size {
		return progressed, &retryable{fmt.Errorf("%s: the connection closed at %d of %d bytes", d.name, d.off, d.m.Size)}
	}
	return progressed, nil
}

// rangeStart parses the first byte of "bytes START-END/TOTAL".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// FormatBytes writes a size for people (1.5 GB); "unknown size" for -1.
func FormatBytes(n int64) string {
	if n < 0 {
		return "unknown size"
	}
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTP"[exp])
}

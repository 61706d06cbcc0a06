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
	Endpoint string // e.g. https://huggingface.co, no trailing slash
	// Token is sent as "Authorization: Bearer" to the endpoint's origin
	// only (scheme, host and port; see keepAuth), never along a redirect
	// to another origin.
	Token       string
	TokenSource string // where Token came from (HF_TOKEN, a token file), for messages
	Offline     bool   // HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE: never send a request
	OfflineVar  string // the variable that set Offline, for messages ("" : HF_HUB_OFFLINE)
	// HTTP does the requests (nil: a client on a clone of
	// http.DefaultTransport, which honours HTTPS_PROXY). Its CheckRedirect
	// is replaced by the client's own (credentials, at most 10 hops).
	HTTP *http.Client
	// Retries is how many failed attempts in a row without progress (5xx,
	// 429, dropped or stalled connections) are retried; an attempt counts as
	// progress only when it takes the file further than any attempt before
	// (a server that restarts from byte 0 each time makes none). Backoff is
	// the first wait, doubled each time up to MaxBackoff.
	Retries             int
	Backoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts at one file in all, progress or not;
	// RetryFor is how long after a file's first attempt a retry may still
	// begin (a transfer that keeps receiving data is never cut). 0: the
	// defaults, 30 attempts and 1 hour.
	MaxAttempts int
	RetryFor    time.Duration
	// CheckTimeout bounds the one HEAD that checks a cached branch (0: 10 s,
	// huggingface_hub's HF_HUB_ETAG_TIMEOUT); when it fails the cached
	// commit is used, as huggingface_hub does.
	CheckTimeout time.Duration
	// Stall is how long a transfer may go without a byte before the attempt
	// counts as dropped (0: no limit).
	Stall     time.Duration
	UserAgent string
	// Logf gets one-line messages (start, resume, retry); Progress the
	// bytes done of each transfer. Both may be nil.
	Logf     func(format string, a ...any)
	Progress func(file string, done, total int64)
}

// Defaults of the retry bounds (see Client).
const (
	DefaultMaxAttempts  = 30
	DefaultRetryFor     = time.Hour
	DefaultCheckTimeout = 10 * time.Second
)

// NewClient reads the environment: HF_ENDPOINT, the token (see Token) and
// HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (see Offline).
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
	ovar, off := OfflineVar()
	return &Client{Endpoint: ep, Token: tok, TokenSource: src, Offline: off, OfflineVar: ovar,
		Retries: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second, Stall: 2 * time.Minute,
		MaxAttempts: DefaultMaxAttempts, RetryFor: DefaultRetryFor, CheckTimeout: DefaultCheckTimeout,
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
	// Expanded as huggingface_hub expands it (~ and $VAR).
	path := expandPath(os.Getenv("HF_TOKEN_PATH"))
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

// Resolve returns the snapshot of repo at revision that holds every file.
// A full commit hash whose files are all cached, or Offline, sends no
// request. A branch or tag the cache knows is checked with one HEAD (as
// huggingface_hub does): when the hub names the cached commit and every file
// is there, that snapshot; when it names a new commit, the files of that
// commit are fetched (only changed blobs are downloaded) and refs/<revision>
// moves; when the hub cannot be asked (network down, 5xx, 401, 403; not a
// revision or file that is gone) the complete cached snapshot is used, with a
// log line. Otherwise the missing files are downloaded. With Offline set, a
// missing file is an *OfflineError listing every missing file.
func (c *Client) Resolve(ctx context.Context, cache Cache, repo, revision string, files []File) (Snapshot, error) {
	if err := validate(repo, revision, files); err != nil {
		return Snapshot{Repo: repo, Revision: revision}, err
	}
	snap, missing, err := cache.Lookup(repo, revision, files)
	if err != nil {
		return snap, err
	}
	pinned := commitHash.MatchString(revision)
	if len(missing) == 0 && (c.Offline || pinned) {
		return snap, nil
	}
	if c.Offline {
		oe := &OfflineError{Cache: cache.Dir, Repo: repo, Revision: revision, Missing: missing, NoRef: snap.Commit == "", Var: c.OfflineVar}
		if oe.NoRef {
			oe.Snapshots = cache.Snapshots(repo)
		}
		return snap, oe
	}
	var first *headAnswer
	if snap.Commit != "" && !pinned && len(files) > 0 {
		a, err := c.check(ctx, repo, revision, files)
		answered := a.err == nil || a.absent
		switch {
		case err != nil:
			return snap, err
		case answered && a.commit() == snap.Commit && len(missing) == 0:
			return snap, nil
		case answered && a.commit() != snap.Commit:
			c.logf("%s moved from commit %s to %s on %s: updating the cache", revision, snap.Commit, a.commit(), c.Endpoint)
		case !answered && len(missing) == 0:
			c.logf("cannot check %s at %s with %s (%v): using the cached commit %s", repo, revision, c.Endpoint, a.err, snap.Commit)
			return snap, nil
		}
		if answered {
			first = &a
		}
	}
	if len(missing) > 0 {
		c.logf("%s not in the local Hugging Face cache of %s at %s: downloading from %s", strings.Join(missing, ", "), repo, revision, c.Endpoint)
	}
	return c.fetch(ctx, cache, repo, revision, files, first)
}

// headAnswer is the hub's answer about one file.
type headAnswer struct {
	name   string
	m      fileMeta
	err    error // nil, or why the hub gave no answer (see absent)
	absent bool  // err is the EntryNotFound of an optional file, with the commit
}

func (a headAnswer) commit() string {
	var se *StatusError
	if errors.As(a.err, &se) {
		return se.Commit
	}
	return a.m.Commit
}

// check asks the hub once, within CheckTimeout, which commit revision names
// now, with a HEAD of the first required file. The error is final (ctx
// done, no such revision, a required file gone: huggingface_hub raises
// those too); a failure that leaves the cache usable is in the answer's err.
func (c *Client) check(ctx context.Context, repo, revision string, files []File) (headAnswer, error) {
	f := fetchOrder(files)[0]
	timeout := c.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	m, err := c.headOnce(hctx, repo, revision, f.Name)
	cancel()
	a := headAnswer{name: f.Name, m: m, err: err}
	if ctx.Err() != nil {
		return a, fmt.Errorf("%s: %w", f.Name, ctx.Err())
	}
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		switch {
		case se.Code == "RevisionNotFound":
			return a, err
		case se.Code == "EntryNotFound" && !f.Optional:
			return a, err
		case se.Code == "EntryNotFound" && commitHash.MatchString(se.Commit):
			return headAnswer{name: f.Name, err: se, absent: true}, nil
		}
	}
	if err != nil {
		a.err = unwrapRetryable(err)
	}
	return a, nil
}

func unwrapRetryable(err error) error {
	var r *retryable
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

// fetchOrder puts required files first, so that the commit is known before
// an optional file turns out to be absent.
func fetchOrder(files []File) []File {
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
	return order
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
// that commit present in the cache (downloading the blobs it lacks). As soon
// as the first answer names the commit, refs/<revision> points at it (as
// huggingface_hub does), so an interrupted run leaves the ref. Every file
// comes from that one commit.
func (c *Client) Fetch(ctx context.Context, cache Cache, repo, revision string, files []File) (Snapshot, error) {
	if err := validate(repo, revision, files); err != nil {
		return Snapshot{Repo: repo, Revision: revision}, err
	}
	return c.fetch(ctx, cache, repo, revision, files, nil)
}

// fetch is Fetch; first, when not nil, is the hub's answer already received
// for the first file of fetchOrder(files) at revision.
func (c *Client) fetch(ctx context.Context, cache Cache, repo, revision string, files []File, first *headAnswer) (Snapshot, error) {
	snap := Snapshot{Repo: repo, Revision: revision}
	if c.Offline {
		return snap, fmt.Errorf("%s is set: not contacting the hub", c.offlineVar())
	}
	pinned := revision
	former := "" // the commit the cache's ref named before a move (formerSnapshot)
	for _, f := range fetchOrder(files) {
		var m fileMeta
		var err error
		if first != nil && first.name == f.Name {
			m, err = first.m, first.err
			first = nil
		} else {
			m, err = c.head(ctx, repo, pinned, f.Name)
		}
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
			return snap, formerSnapshot(err, cache, repo, revision, former, files)
		}
		if snap.Commit == "" {
			snap.Commit, pinned = m.Commit, m.Commit
			snap.Dir = filepath.Join(cache.RepoDir(repo), "snapshots", m.Commit)
			if old, err := cache.Commit(repo, revision); err == nil && old != m.Commit {
				former = old
			}
			if err := writeRef(cache, repo, revision, m.Commit); err != nil {
				return snap, err
			}
		} else if m.Commit != snap.Commit {
			return snap, fmt.Errorf("%s: the hub answered commit %s, the other files are from %s", f.Name, m.Commit, snap.Commit)
		}
		if err := c.fetchFile(ctx, cache, snap, f.Name, m); err != nil {
			return snap, formerSnapshot(err, cache, repo, revision, former, files)
		}
	}
	if snap.Commit == "" {
		return snap, fmt.Errorf("none of %s is in %s at revision %s", strings.Join(Names(files), ", "), repo, revision)
	}
	return snap, nil
}

// formerSnapshot adds to a failed download's error, when the revision had
// moved from a commit whose snapshot the cache holds complete, how to run
// from that one: the ref now names the new commit (as huggingface_hub
// writes it), so offline mode alone would not find it.
func formerSnapshot(err error, cache Cache, repo, revision, former string, files []File) error {
	if former == "" || errors.Is(err, context.Canceled) {
		return err
	}
	if _, missing, lerr := cache.Lookup(repo, former, files); lerr != nil || len(missing) > 0 {
		return err
	}
	return fmt.Errorf("%w; the cache holds %s's former commit %s complete: --revision %s runs from it, offline too", err, revision, former, former)
}

// writeRef points refs/<revision> at commit (nothing for a commit hash),
// unless it already does.
func writeRef(cache Cache, repo, revision, commit string) error {
	if revision == commit {
		return nil
	}
	if old, err := cache.Commit(repo, revision); err == nil && old == commit {
		return nil
	}
	ref := filepath.Join(cache.RepoDir(repo), "refs", filepath.FromSlash(revision))
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		return fmt.Errorf("%s: %v", ref, fileio.PathErr(err))
	}
	return fileio.WriteAtomic(ref, []byte(commit))
}

func (c *Client) offlineVar() string {
	if c.OfflineVar != "" {
		return c.OfflineVar
	}
	return "HF_HUB_OFFLINE"
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

// incompleteSuffix ends a blob being downloaded, as huggingface_hub names it.
const incompleteSuffix = ".incomplete"

var etagChars = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

// totalWord is a Content-Range total for a message ("unknown" for -1).
func totalWord(n int64) string {
	if n < 0 {
		return "an unknown number of"
	}
	return strconv.FormatInt(n, 10)
}

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
		if !etagChars.MatchString(m.Etag) || strings.HasSuffix(m.Etag, incompleteSuffix) {
			// The ETag names the blob: one ending as a partial download's
			// file would link that file, half written, as complete.
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
	if ep, err := url.Parse(c.Endpoint); err == nil && c.Token != "" && keepAuth(ep, req.URL) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// keepAuth tells whether credentials meant for from may go to to, by the
// rule of Python's requests (Session.should_strip_auth), which
// huggingface_hub uses: the same scheme, host and port (a scheme's default
// port written or not), or http to https on the default ports of the same
// host. Another port or a subdomain is another origin. (net/http alone keeps
// the header for any port of the host and for its subdomains.)
func keepAuth(from, to *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), to.Hostname()) {
		return false
	}
	fs, ts := strings.ToLower(from.Scheme), strings.ToLower(to.Scheme)
	fp, tp := effectivePort(fs, from.Port()), effectivePort(ts, to.Port())
	if fs == "http" && fp == "80" && ts == "https" && tp == "443" {
		return true
	}
	return fs == ts && fp == tp
}

func effectivePort(scheme, port string) string {
	if port != "" {
		return port
	}
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// maxRedirects is how many redirects one request follows (as net/http's
// default).
const maxRedirects = 10

// checkRedirect drops the Authorization header once the chain of
// redirects has left the origin it was sent to; it never comes back.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	keep := via[0].Header.Get("Authorization") != ""
	for i := 1; i <= len(via) && keep; i++ {
		next := req.URL
		if i < len(via) {
			next = via[i].URL
		}
		keep = keepAuth(via[i-1].URL, next)
	}
	if !keep {
		req.Header.Del("Authorization")
	}
	return nil
}

// client returns the HTTP client, following redirects (CDN hops, with
// checkRedirect) or not.
func (c *Client) client(follow bool) *http.Client {
	base := c.HTTP
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = time.Minute
		base = &http.Client{Transport: t}
		c.HTTP = base
	}
	cl := *base
	cl.CheckRedirect = checkRedirect
	if !follow {
		cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
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
	// The server that failed: the hub, or the download server (a CDN) it
	// redirected to, by its origin only (a signed URL's query is a secret).
	where := c.Endpoint
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			where = u.Scheme + "://" + u.Host
		}
	}
	return &retryable{fmt.Errorf("%s: cannot reach %s: %v", name, where, unwrapURLError(err))}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// withRetries runs attempt until it succeeds, fails for good, fails
// Retries+1 times in a row without progress, has run MaxAttempts times, or
// would start a retry RetryFor after the first attempt began.
func (c *Client) withRetries(ctx context.Context, name string, attempt func() (progressed bool, err error)) error {
	maxAttempts, retryFor := c.MaxAttempts, c.RetryFor
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if retryFor <= 0 {
		retryFor = DefaultRetryFor
	}
	start := time.Now()
	fails, attempts, stuck := 0, 0, 0
	wait := c.Backoff
	for {
		progressed, err := attempt()
		attempts++
		if stuck++; progressed {
			stuck = 0
		}
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
		var why string
		switch {
		case fails > c.Retries:
			why = fmt.Sprintf("gave up after %d attempts", attempts)
			if stuck < attempts {
				why += fmt.Sprintf(", the last %d without progress", stuck)
			}
		case attempts >= maxAttempts:
			why = fmt.Sprintf("gave up after %d attempts in all", attempts)
		case time.Since(start)+wait > retryFor:
			why = fmt.Sprintf("gave up after %d attempts in %v", attempts, time.Since(start).Round(time.Second))
		}
		if why != "" {
			hint := ""
			if !c.Offline {
				hint = "; set HF_HUB_OFFLINE=1 to use only the local cache"
			}
			return fmt.Errorf("%v (%s%s)", r.err, why, hint)
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
// (or found, shared with another snapshot) and linked. A cached blob whose
// size differs from the declared one (left by a faulty download) is
// downloaded again and replaced.
func (c *Client) fetchFile(ctx context.Context, cache Cache, snap Snapshot, name string, m fileMeta) error {
	pointer := snap.Path(name)
	repoDir := cache.RepoDir(snap.Repo)
	blob := filepath.Join(repoDir, "blobs", m.Etag)
	if st, err := os.Stat(pointer); err == nil && st.Mode().IsRegular() && (m.Size < 0 || st.Size() == m.Size) {
		return nil
	}
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
	st, err := os.Stat(blob)
	switch {
	case err == nil && st.Mode().IsRegular() && (m.Size < 0 || st.Size() == m.Size):
	case err == nil && st.Mode().IsRegular():
		c.logf("%s: the cached blob %s has %d bytes, the hub declares %d: downloading it again", name, blob, st.Size(), m.Size)
		fallthrough
	default:
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

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// maxUnknownSize bounds a download whose size nobody declared.
const maxUnknownSize = 1 << 40

// errUnverifiable marks a body that nothing shows complete.
var errUnverifiable = errors.New("unverifiable")

// download fetches m into blob through blob.incomplete, resuming what an
// earlier attempt or run left there, and moves it into blobs/ only once it
// is shown complete and right:
//
//   - an ETag that is a sha256 (LFS files): the content's sha256;
//   - an ETag that is a git blob sha1 (files stored in git): the git hash of
//     the content, whatever its length;
//   - otherwise the size, declared by the HEAD (X-Linked-Size,
//     Content-Length) or learnt from the GET (Content-Length, the total of
//     Content-Range).
//
// A body that ends with its size unknown is followed by a Range request from
// its end: 416 with the total confirms it, 206 continues it (it was cut).
// When nothing can show an opaque ETag's body complete, the download is
// refused and discarded. A declared size beyond the free space is refused
// before any byte is fetched.
func (c *Client) download(ctx context.Context, name, blob string, m fileMeta) error {
	inc := blob + incompleteSuffix
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	d := &transfer{c: c, name: name, m: m, f: f, off: st.Size(), size: m.Size}
	switch {
	case sha256Hex.MatchString(m.Etag):
		d.sha = sha256.New()
	case commitHash.MatchString(m.Etag):
		d.gitSHA = true
	}
	if d.size >= 0 && d.off > d.size {
		if err := d.restart(); err != nil {
			return err
		}
	}
	d.best = d.off
	if err := d.checkSpace(); err != nil {
		return err
	}
	if d.off > 0 {
		if d.sha != nil {
			// Hash what is there (GBs, maybe), stopping when ctx is done.
			if _, err := io.Copy(d.sha, ctxReader{ctx, io.NewSectionReader(f, 0, d.off)}); err != nil {
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
		if errors.Is(err, errUnverifiable) {
			f.Close()
			os.Remove(inc)
		}
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %v", inc, fileio.PathErr(err))
	}
	if err := d.verify(ctx); err != nil {
		f.Close()
		if ctx.Err() == nil {
			os.Remove(inc)
		}
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
	off  int64 // bytes in the file
	best int64 // the furthest off reached: progress is going beyond it
	size int64 // the content's size, declared or learnt; -1 unknown
	// probe: the last body ended cleanly with the size unknown, so the next
	// request asks for what follows; done: the content is all there.
	probe, done bool
	sha         hash.Hash // the sha256 of the bytes so far (sha256 ETags)
	gitSHA      bool      // the ETag is a git blob sha1: hashed at the end
}

func (d *transfer) restart() error {
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
	}
	d.off = 0
	if d.sha != nil {
		d.sha.Reset()
	}
	return nil
}

// selfChecking tells whether the ETag shows the content right whatever its
// size.
func (d *transfer) selfChecking() bool { return d.sha != nil || d.gitSHA }

// checkSpace refuses a known size that the disk cannot hold.
func (d *transfer) checkSpace() error {
	if d.size < 0 {
		return nil
	}
	need := d.size - d.off
	dir := filepath.Dir(d.f.Name())
	if free, ok := freeSpace(dir); ok && need > free {
		return fmt.Errorf("%s: needs %s more but %s has %s free: free some space or point HF_HUB_CACHE at a larger disk", d.name, FormatBytes(need), dir, FormatBytes(free))
	}
	return nil
}

// learnSize takes a size the GET declares when the HEAD declared none.
func (d *transfer) learnSize(n int64) error {
	if d.size >= 0 || n < 0 {
		return nil
	}
	if n < d.off {
		return fmt.Errorf("%s: the server declares %d bytes, fewer than the %d received", d.name, n, d.off)
	}
	d.size = n
	return d.checkSpace()
}

func (d *transfer) unverifiable(why string) error {
	return fmt.Errorf("%s: cannot show the download complete: the hub declared no size, the ETag %q is not a content hash, and %s; discarded, nothing cached (%w)", d.name, d.m.Etag, why, errUnverifiable)
}

// verify checks the finished content against the ETag or the size.
func (d *transfer) verify(ctx context.Context) error {
	switch {
	case d.sha != nil:
		if got := hex.EncodeToString(d.sha.Sum(nil)); got != d.m.Etag {
			return fmt.Errorf("%s: the downloaded content has sha256 %s but the hub's ETag is %s: download discarded, nothing cached; run again", d.name, got, d.m.Etag)
		}
	case d.gitSHA:
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", d.off)
		if _, err := io.Copy(h, ctxReader{ctx, io.NewSectionReader(d.f, 0, d.off)}); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", d.name, ctx.Err())
			}
			return fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != d.m.Etag {
			return fmt.Errorf("%s: the downloaded content (%d bytes) has git blob sha1 %s but the hub's ETag is %s: download discarded, nothing cached; run again", d.name, d.off, got, d.m.Etag)
		}
	case d.size < 0 || d.off != d.size:
		return d.unverifiable("the transfer ended without a size")
	}
	return nil
}

var errStalled = errors.New("no data received for too long")

// attempt is one try at the rest of the content: a GET from the current
// offset, and when that body ends with the size still unknown, the Range
// request that checks nothing follows. progressed tells whether the file
// got further than ever before.
func (d *transfer) attempt(ctx context.Context) (progressed bool, err error) {
	defer func() {
		if d.off > d.best {
			progressed, d.best = true, d.off
		}
	}()
	for !d.done {
		if d.size >= 0 && d.off == d.size {
			d.done = true
			break
		}
		again, err := d.request(ctx)
		if err != nil {
			return false, err
		}
		if !again {
			break
		}
	}
	return false, nil
}

// request sends one GET and writes its body; again tells that the body ended
// cleanly with the size unknown after bringing data, so the end must be
// checked with another request.
func (d *transfer) request(ctx context.Context) (again bool, err error) {
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
	if d.off > 0 || d.probe {
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
	probing := d.probe
	d.probe = false
	cr := resp.Header.Get("Content-Range")
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := rangeStart(cr); !ok || start != d.off {
			msg := fmt.Errorf("%s: the server sent the wrong range (%q for offset %d)", d.name, cr, d.off) // before restart zeroes d.off
			if err := d.restart(); err != nil {
				return false, err
			}
			return false, &retryable{msg}
		}
		if err := d.learnSize(rangeTotal(cr)); err != nil {
			return false, err
		}
	case http.StatusOK:
		if probing {
			if d.selfChecking() {
				d.done = true // the hash decides
				return false, nil
			}
			return false, d.unverifiable("the server does not answer Range requests")
		}
		if d.off > 0 {
			d.c.logf("%s: the server does not resume (no Range support): starting over", d.name)
			if err := d.restart(); err != nil {
				return false, err
			}
		}
		if err := d.learnSize(resp.ContentLength); err != nil {
			return false, err
		}
	case http.StatusRequestedRangeNotSatisfiable:
		total := rangeTotal(cr)
		switch {
		case probing && total == d.off:
			d.size, d.done = total, true
			return false, nil
		case probing && total < 0 && d.selfChecking():
			d.done = true
			return false, nil
		case probing && total < 0:
			return false, d.unverifiable(fmt.Sprintf("a Range request from its end was answered 416 without the total (%q)", cr))
		}
		msg := fmt.Errorf("%s: the server refused to resume at offset %d (it says the file has %s bytes; %d were expected)", d.name, d.off, totalWord(total), d.size)
		if err := d.restart(); err != nil {
			return false, err
		}
		return false, &retryable{msg}
	default:
		return false, d.c.statusError(resp, "", "", d.name)
	}
	limit := d.size
	if limit < 0 {
		limit = maxUnknownSize
	}
	if _, err := d.f.Seek(d.off, io.SeekStart); err != nil {
		return false, fmt.Errorf("%s: %v", d.f.Name(), fileio.PathErr(err))
	}
	buf := make([]byte, 1<<20)
	got := int64(0)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if watchdog != nil {
				watchdog.Reset(d.c.Stall)
			}
			if d.off+int64(n) > limit {
				return false, fmt.Errorf("%s: the server sent more than the %d bytes declared", d.name, limit)
			}
			if _, err := d.f.Write(buf[:n]); err != nil {
				// Named by the file the user asked for, then where it failed.
				return false, fmt.Errorf("%s: writing %s: %v", d.name, d.f.Name(), fileio.PathErr(err))
			}
			if d.sha != nil {
				d.sha.Write(buf[:n])
			}
			d.off += int64(n)
			got += int64(n)
			d.c.progress(d.name, d.off, d.size)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, fail(rerr)
		}
	}
	switch {
	case d.size >= 0 && d.off < d.size:
		return false, &retryable{fmt.Errorf("%s: the connection closed at %d of %d bytes", d.name, d.off, d.size)}
	case d.size >= 0:
		d.done = true
		return false, nil
	case got == 0 && probing:
		// A 206 with nothing and no total: no end in sight.
		if d.selfChecking() {
			d.done = true
			return false, nil
		}
		return false, d.unverifiable("a Range request from its end brought nothing and no total")
	}
	d.probe = true
	return true, nil
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

// rangeTotal parses the total of "bytes START-END/TOTAL" or "bytes */TOTAL";
// -1 when absent or "*".
func rangeTotal(cr string) int64 {
	_, t, ok := strings.Cut(cr, "/")
	if !ok || !strings.HasPrefix(cr, "bytes ") {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
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

// Package hubtest is a fake Hugging Face hub for tests: the resolve endpoint
// (/{repo}/resolve/{revision}/{file}) with the real headers (X-Repo-Commit,
// ETag, X-Linked-Etag, X-Linked-Size, X-Error-Code), LFS files redirected
// (302) to a separate "CDN" server that honours Range, gated access (401
// without a token, 403 for a token whose account did not accept the licence),
// and faults to inject: 500s, a connection dropped mid-transfer (once or
// every time), a wrong sha256, no declared size (close-delimited or chunked
// bodies), an ETag that is no content hash, Range ignored, a huge declared
// size, a GET redirected elsewhere, and a branch that moves (Update). Both
// servers listen on 127.0.0.1 only. Every request is counted.
package hubtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Request is one request either server received.
type Request struct {
	Server        string // "hub" or "cdn"
	Method, Path  string
	Range         string
	Authorization string
}

// Server is the fake hub and its CDN.
type Server struct {
	Hub, CDN *httptest.Server
	Repo     string
	Commit   string // what every revision resolves to
	// Token, when set, is required (else 401); Accepted says whether its
	// account accepted the licence (else 403).
	// Set them with SetAccess once serving.
	Token    string
	Accepted bool

	mu    sync.Mutex
	files map[string]file // by name
	blobs map[string]file // by sha256
	reqs  []Request
	// faults
	fail500   map[string]int    // file → number of 500s still to answer
	dropAt    map[string]int64  // file → drop the CDN connection after this many bytes, once
	wrongSHA  map[string]bool   // file → advertise a wrong sha256
	block     map[string]int64  // file → send this many bytes, then hang until the client leaves
	dropEvery map[string]int64  // file → every body stops after this many of its bytes
	unsized   map[string]string // file → no size anywhere; bodies "close"-delimited or "chunked"
	opaque    map[string]bool   // file → an ETag that is no content hash
	noRange   map[string]bool   // file → Range ignored (200, whole content)
	declare   map[string]int64  // file → the size the HEAD declares
	redirect  map[string]string // file → the hub's GET answers 302 to "hub" or "cdn" /raw/<file>
}

type file struct {
	name string
	data []byte
	lfs  bool
	sha  string // sha256 (LFS) or git blob sha1
}

// New starts a hub serving files for repo at one commit. Every file but
// config.json is an LFS file (as in nvidia/personaplex-7b-v1). Close it when
// done.
func New(repo string, files map[string][]byte) *Server {
	s := &Server{Repo: repo, Commit: strings.Repeat("c0ffee", 6) + "abcd", Accepted: true,
		files: map[string]file{}, blobs: map[string]file{},
		fail500: map[string]int{}, dropAt: map[string]int64{}, wrongSHA: map[string]bool{}, block: map[string]int64{},
		dropEvery: map[string]int64{}, unsized: map[string]string{}, opaque: map[string]bool{}, noRange: map[string]bool{},
		declare: map[string]int64{}, redirect: map[string]string{}}
	s.addFiles(files)
	// httptest listens on 127.0.0.1 (or ::1) only.
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	return s
}

func (s *Server) addFiles(files map[string][]byte) {
	for name, data := range files {
		f := file{name: name, data: data, lfs: name != "config.json"}
		if f.lfs {
			sum := sha256.Sum256(data)
			f.sha = hex.EncodeToString(sum[:])
			s.blobs[f.sha] = f
		} else {
			f.sha = GitBlobSHA1(data)
		}
		s.files[name] = f
	}
}

// Update moves main to a new commit in which files replace or add to the
// current ones (the others stay), as a push does, and returns the commit.
// The old commit is no longer served.
func (s *Server) Update(files map[string][]byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addFiles(files)
	sum := sha1.Sum([]byte(s.Commit))
	s.Commit = hex.EncodeToString(sum[:])
	return s.Commit
}

// CommitNow is the commit main names now (safe while serving).
func (s *Server) CommitNow() string { s.mu.Lock(); defer s.mu.Unlock(); return s.Commit }

// GitBlobSHA1 is the git object id of data (the ETag of a file stored in git).
func GitBlobSHA1(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// VoicesTGZ packs files as the repo's voices.tgz does: entries under a
// top folder voices/.
func VoicesTGZ(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "voices/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: "voices/" + n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))})
		tw.Write(files[n])
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// Close stops both servers.
func (s *Server) Close() {
	s.Hub.Close()
	s.CDN.Close()
}

// Endpoint is the hub's URL (HF_ENDPOINT).
func (s *Server) Endpoint() string { return s.Hub.URL }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Fail500 makes the next n requests for name (hub or CDN) answer 500.
func (s *Server) Fail500(name string, n int) { s.mu.Lock(); s.fail500[name] = n; s.mu.Unlock() }

// DropAt makes the CDN close the connection after n bytes of name, once.
func (s *Server) DropAt(name string, n int64) { s.mu.Lock(); s.dropAt[name] = n; s.mu.Unlock() }

// WrongSHA makes the hub advertise a wrong sha256 for name.
func (s *Server) WrongSHA(name string) { s.mu.Lock(); s.wrongSHA[name] = true; s.mu.Unlock() }

// Block makes the CDN send n bytes of name, then hang until the client gives up.
func (s *Server) Block(name string, n int64) { s.mu.Lock(); s.block[name] = n; s.mu.Unlock() }

// DropEvery makes every body of name (hub or CDN) stop after n of its bytes,
// closing the connection: a clean end when the body is close-delimited.
func (s *Server) DropEvery(name string, n int64) { s.mu.Lock(); s.dropEvery[name] = n; s.mu.Unlock() }

// Unsized makes the hub declare no size for name (no X-Linked-Size, no
// Content-Length) and send its bodies close-delimited, or chunked when
// chunked is set.
func (s *Server) Unsized(name string, chunked bool) {
	s.mu.Lock()
	s.unsized[name] = map[bool]string{false: "close", true: "chunked"}[chunked]
	s.mu.Unlock()
}

// OpaqueETag makes the ETag (and X-Linked-Etag) of name a string that is no
// content hash, as some mirrors send; OpaqueETagOf gives it.
func (s *Server) OpaqueETag(name string) { s.mu.Lock(); s.opaque[name] = true; s.mu.Unlock() }

// OpaqueETagOf is the ETag OpaqueETag makes the hub send for name.
func OpaqueETagOf(name string) string {
	sum := sha1.Sum([]byte(name))
	return "opaque-" + hex.EncodeToString(sum[:4])
}

// IgnoreRange makes every server answer a Range request for name with the
// whole content (200).
func (s *Server) IgnoreRange(name string) { s.mu.Lock(); s.noRange[name] = true; s.mu.Unlock() }

// DeclareSize makes the hub's HEAD declare n bytes for name.
func (s *Server) DeclareSize(name string, n int64) { s.mu.Lock(); s.declare[name] = n; s.mu.Unlock() }

// RedirectGet makes the hub answer a GET (not a HEAD) of the resolve URL of
// name (a file stored in git, served by the hub itself) with a 302 to
// /raw/<name> on the hub itself (to "hub", as a relative Location) or on
// the CDN, another port of 127.0.0.1 (to "cdn"); both serve the content there.
func (s *Server) RedirectGet(name, to string) { s.mu.Lock(); s.redirect[name] = to; s.mu.Unlock() }

// SetAccess sets the token required (none: "") and whether its account
// accepted the licence.
func (s *Server) SetAccess(token string, accepted bool) {
	s.mu.Lock()
	s.Token, s.Accepted = token, accepted
	s.mu.Unlock()
}

// SHA256 is the sha256 the hub advertises for an LFS file.
func (s *Server) SHA256(name string) string { return s.files[name].sha }

func (s *Server) record(server string, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Server: server, Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")})
	s.mu.Unlock()
}

// take500 consumes one injected 500 for name.
func (s *Server) take500(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail500[name] > 0 {
		s.fail500[name]--
		return true
	}
	return false
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.record("hub", r)
	if s.serveRaw(w, r) {
		return
	}
	// /{org}/{name}/resolve/{revision}/{file...}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" || (r.Method != http.MethodHead && r.Method != http.MethodGet) {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + parts[1]
	rev := strings.ReplaceAll(parts[3], "%2F", "/")
	name := strings.ReplaceAll(parts[4], "%2F", "/")
	auth := r.Header.Get("Authorization")
	s.mu.Lock()
	token, accepted, commit := s.Token, s.Accepted, s.Commit
	s.mu.Unlock()
	if token != "" && auth != "Bearer "+token {
		hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return
	}
	if repo != s.Repo {
		if auth == "" {
			hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		} else {
			hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		}
		return
	}
	if !accepted {
		hubError(w, http.StatusForbidden, "GatedRepo", "Access to model "+repo+" is restricted and you are not in the authorized list.")
		return
	}
	if rev != "main" && rev != commit {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	if s.take500(name) {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	s.mu.Lock()
	f, ok := s.files[name]
	unsized, opaque, redirect := s.unsized[name], s.opaque[name], s.redirect[name]
	declared, declaring := s.declare[name]
	wrong := s.wrongSHA[name]
	s.mu.Unlock()
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	size := strconv.Itoa(len(f.data))
	if declaring {
		size = strconv.FormatInt(declared, 10)
	}
	if !f.lfs {
		etag := f.sha
		if opaque {
			etag = OpaqueETagOf(name)
		}
		w.Header().Set("ETag", `"`+etag+`"`)
		if r.Method == http.MethodHead {
			if unsized == "" {
				w.Header().Set("Content-Length", size)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		switch redirect {
		case "hub":
			w.Header().Set("Location", "/raw/"+name)
			w.WriteHeader(http.StatusFound)
			return
		case "cdn":
			w.Header().Set("Location", s.CDN.URL+"/raw/"+name)
			w.WriteHeader(http.StatusFound)
			return
		}
		s.serveContent(w, r, f)
		return
	}
	sha := f.sha
	if wrong {
		sha = strings.Repeat("0", 64)
	}
	if opaque {
		sha = OpaqueETagOf(name)
	}
	w.Header().Set("ETag", `"`+GitBlobSHA1([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:"+f.sha))+`"`)
	w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
	if unsized == "" {
		w.Header().Set("X-Linked-Size", size)
	}
	w.Header().Set("Location", s.CDN.URL+"/repos/"+f.sha+"?X-Amz-Signature=fake")
	w.WriteHeader(http.StatusFound)
}

// serveRaw serves /raw/<file> (where RedirectGet points), on either server.
func (s *Server) serveRaw(w http.ResponseWriter, r *http.Request) bool {
	name, ok := strings.CutPrefix(r.URL.Path, "/raw/")
	if !ok {
		return false
	}
	s.mu.Lock()
	f, ok := s.files[name]
	s.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return true
	}
	s.serveContent(w, r, f)
	return true
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.record("cdn", r)
	if s.serveRaw(w, r) {
		return
	}
	s.mu.Lock()
	f, ok := s.blobs[strings.TrimPrefix(r.URL.Path, "/repos/")]
	s.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	s.serveContent(w, r, f)
}

// serveContent answers a GET of f's content, honouring Range, with the
// faults set for it.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, f file) {
	if s.take500(f.name) {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	unsized, noRange := s.unsized[f.name], s.noRange[f.name]
	every, cutting := s.dropEvery[f.name]
	drop, dropping := s.dropAt[f.name]
	delete(s.dropAt, f.name)
	hang, hanging := s.block[f.name]
	s.mu.Unlock()
	data, start := f.data, 0
	if rg := r.Header.Get("Range"); rg != "" && !noRange {
		spec, ok := strings.CutPrefix(rg, "bytes=")
		from, _, ok2 := strings.Cut(spec, "-")
		n, err := strconv.Atoi(from)
		if !ok || !ok2 || err != nil || n < 0 || n >= len(data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		total := strconv.Itoa(len(data))
		if unsized != "" {
			total = "*"
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%s", n, len(data)-1, total))
	}
	switch unsized {
	case "":
		w.Header().Set("Content-Length", strconv.Itoa(len(data)-start))
	case "close":
		// net/http then writes no length and closes the connection at the end.
		w.Header().Set("Transfer-Encoding", "identity")
	}
	w.Header().Set("ETag", `"`+f.sha+`"`)
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	if unsized == "chunked" {
		// Headers out before any byte: net/http cannot count the body.
		w.(http.Flusher).Flush()
	}
	if hanging && hang > int64(start) && hang < int64(len(data)) {
		w.Write(data[start:hang])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	if dropping && drop > int64(start) && drop < int64(len(data)) {
		w.Write(data[start:drop])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
	if cutting && every < int64(len(data)-start) {
		w.Write(data[start : int64(start)+every])
		w.(http.Flusher).Flush()
		if unsized == "close" {
			return // the end of a close-delimited body: looks complete
		}
		panic(http.ErrAbortHandler)
	}
	w.Write(data[start:])
}

// Package hub finds model files in the local Hugging Face hub cache and
// downloads the missing ones with the hub's protocol, laying them out exactly
// as huggingface_hub does, so that the Python tools and pp-offline share one
// cache:
//
//	<cache>/models--<org>--<name>/
//	    blobs/<etag>                    file contents (sha256 for LFS files, git blob sha1 otherwise)
//	    blobs/<etag>.incomplete         a download in progress (resumed with a Range request)
//	    snapshots/<commit>/<file>       relative symlink to ../../blobs/<etag>
//	    refs/<revision>                 the commit hash the revision named when downloaded
//	    .no_exist/<commit>/<file>       an empty marker: the file is not in that commit
//
// The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// DefaultRevision is the branch used when none is given.
const DefaultRevision = "main"

// File is one file wanted from a repository.
type File struct {
	Name string
	// Optional files may be absent from the repository (config.json of a
	// fine-tune); their absence is recorded under .no_exist/ as
	// huggingface_hub does.
	Optional bool
}

// Names returns the names of files.
func Names(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Name
	}
	return out
}

// homeDir is huggingface_hub's HF_HOME: $HF_HOME, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
func homeDir() (string, error) {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no Hugging Face cache: set HF_HOME or HF_HUB_CACHE (%v)", err)
	}
	return filepath.Join(home, ".cache", "huggingface"), nil
}

// CacheDir is the hub cache directory the environment names.
func CacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	home, err := homeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "hub"), nil
}

// Offline reports whether HF_HUB_OFFLINE asks for no network access (1, on,
// yes or true, as huggingface_hub reads it).
func Offline() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "on", "yes", "true":
		return true
	}
	return false
}

var (
	repoPart   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)
	revChars   = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
)

// ValidateRepo checks a repository id ("org/name" or "name") as the hub
// spells them, so that it can name a cache folder safely.
func ValidateRepo(repo string) error {
	parts := strings.Split(repo, "/")
	if repo == "" || len(parts) > 2 || len(repo) > 96 {
		return fmt.Errorf("--hf-repo %q: want org/name", repo)
	}
	for _, p := range parts {
		if !repoPart.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") || strings.HasSuffix(p, ".") || strings.HasSuffix(p, "-") {
			return fmt.Errorf("--hf-repo %q: not a Hugging Face repository id (org/name of letters, digits, '.', '_', '-')", repo)
		}
	}
	return nil
}

// ValidateRevision checks a branch, tag or commit name so that refs/<revision>
// stays inside the cache.
func ValidateRevision(rev string) error {
	if !revChars.MatchString(rev) || len(rev) > 255 || strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") {
		return fmt.Errorf("--revision %q: not a branch, tag or commit name", rev)
	}
	for _, p := range strings.Split(rev, "/") {
		if p == "" || p == "." || p == ".." {
			return fmt.Errorf("--revision %q: not a branch, tag or commit name", rev)
		}
	}
	return nil
}

func validFileName(name string) error {
	if !filepath.IsLocal(name) || strings.Contains(name, "\\") || strings.Contains(name, "\x00") || filepath.Clean(name) != name {
		return fmt.Errorf("%q: not a file name inside a repository", name)
	}
	return nil
}

// Cache is one hub cache directory.
type Cache struct{ Dir string }

// RepoDir is the folder of a model repository: models--<org>--<name>.
func (c Cache) RepoDir(repo string) string {
	return filepath.Join(c.Dir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Snapshot is one commit of a repository in the cache.
type Snapshot struct {
	Repo, Revision, Commit string
	Dir                    string // <repo dir>/snapshots/<commit>
}

// Path is the path of a file of the snapshot.
func (s Snapshot) Path(name string) string { return filepath.Join(s.Dir, filepath.FromSlash(name)) }

// Commit returns the commit that revision names in the cache: the revision
// itself when it is a commit hash, else the content of refs/<revision>; ""
// when the cache does not know the revision.
func (c Cache) Commit(repo, revision string) (string, error) {
	if commitHash.MatchString(revision) {
		return revision, nil
	}
	p := filepath.Join(c.RepoDir(repo), "refs", filepath.FromSlash(revision))
	data, err := readSmall(p, 256)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(data))
	if !commitHash.MatchString(commit) {
		return "", fmt.Errorf("%s: not a commit hash (a damaged cache: delete the file and run again)", p)
	}
	return commit, nil
}

// readSmall reads a file of at most max bytes; errors name the file.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	f.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	case int64(len(data)) > max:
		return nil, fmt.Errorf("%s: more than %d bytes", path, max)
	}
	return data, nil
}

// Lookup finds the snapshot of repo that revision names (through refs/) and
// reports which of files it lacks. Every file comes from that one snapshot;
// an optional file known to be absent from the commit is not missing. A
// revision the cache does not know gives a Snapshot with no Commit and every
// file missing.
func (c Cache) Lookup(repo, revision string, files []File) (Snapshot, []string, error) {
	snap := Snapshot{Repo: repo, Revision: revision}
	commit, err := c.Commit(repo, revision)
	if err != nil || commit == "" {
		return snap, Names(files), err
	}
	snap.Commit = commit
	snap.Dir = filepath.Join(c.RepoDir(repo), "snapshots", commit)
	var missing []string
	for _, f := range files {
		if !c.has(snap, f) {
			missing = append(missing, f.Name)
		}
	}
	return snap, missing, nil
}

func (c Cache) has(snap Snapshot, f File) bool {
	if st, err := os.Stat(snap.Path(f.Name)); err == nil && st.Mode().IsRegular() {
		return true
	}
	return f.Optional && c.knownAbsent(snap.Repo, snap.Commit, f.Name)
}

func (c Cache) noExistPath(repo, commit, name string) string {
	return filepath.Join(c.RepoDir(repo), ".no_exist", commit, filepath.FromSlash(name))
}

func (c Cache) knownAbsent(repo, commit, name string) bool {
	_, err := os.Stat(c.noExistPath(repo, commit, name))
	return err == nil
}

// Snapshots lists the commit folders of repo in the cache (for messages).
func (c Cache) Snapshots(repo string) []string {
	ents, err := os.ReadDir(filepath.Join(c.RepoDir(repo), "snapshots"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// OfflineError is the one error of an offline lookup: every missing file.
type OfflineError struct {
	Cache, Repo, Revision string
	Missing               []string
	NoRef                 bool     // the cache does not know the revision at all
	Snapshots             []string // commits present, when NoRef
}

func (e *OfflineError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HF_HUB_OFFLINE is set and the Hugging Face cache %s lacks %s of %s at revision %s", e.Cache, strings.Join(e.Missing, ", "), e.Repo, e.Revision)
	if e.NoRef {
		fmt.Fprintf(&b, " (no refs/%s", e.Revision)
		if len(e.Snapshots) > 0 {
			fmt.Fprintf(&b, "; snapshots present: %s, pick one with --revision", strings.Join(e.Snapshots, ", "))
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": run `pp-offline download --hf-repo %s --revision %s` where the network is reachable (same cache), or pass the files with their flags", e.Repo, e.Revision)
	return b.String()
}

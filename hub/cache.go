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
// The cache is $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (see CacheDir).
package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
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
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface, with "~" and
// $VARS expanded as huggingface_hub's constants.py does.
func homeDir() (string, error) {
	d := os.Getenv("HF_HOME")
	if d == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no Hugging Face cache: set HF_HOME or HF_HUB_CACHE (%v)", err)
			}
			base = filepath.Join(home, ".cache")
		}
		d = filepath.Join(base, "huggingface")
	}
	return expandPath(d), nil
}

// CacheDir is the hub cache directory the environment names, in
// huggingface_hub's order: $HF_HUB_CACHE, else the legacy
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. A variable
// set to "" counts as unset (Python would take "" as the current folder).
func CacheDir() (string, error) {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(v); d != "" {
			return expandPath(d), nil
		}
	}
	home, err := homeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "hub"), nil
}

// expandPath does what Python's os.path.expandvars(os.path.expanduser(p))
// does on POSIX: a leading ~ or ~user becomes that home folder, then $NAME
// and ${NAME} become the variable's value; unknown ones stay as written.
func expandPath(p string) string {
	if strings.HasPrefix(p, "~") {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			i = len(p)
		}
		home, ok := "", false
		if i == 1 {
			home, ok = os.LookupEnv("HOME")
			if !ok {
				if u, err := user.Current(); err == nil {
					home, ok = u.HomeDir, true
				}
			}
		} else if u, err := user.Lookup(p[1:i]); err == nil {
			home, ok = u.HomeDir, true
		}
		if ok {
			if p = strings.TrimRight(home, "/") + p[i:]; p == "" {
				p = "/"
			}
		}
	}
	return expandVars(p)
}

// expandVars replaces $NAME and ${NAME} (NAME of ASCII letters, digits and
// '_') with the variable's value when it is set, as Python's
// posixpath.expandvars does.
func expandVars(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		if p[i] != '$' || i+1 >= len(p) {
			b.WriteByte(p[i])
			i++
			continue
		}
		var name string
		end := i + 1
		if p[end] == '{' {
			j := strings.IndexByte(p[end:], '}')
			if j < 0 {
				b.WriteByte(p[i])
				i++
				continue
			}
			name, end = p[end+1:end+j], end+j+1
		} else {
			for end < len(p) && (p[end] == '_' || p[end] >= '0' && p[end] <= '9' || p[end] >= 'a' && p[end] <= 'z' || p[end] >= 'A' && p[end] <= 'Z') {
				end++
			}
			name = p[i+1 : end]
		}
		if v, ok := os.LookupEnv(name); ok && name != "" {
			b.WriteString(v)
		} else {
			b.WriteString(p[i:end])
		}
		i = end
	}
	return b.String()
}

// Offline reports whether the environment asks for no network access, as
// huggingface_hub reads it: $HF_HUB_OFFLINE, or when that is unset or empty
// $TRANSFORMERS_OFFLINE, is 1, ON, YES or TRUE in any case (nothing
// trimmed). Offline means not a single request.
func Offline() bool {
	_, on := OfflineVar()
	return on
}

// OfflineVar names the variable that decided Offline ("" when neither is
// set) and whether it asks for offline mode.
func OfflineVar() (name string, on bool) {
	for _, v := range []string{"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"} {
		if val := os.Getenv(v); val != "" {
			switch strings.ToUpper(val) {
			case "1", "ON", "YES", "TRUE":
				return v, true
			}
			return v, false
		}
	}
	return "", false
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
	Var                   string   // the variable that asked for offline mode ("": HF_HUB_OFFLINE)
}

func (e *OfflineError) Error() string {
	var b strings.Builder
	v := e.Var
	if v == "" {
		v = "HF_HUB_OFFLINE"
	}
	fmt.Fprintf(&b, "%s is set and the Hugging Face cache %s lacks %s of %s at revision %s", v, e.Cache, strings.Join(e.Missing, ", "), e.Repo, e.Revision)
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

package hub

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Limits bound what an archive may extract.
type Limits struct {
	MaxEntries  int
	MaxFileSize int64 // one file
	MaxTotal    int64 // all files together
}

// DefaultLimits are far above PersonaPlex's voices.tgz (a few hundred MB).
var DefaultLimits = Limits{MaxEntries: 10000, MaxFileSize: 1 << 30, MaxTotal: 8 << 30}

// ExtractOnce extracts the .tgz archive into the folder dest, as the
// reference's tarfile.extractall beside voices.tgz does, unless dest already
// exists. The archive is unpacked into a temporary folder beside dest and
// renamed into place, so a killed run never leaves a dest that looks done.
// An archive whose entries all sit in one top folder named like dest
// ("voices/...") gives that folder; otherwise the entries become dest's
// content. Only regular files, folders and links that stay inside are
// accepted: no absolute paths, no "..", no devices, within lim. It reports
// whether it extracted anything.
func ExtractOnce(archive, dest string, lim Limits) (bool, error) {
	if st, err := os.Lstat(dest); err == nil {
		if !st.IsDir() {
			return false, fmt.Errorf("%s: exists and is not a folder (delete it to extract %s again)", dest, filepath.Base(archive))
		}
		return false, nil
	}
	parent, base := filepath.Dir(dest), filepath.Base(dest)
	removeStale(parent, "."+base+".extract-")
	tmp, err := os.MkdirTemp(parent, "."+base+".extract-*")
	if err != nil {
		return false, fmt.Errorf("%s: %v", parent, fileio.PathErr(err))
	}
	defer os.RemoveAll(tmp)
	if err := extractTGZ(archive, tmp, lim); err != nil {
		return false, err
	}
	src := tmp
	if ents, err := os.ReadDir(tmp); err == nil && len(ents) == 1 && ents[0].Name() == base && ents[0].Type().IsDir() {
		src = filepath.Join(tmp, base)
	}
	if err := os.Chmod(src, 0o755); err != nil {
		return false, fmt.Errorf("%s: %v", src, fileio.PathErr(err))
	}
	if err := os.Rename(src, dest); err != nil {
		// Another process may have finished the same extraction first.
		if st, serr := os.Lstat(dest); serr == nil && st.IsDir() {
			return false, nil
		}
		return false, fmt.Errorf("%s: %v", dest, fileio.PathErr(err))
	}
	return true, nil
}

// removeStale deletes the temporary folders of extractions killed more than
// an hour ago (a running one is younger).
func removeStale(dir, prefix string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// boundedReader fails once more than max bytes were read (a decompression
// bomb stops there).
type boundedReader struct {
	r        io.Reader
	n, max   int64
	archive  string
	exceeded bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.exceeded = true
		return n, fmt.Errorf("%s: decompresses to more than %d bytes", b.archive, b.max)
	}
	return n, err
}

// extractTGZ unpacks archive into the existing folder dir, through an
// os.Root so that nothing can be written outside it.
func extractTGZ(archive, dir string, lim Limits) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("%s: %v", archive, fileio.PathErr(err))
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: not a gzip archive (%v)", archive, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("%s: %v", dir, fileio.PathErr(err))
	}
	defer root.Close()
	// Headers and padding: at most a few KiB per entry.
	br := &boundedReader{r: gz, max: lim.MaxTotal + int64(lim.MaxEntries+2)*8192 + 1<<20, archive: archive}
	tr := tar.NewReader(br)
	entries, total := 0, int64(0)
	files := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if br.exceeded {
				return fmt.Errorf("%s: decompresses to more than %d bytes", archive, br.max)
			}
			return fmt.Errorf("%s: damaged archive: %v", archive, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if entries++; entries > lim.MaxEntries {
			return fmt.Errorf("%s: more than %d entries", archive, lim.MaxEntries)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return fmt.Errorf("%s: entry %q: %v", archive, hdr.Name, err)
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s: entry %q: %s", archive, hdr.Name, fmt.Sprintf(format, a...))
		}
		if name == "" {
			if hdr.Typeflag == tar.TypeDir {
				continue
			}
			return bad("not a file name")
		}
		if d := path.Dir(name); d != "." && hdr.Typeflag != tar.TypeDir {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return bad("%v", fileio.PathErr(err))
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return bad("%v", fileio.PathErr(err))
			}
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > lim.MaxFileSize {
				return bad("%d bytes, more than the %d a file may have", hdr.Size, lim.MaxFileSize)
			}
			if total+hdr.Size > lim.MaxTotal {
				return bad("the files would exceed %d bytes in all", lim.MaxTotal)
			}
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return bad("%v", fileio.PathErr(err))
			}
			n, err := io.Copy(out, io.LimitReader(tr, hdr.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				if br.exceeded {
					return fmt.Errorf("%s: decompresses to more than %d bytes", archive, br.max)
				}
				return bad("%v", fileio.PathErr(err))
			}
			if n != hdr.Size {
				return bad("truncated (%d of %d bytes)", n, hdr.Size)
			}
			total += n
			files[name] = true
		case tar.TypeSymlink:
			if err := linkTarget(hdr.Linkname); err != nil {
				return bad("symlink to %q: %v", hdr.Linkname, err)
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return bad("%v", fileio.PathErr(err))
			}
		case tar.TypeLink:
			target, err := entryName(hdr.Linkname)
			if err != nil || !files[target] {
				return bad("hard link to %q, not a file extracted before it", hdr.Linkname)
			}
			if err := root.Link(target, name); err != nil {
				return bad("%v", fileio.PathErr(err))
			}
		default:
			return bad("type %q is not accepted (only files, folders and links inside the archive)", string(hdr.Typeflag))
		}
	}
}

// entryName cleans an entry name: "" for the archive's root ("./"), an error
// for an absolute path, "..", or a name that is not a plain relative path.
func entryName(n string) (string, error) {
	switch {
	case strings.ContainsRune(n, 0):
		return "", errors.New("NUL in the name")
	case strings.HasPrefix(n, "/"):
		return "", errors.New("absolute path")
	case strings.Contains(n, `\`):
		return "", errors.New("backslash in the name")
	}
	n = strings.TrimSuffix(n, "/")
	for strings.HasPrefix(n, "./") {
		n = n[2:]
	}
	if n == "" || n == "." {
		return "", nil
	}
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "..":
			return "", errors.New("goes up a folder (..)")
		case "", ".":
			return "", errors.New("not a clean relative path")
		}
	}
	return n, nil
}

// linkTarget accepts a symlink target that can only resolve inside the
// folder: relative, without "..".
func linkTarget(t string) error {
	switch {
	case t == "" || strings.ContainsRune(t, 0):
		return errors.New("empty or NUL target")
	case strings.HasPrefix(t, "/"):
		return errors.New("points to an absolute path")
	}
	for _, p := range strings.Split(t, "/") {
		if p == ".." {
			return errors.New("points out of the folder (..)")
		}
	}
	return nil
}

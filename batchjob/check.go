package batchjob

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Check refuses what would clobber, race or hang, before any model loads:
// two items (or one item's two outputs) writing the same file; an output
// that is an input of any item (its user WAV or a voice prompt given as a
// path), the manifest, one of extraIns (the model files, say) or one of
// extraOuts (the report); an output that exists and is not a regular
// file, is read-only or whose name is too long (fileio's guard); an input
// that exists but is not a regular file (a named pipe would block the job,
// links are followed). Every input is registered with fileio, whose
// writers refuse it again at write time. Paths are compared as the system
// opens them (pathKey): by device and inode for files that exist, else by
// their folder's device and inode and their name. manifest names the file
// in errors ("" in --input-dir mode).
func Check(items []*Item, manifest string, extraIns, extraOuts map[string]string) error {
	type use struct {
		it      *Item
		what, p string
	}
	inputs := map[string]use{} // the first item that reads each file
	add := func(p string, u use) {
		if k := pathKey(p); inputs[k].it == nil {
			inputs[k] = u
		}
	}
	if manifest != "" {
		fileio.AddInputs(manifest)
	}
	for _, p := range extraIns {
		fileio.AddInputs(p)
	}
	for _, it := range items {
		for _, in := range []struct{ what, p string }{{"input_wav", it.InputWAV}, {"voice_prompt", it.VoicePrompt}, {"text_prompt_file", it.TextPromptFile}} {
			if in.what == "voice_prompt" && !it.VoiceIsPath || in.p == "" {
				continue
			}
			add(in.p, use{it, in.what, in.p})
			if st, err := os.Stat(in.p); err == nil {
				if !st.Mode().IsRegular() {
					return itemErr(manifest, it, fmt.Sprintf("%s %s: %v", in.what, in.p, strings.TrimPrefix(fileio.CheckInput(in.p).Error(), in.p+": ")))
				}
				fileio.AddInputs(in.p)
			}
		}
	}
	outputs := map[string]use{}
	for _, it := range items {
		for _, out := range itemOutputs(it) {
			o, p := use{it, out.what, out.p}, out.p
			k := pathKey(p)
			if in, ok := inputs[k]; ok {
				return itemErr(manifest, it, fmt.Sprintf("%s %s is the %s of %s: outputs are never written over inputs", o.what, p, in.what, where(manifest, in.it)))
			}
			if prev, ok := outputs[k]; ok {
				if prev.it == it {
					return itemErr(manifest, it, fmt.Sprintf("%s%s and %s are the same file %s", prev.what, alias(p, prev.p), o.what, p))
				}
				return itemErr(manifest, it, fmt.Sprintf("%s %s is also the %s%s of %s", o.what, p, prev.what, alias(p, prev.p), where(manifest, prev.it)))
			}
			if manifest != "" && k == pathKey(manifest) {
				return itemErr(manifest, it, fmt.Sprintf("%s %s is the manifest: outputs are never written over inputs", o.what, p))
			}
			for what, x := range extraIns {
				if k == pathKey(x) {
					return itemErr(manifest, it, fmt.Sprintf("%s %s is the file of %s: outputs are never written over inputs", o.what, p, what))
				}
			}
			if err := fileio.CheckTarget(p); err != nil {
				return itemErr(manifest, it, fmt.Sprintf("%s %v", o.what, err))
			}
			outputs[k] = o
		}
	}
	for what, p := range extraOuts {
		k := pathKey(p)
		if u, ok := outputs[k]; ok {
			return itemErr(manifest, u.it, fmt.Sprintf("%s %s is also the file of %s%s", u.what, u.p, what, alias(u.p, p)))
		}
		if u, ok := inputs[k]; ok {
			return fmt.Errorf("%s %s is the %s of %s: outputs are never written over inputs", what, p, u.what, u.it.Where(manifest))
		}
		if manifest != "" && k == pathKey(manifest) {
			return fmt.Errorf("%s %s is the manifest: outputs are never written over inputs", what, p)
		}
		for w, x := range extraIns {
			if k == pathKey(x) {
				return fmt.Errorf("%s %s is the file of %s: outputs are never written over inputs", what, p, w)
			}
		}
	}
	return nil
}

// CheckResolved checks the items' outputs again once their voices are
// resolved (a voice given by name is found in a folder only then): an
// output that is any registered input, or not writable over, is refused.
func CheckResolved(items []*Item, manifest string) error {
	for _, it := range items {
		for _, o := range itemOutputs(it) {
			if err := fileio.CheckTarget(o.p); err != nil {
				return itemErr(manifest, it, fmt.Sprintf("%s %v", o.what, err))
			}
		}
	}
	return nil
}

// namedPath is one file of an item and the key that names it.
type namedPath struct{ what, p string }

// itemOutputs are the files an item writes: output_wav, output_text,
// output_mix when given, and the fingerprint.
func itemOutputs(it *Item) []namedPath {
	o := []namedPath{{"output_wav", it.OutputWAV}, {"output_text", it.OutputText}}
	if it.OutputMix != "" {
		o = append(o, namedPath{"output_mix", it.OutputMix})
	}
	return append(o, namedPath{"fingerprint", FingerprintPath(it.OutputWAV)})
}

// alias is " q" when q names the file otherwise than p, else "": a file
// given two ways (a link, "..", a bind mount) is named both ways.
func alias(p, q string) string {
	if filepath.Clean(p) == filepath.Clean(q) {
		return ""
	}
	return " " + q
}

func where(manifest string, it *Item) string {
	if it.Line > 0 {
		return fmt.Sprintf("line %d", it.Line)
	}
	return it.InputWAV
}

func itemErr(manifest string, it *Item, msg string) error {
	if it.Line > 0 {
		return &LineError{File: manifest, Line: it.Line, Msg: msg}
	}
	return fmt.Errorf("%s: %s", it.InputWAV, msg)
}

// pathKey identifies a file as the system would open it: by device and
// inode when it exists (so hard links and other paths to it compare
// equal), else by the key of the folder it would be made in (dirKey) and
// its name; the absolute path with links resolved only when neither can
// be had (a file system without file identities).
func pathKey(p string) string {
	if st, err := os.Stat(p); err == nil {
		if k, ok := fileKey(p, st); ok {
			return k
		}
	}
	if k, ok := dirKey(fileio.DirOf(p)); ok {
		return k + "/" + filepath.Base(p)
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
		return filepath.Join(d, filepath.Base(a))
	}
	return a
}

// dirKey identifies folder d as the system resolves it: the device and
// inode of its nearest existing folder, found from the path as given
// (fileio.DirOf: ".." after a link is the link target's parent, not what
// a textual Clean leaves), then the rest of the path, which
// PrepareOutputs creates as plain folders. So a link to the folder, a
// bind mount of it and ".." after a link compare as the folder itself.
func dirKey(d string) (string, bool) {
	rest := "."
	for {
		if st, err := os.Stat(d); err == nil {
			k, ok := fileKey(d, st)
			if rest != "." {
				k += "/" + filepath.ToSlash(rest)
			}
			return k, ok
		}
		up := fileio.DirOf(d)
		if up == d {
			return "", false
		}
		rest = filepath.Join(filepath.Base(d), rest) // cleaned: plain folders
		d = up
	}
}

// PrepareOutputs creates the folders of the items' outputs and proves each
// can be written now rather than after the run.
func PrepareOutputs(items []*Item) error {
	done := map[string]bool{}
	for _, it := range items {
		for _, o := range itemOutputs(it)[:len(itemOutputs(it))-1] {
			p := o.p
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return fmt.Errorf("%s: is a directory", p)
			}
			dir := fileio.DirOf(p) // as the writer will open it: ".." after a link kept
			if done[dir] {
				continue
			}
			done[dir] = true
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%s: cannot create the output folder: %v", p, pathErr(err))
			}
			f, err := os.CreateTemp(dir, ".pp-offline-check-*")
			if err != nil {
				return fmt.Errorf("%s: cannot write in %s: %v", p, dir, pathErr(err))
			}
			f.Close()
			os.Remove(f.Name())
		}
	}
	return nil
}

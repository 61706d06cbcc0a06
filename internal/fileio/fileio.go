// Package fileio writes output files so that no reader ever sees a partial
// one (temporary file beside the target, synced, renamed), and words file
// errors as one line naming the file.
package fileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is one output: its path and its whole content.
type File struct {
	Path string
	Data []byte
}

// WriteAtomic writes data to path through a temporary file renamed into place.
func WriteAtomic(path string, data []byte) error {
	return WriteAllAtomic(File{path, data})
}

// WriteAllAtomic writes every file to a temporary file (TempDir beside
// it), then renames them all; if a rename fails, the files already renamed
// are removed, so a run leaves all of its outputs or none. Files are mode
// 0644. Each target passes the guard (checkTarget: no input, no
// non-regular or read-only file) before anything is written and again just
// before the renames.
func WriteAllAtomic(files ...File) error {
	tmps := make([]*temp, len(files))
	cleanup := func() {
		for _, t := range tmps {
			if t != nil {
				t.remove()
			}
		}
	}
	for _, f := range files {
		if err := checkName(f.Path); err != nil {
			return err
		}
		if _, err := checkTarget(f.Path); err != nil {
			return err
		}
	}
	for i, f := range files {
		t, err := writeTemp(f)
		if err != nil {
			cleanup()
			return fmt.Errorf("%s: %w", f.Path, PathErr(err))
		}
		tmps[i] = t
	}
	for _, f := range files {
		if _, err := checkTarget(f.Path); err != nil {
			cleanup()
			return err
		}
	}
	for i, f := range files {
		if err := os.Rename(tmps[i].path, f.Path); err != nil {
			for _, done := range files[:i] {
				os.Remove(done.Path)
			}
			cleanup()
			return fmt.Errorf("%s: %w", f.Path, PathErr(err))
		}
	}
	for _, t := range tmps {
		t.f.Close()
		os.Remove(filepath.Dir(t.path)) // the temporary folder, when empty
	}
	syncDir(files)
	return nil
}

// syncDir syncs the folders of files, so that the renames survive a crash.
func syncDir(files []File) {
	done := map[string]bool{}
	for _, f := range files {
		d := DirOf(f.Path)
		if done[d] {
			continue
		}
		done[d] = true
		if df, err := os.Open(d); err == nil {
			df.Sync()
			df.Close()
		}
	}
}

func writeTemp(f File) (*temp, error) {
	t, err := newTemp(f.Path)
	if err != nil {
		return nil, err
	}
	_, err = t.f.Write(f.Data)
	if err == nil {
		err = t.f.Chmod(0o644) // temporaries are made 0600; outputs are ordinary files
	}
	if err == nil {
		err = t.f.Sync()
	}
	if err != nil {
		t.remove()
		return nil, err
	}
	return t, nil
}

// PathErr strips the file name from an *os.PathError (callers put the name
// the user gave in front: "in.wav: no such file or directory").
func PathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// WriteStreamAtomic writes path through a temporary file (TempDir beside
// it) that write fills (buffered), synced and renamed into place; on any
// error the temporary file is removed and path is untouched. The target
// passes the guard before and after. For outputs too large to hold in
// memory.
func WriteStreamAtomic(path string, write func(w io.Writer) error) error {
	if err := checkName(path); err != nil {
		return err
	}
	if _, err := checkTarget(path); err != nil {
		return err
	}
	t, err := newTemp(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	bw := bufio.NewWriterSize(t.f, 4<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = t.f.Chmod(0o644)
	}
	if err == nil {
		err = t.f.Sync()
	}
	if err != nil {
		t.remove()
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if _, err := checkTarget(path); err != nil {
		t.remove()
		return err
	}
	if err := os.Rename(t.path, path); err != nil {
		t.remove()
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	t.f.Close()
	os.Remove(filepath.Dir(t.path))
	syncDir([]File{{Path: path}})
	return nil
}

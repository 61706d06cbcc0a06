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

// WriteAllAtomic writes every file to a temporary file beside it, then
// renames them all; if a rename fails, the files already renamed are removed,
// so a run leaves all of its outputs or none. Files are mode 0644.
func WriteAllAtomic(files ...File) error {
	tmps := make([]string, len(files))
	cleanup := func() {
		for _, t := range tmps {
			if t != "" {
				os.Remove(t)
			}
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
	for i, f := range files {
		if err := os.Rename(tmps[i], f.Path); err != nil {
			for _, done := range files[:i] {
				os.Remove(done.Path)
			}
			cleanup()
			return fmt.Errorf("%s: %w", f.Path, PathErr(err))
		}
		tmps[i] = ""
	}
	return nil
}

func writeTemp(f File) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(f.Data)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes 0600 files; outputs are ordinary files
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
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

// WriteStreamAtomic writes path through a temporary file beside it that
// write fills (buffered), synced and renamed into place; on any error the
// temporary file is removed and path is untouched. For outputs too large to
// hold in memory.
func WriteStreamAtomic(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	bw := bufio.NewWriterSize(tmp, 4<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, PathErr(err))
	}
	return nil
}

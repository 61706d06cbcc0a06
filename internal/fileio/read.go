package fileio

import (
	"fmt"
	"io"
)

// ReadFileLimit reads a small input file (a config, a tokenizer, a
// manifest) whole, refusing directories, devices (/dev/zero is not a
// config), named pipes (opened without blocking, see OpenInput) and
// anything longer than limit bytes — checked while reading too. The file
// is registered as an input of the run. Errors name the file.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	f, err := OpenInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d expected at most", path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than the %d bytes expected at most", path, limit)
	}
	return data, nil
}

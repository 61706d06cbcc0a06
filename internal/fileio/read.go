package fileio

import (
	"fmt"
	"io"
	"os"
)

// ReadFileLimit reads a small input file (a config, a tokenizer, a
// manifest) whole, refusing directories, devices (/dev/zero is not a
// config) and anything longer than limit bytes — checked while reading, so
// a pipe cannot make it allocate more. Errors name the file.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	switch m := st.Mode(); {
	case m.IsDir():
		return nil, fmt.Errorf("%s: is a directory, not a file", path)
	case m&(os.ModeDevice|os.ModeCharDevice) != 0:
		return nil, fmt.Errorf("%s: is a device, not a file", path)
	case m.IsRegular() && st.Size() > limit:
		return nil, fmt.Errorf("%s: %d bytes, more than the %d expected at most", path, st.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, PathErr(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than the %d bytes expected at most", path, limit)
	}
	return data, nil
}

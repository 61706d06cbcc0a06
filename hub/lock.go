package hub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// lockFile takes the lock huggingface_hub takes around a download
// (.locks/models--org--name/<etag>.lock: fileio.TryLock is the lock Python's
// filelock takes on Unix and on Windows), so that two downloads of one blob
// never write the same .incomplete file. waiting is called once when
// another process holds it.
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Dir(path), fileio.PathErr(err))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, fileio.PathErr(err))
	}
	told := false
	for {
		held, err := fileio.TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if !held {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !told {
			waiting()
			told = true
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

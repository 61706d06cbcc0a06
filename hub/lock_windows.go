//go:build windows

package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// lockFile takes the lock huggingface_hub takes around a download
// (.locks/models--org--name/<etag>.lock). On Windows Python's filelock
// locks the file's first byte (msvcrt.locking); LockFileEx on that byte is
// the same lock, so the two exclude each other. waiting is called once
// when another process holds it.
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Dir(path), fileio.PathErr(err))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, fileio.PathErr(err))
	}
	h := windows.Handle(f.Fd())
	told := false
	for {
		var ol windows.Overlapped
		err := windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
		if err == nil {
			return func() {
				var ol windows.Overlapped
				windows.UnlockFileEx(h, 0, 1, 0, &ol)
				f.Close()
			}, nil
		}
		if !errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			f.Close()
			return nil, fmt.Errorf("%s: %v", path, err)
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

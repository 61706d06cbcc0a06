//go:build unix

package batchjob

import (
	"fmt"
	"os"
	"syscall"
)

// fileKey is pathKey's identity of an existing file: its device and inode.
func fileKey(_ string, st os.FileInfo) (string, bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("inode:%d:%d", sys.Dev, sys.Ino), true
	}
	return "", false
}

//go:build windows

package batchjob

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// fileKey is pathKey's identity of an existing file on Windows: its
// volume's serial number and its file index (GetFileInformationByHandle),
// the pair os.SameFile compares, so hard links compare equal.
func fileKey(p string, _ os.FileInfo) (string, bool) {
	u, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return "", false
	}
	h, err := windows.CreateFile(u, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return "", false
	}
	defer windows.CloseHandle(h)
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return "", false
	}
	return fmt.Sprintf("file:%d:%d:%d", fi.VolumeSerialNumber, fi.FileIndexHigh, fi.FileIndexLow), true
}

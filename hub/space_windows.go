//go:build windows

package hub

import "golang.org/x/sys/windows"

// freeSpace is the space the process may still write in dir's volume
// (GetDiskFreeSpaceEx's bytes available to the caller, which counts its
// quota).
func freeSpace(dir string) (int64, bool) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, false
	}
	var avail, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &totalFree); err != nil {
		return 0, false
	}
	if avail > 1<<62 {
		avail = 1 << 62
	}
	return int64(avail), true
}

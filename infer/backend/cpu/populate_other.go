//go:build !linux

package cpu

import "unsafe"

// populate has no portable equivalent of Linux's MADV_POPULATE_WRITE: the
// rings' pages are faulted in by their writes.
func populate(p unsafe.Pointer, n uintptr) {}

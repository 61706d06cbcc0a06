//go:build unix && !linux

package weights

// adviseMapping has no portable equivalent of Linux's MADV_HUGEPAGE; the
// mapping is used as the kernel gives it.
func adviseMapping([]byte) {}

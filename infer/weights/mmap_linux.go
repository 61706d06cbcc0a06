package weights

import "golang.org/x/sys/unix"

// adviseMapping marks a weight mapping MADV_HUGEPAGE. The pages of a file
// that is not yet in the page cache are then read ahead into 2 MiB folios
// as the model first touches them; without it the kernel reads a mapping
// touched in the model's order (not the file's) mostly into single 4 KiB
// pages, and the batch tiles read weights held that way ~1.25× slower
// (docs/PERFORMANCE.md, "Page-cache folios"). It is a hint: pages already
// cached keep their folios, and a kernel without transparent huge pages
// refuses it (the error is ignored; the mapping works the same).
func adviseMapping(data []byte) {
	if len(data) > 0 {
		_ = unix.Madvise(data, unix.MADV_HUGEPAGE)
	}
}

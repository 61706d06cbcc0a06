package weights

import (
	"fmt"
	"os"
)

// CheckIntact reports an error when the mapped file has shrunk since it was
// opened (truncated or rewritten in place under a running job): reading a
// mapped page past its new end would kill the process with SIGBUS. A file
// replaced by another (a new inode, as a download or a copy does) is
// harmless: the mapping keeps the old one. Jobs call it before every step,
// so a shrink is seen before the step reads its weights (one that happens
// within a step can still fault).
func (f *File) CheckIntact() error {
	if f == nil || !f.mapped || f.opened == nil {
		return nil
	}
	st, err := os.Stat(f.Path)
	if err != nil || !os.SameFile(st, f.opened) {
		return nil
	}
	if st.Size() < f.opened.Size() {
		return fmt.Errorf("%s: the file shrank from %d to %d bytes while in use (was it overwritten?): stopping before reading past its end", f.Path, f.opened.Size(), st.Size())
	}
	return nil
}

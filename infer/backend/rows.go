package backend

import "fmt"

// RowsDownloader is implemented by a backend whose reads into host memory
// are costly to repeat (a device: each Download is a device→host copy and
// a wait for the queued work): DownloadRows reads several row blocks of a
// view — every conversation's logits, every codec stream's output — in one
// copy and one wait.
type RowsDownloader interface {
	DownloadRows(dsts [][]float32, src Acts)
}

// RowsUploader is implemented by a backend that uploads several host
// blocks into consecutive rows of a view in one copy.
type RowsUploader interface {
	UploadRows(dst Acts, srcs [][]float32)
}

// DownloadRows copies src's rows into dsts in order: dsts[i] receives the
// next len(dsts[i])/src.Cols rows (row-major), and the dsts together take
// every row of src. On a RowsDownloader it is one device→host copy;
// otherwise one Download per block (the CPU backend's: a copy each, as
// many bytes as one copy of all, nothing to batch).
func DownloadRows(be Backend, dsts [][]float32, src Acts) {
	checkBlocks("DownloadRows", dsts, src)
	if d, ok := be.(RowsDownloader); ok {
		d.DownloadRows(dsts, src)
		return
	}
	r := 0
	for _, d := range dsts {
		n := blockRows(len(d), src.Cols)
		be.Download(d, src.Slice(r, r+n))
		r += n
	}
}

// UploadRows copies srcs into consecutive rows of dst, as DownloadRows
// reads them: srcs[i] fills the next len(srcs[i])/dst.Cols rows. On a
// RowsUploader it is one host→device copy; otherwise one Upload per block.
func UploadRows(be Backend, dst Acts, srcs [][]float32) {
	checkBlocks("UploadRows", srcs, dst)
	if u, ok := be.(RowsUploader); ok {
		u.UploadRows(dst, srcs)
		return
	}
	r := 0
	for _, s := range srcs {
		n := blockRows(len(s), dst.Cols)
		be.Upload(dst.Slice(r, r+n), s)
		r += n
	}
}

func blockRows(n, cols int) int {
	if cols == 0 {
		return 0
	}
	return n / cols
}

// checkBlocks panics unless the blocks are whole rows of a and cover it
// (a programming error, as a view out of range is).
func checkBlocks(op string, blocks [][]float32, a Acts) {
	rows := 0
	for i, b := range blocks {
		if a.Cols > 0 && len(b)%a.Cols != 0 {
			panic(fmt.Sprintf("backend: %s: block %d of %d values is not whole rows of %d", op, i, len(b), a.Cols))
		}
		rows += blockRows(len(b), a.Cols)
	}
	if a.Cols > 0 && rows != a.Rows {
		panic(fmt.Sprintf("backend: %s: blocks of %d rows for a view of %d", op, rows, a.Rows))
	}
}

// Syncer is implemented by a backend whose ops run asynchronously (a
// device): Sync returns once every op queued so far has run. Nothing needs
// it for correctness (a Download waits); timers that split a step into
// stages do (lm.Engine.SetStageTiming).
type Syncer interface {
	Sync()
}

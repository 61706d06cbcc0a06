package ops

// Attention's row kernels: one query against many rows of a key or value
// cache, in one call instead of one Dot or Axpy per row. They compute
// exactly the bits of those per-row calls on every kernel variant; the
// assembly (attnrows_amd64.s) only saves the per-call overhead and keeps
// the query (DotRows) or the output (AxpyRows) in registers across rows.

// DotRows sets dst[i] = e.Dot(q, mat[o:o+len(q)]) with o = rows[i]·stride,
// for i < len(rows), bit for bit: the 32-lane contract of matvec_portable.go
// over the first len(q)&^31 elements, then the scalar FMA tail. Rows may
// repeat and come in any order. It panics unless every row lies within mat
// and dst has room for every row. It runs on the calling goroutine.
func (e *Engine) DotRows(dst, q, mat []float32, stride int, rows []int32) {
	n := len(q)
	checkRows("DotRows", len(mat), n, stride, rows)
	if len(dst) < len(rows) {
		panic("ops: DotRows: dst shorter than rows")
	}
	if len(rows) == 0 {
		return
	}
	dst = dst[:len(rows)]
	nl := n &^ (lanes - 1)
	k := e.k.Load()
	switch {
	case nl == 0:
		clear(dst)
	case k.id != kPortable && archDotRows(k.id, dst, q, mat, stride, rows, nl):
	default:
		for i, r := range rows {
			o := int(r) * stride
			dst[i] = k.dot(q, mat[o:o+n], nl)
		}
	}
	if nl == n {
		return
	}
	for i, r := range rows {
		o := int(r) * stride
		dst[i] = dotTail(dst[i], q, mat[o:o+n], nl)
	}
}

// AxpyRows does e.Axpy(dst, w[i], mat[o:o+len(dst)]) with o = rows[i]·stride
// for i = 0, 1, … len(rows)−1 in that order, bit for bit: every element
// gets dst[j] = dst[j] + float32(w[i]·x[j]) row after row (a rounded
// product, then a rounded add; never an FMA). Rows may repeat and come in
// any order. It panics unless every row lies within mat and w has a weight
// for every row. It runs on the calling goroutine.
func (e *Engine) AxpyRows(dst, w, mat []float32, stride int, rows []int32) {
	n := len(dst)
	checkRows("AxpyRows", len(mat), n, stride, rows)
	if len(w) < len(rows) {
		panic("ops: AxpyRows: fewer weights than rows")
	}
	if len(rows) == 0 || n == 0 {
		return
	}
	k := e.k.Load()
	if k.id != kPortable {
		if done, ok := archAxpyRows(k.id, dst, w, mat, stride, rows); ok {
			if done < n {
				d := dst[done:]
				for i, r := range rows {
					o := int(r) * stride
					axpyGo(d, w[i], mat[o+done:o+n])
				}
			}
			return
		}
	}
	// No row kernel: one Axpy per row.
	for i, r := range rows {
		o := int(r) * stride
		e.Axpy(dst, w[i], mat[o:o+n])
	}
}

// checkRows panics unless every row index r gives r·stride+n ≤ lm (n
// elements of row r within a matrix of lm elements) without overflow.
func checkRows(op string, lm, n, stride int, rows []int32) {
	if stride < 0 {
		panic("ops: " + op + ": negative stride")
	}
	if len(rows) == 0 {
		return
	}
	lo, hi := rows[0], rows[0]
	for _, r := range rows[1:] {
		lo, hi = min(lo, r), max(hi, r)
	}
	if lo < 0 || n > lm || (hi > 0 && stride > (lm-n)/int(hi)) {
		panic("ops: " + op + ": row outside the matrix")
	}
}

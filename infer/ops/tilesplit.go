package ops

// The split of a batch's inputs into register tiles, shared by the f32
// mode's tiles (mmtile_amd64.go) and the bf16 mode's (bf16compute.go).

// mmtMaxT bounds the inputs of one pass over the weights of the f32 mode's
// tiles (more run as several passes), and so the tiles of a split. 32:
// Mimi's transformers run two rows a stream, 32 at B = 16, and a pass's
// column block of 32 inputs (256 KiB) and its group of weights fit a
// 1 MiB L2; 16 read their weights twice (2026-12-05, Zen 5: B = 32 f32
// products from memory 162-164 -> 178-179 GFLOP/s).
const mmtMaxT = 32

// mmtTile is one input tile of a pass: the kernel's T input slots (a slot
// past n repeats input 0 of the tile: its outputs are dropped).
type mmtTile struct {
	t0, n, T int
}

// mmtSplit splits n inputs into tiles of the kernels a variant has
// (tmax inputs, and 3 and 2 where has3, has2), writing them to tiles and
// returning their number: tiles of tmax, the remainder in one smaller
// tile, and a remainder of 1 with a tile of tmax before it as 3 + 2
// (tmax 4) or 2 + 2 (tmax 3), so that no slot computes a repeated input.
// Where no kernel fits a tile's inputs exactly, it runs in the smallest
// larger one, its other slots repeating its first input (their outputs
// are dropped).
func mmtSplit(tmax int, has3, has2 bool, n int, tiles *[mmtMaxT]mmtTile) int {
	var sizes [mmtMaxT + 1]int
	k := 0
	q, r := n/tmax, n%tmax
	if r == 1 && q > 0 && has2 && (tmax == 3 || tmax == 4 && has3) {
		q, r = q-1, tmax+1
	}
	for range q {
		sizes[k] = tmax
		k++
	}
	switch {
	case r > tmax: // 3 + 2 or 2 + 2
		sizes[k], sizes[k+1] = r-2, 2
		k += 2
	case r > 0:
		sizes[k] = r
		k++
	}
	t0 := 0
	for i, sz := range sizes[:k] {
		T := tmax
		switch {
		case sz <= 2 && has2:
			T = 2
		case sz <= 3 && has3:
			T = 3
		}
		tiles[i] = mmtTile{t0: t0, n: sz, T: T}
		t0 += sz
	}
	return k
}

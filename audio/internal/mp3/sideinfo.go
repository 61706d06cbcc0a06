package mp3

import "fmt"

// granule is one channel's side information for one granule.
type granule struct {
	part23     int // part2_3_length: scale factor and Huffman bits
	bigValues  int
	gain       int // global_gain
	sfCompress int
	blockType  int // 0 normal, 1 start, 2 short, 3 stop
	mixed      bool
	table      [3]int
	subGain    [3]int
	region1    int // first line of region 1
	region2    int // first line of region 2
	preflag    bool
	sfScale    int
	count1B    bool // count1 table B
}

// sideInfo is a frame's side information.
type sideInfo struct {
	mainDataBegin int
	scfsi         [2][4]bool
	gr            [2][2]granule // [granule][channel]
}

// readSideInfo parses the side information of h's frame from b, with the
// region boundaries resolved and every count checked.
func readSideInfo(h Header, b []byte) (sideInfo, error) {
	var si sideInfo
	br := bitReader{data: b}
	nch := h.Channels()
	ngr := 2
	if h.Version == 1 {
		si.mainDataBegin = br.read(9)
		if nch == 1 {
			br.read(5)
		} else {
			br.read(3)
		}
		for ch := range nch {
			for band := range 4 {
				si.scfsi[ch][band] = br.bit() == 1
			}
		}
	} else {
		ngr = 1
		si.mainDataBegin = br.read(8)
		br.read(uint(nch))
	}
	for gr := range ngr {
		for ch := range nch {
			g := &si.gr[gr][ch]
			g.part23 = br.read(12)
			g.bigValues = br.read(9)
			g.gain = br.read(8)
			if h.Version == 1 {
				g.sfCompress = br.read(4)
			} else {
				g.sfCompress = br.read(9)
			}
			if g.bigValues > 288 {
				return si, fmt.Errorf("big_values %d is more than 288", g.bigValues)
			}
			var r0, r1 int
			if br.bit() == 1 { // window switching
				g.blockType = br.read(2)
				g.mixed = br.bit() == 1
				if g.blockType == 0 {
					return si, fmt.Errorf("window switching with block type 0")
				}
				g.table[0], g.table[1] = br.read(5), br.read(5)
				for w := range 3 {
					g.subGain[w] = br.read(3)
				}
				// Regions are implicit: region 1 starts at line 36 of a
				// short block (the first three short bands at 8 kHz)
				// and at long band 8 otherwise; region 2 is empty.
				if g.blockType == 2 && !g.mixed {
					g.region1 = 3 * shortStart[h.rateIndex][3]
				} else {
					g.region1 = longStart[h.rateIndex][8]
				}
				g.region2 = 576
			} else {
				for i := range 3 {
					g.table[i] = br.read(5)
				}
				r0, r1 = br.read(4), br.read(3)
				g.region1 = longStart[h.rateIndex][r0+1]
				g.region2 = longStart[h.rateIndex][min(r0+r1+2, 22)]
			}
			for _, t := range g.table {
				if t == 4 || t == 14 {
					return si, fmt.Errorf("table_select %d names no Huffman table", t)
				}
			}
			if h.Version == 1 {
				g.preflag = br.bit() == 1
			}
			g.sfScale = br.bit()
			g.count1B = br.bit() == 1
			end := 2 * g.bigValues
			g.region1 = min(g.region1, end)
			g.region2 = min(max(g.region2, g.region1), end)
		}
	}
	return si, nil
}

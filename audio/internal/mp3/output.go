package mp3

// The granule's spectrum to samples: reordering of short blocks, alias
// reduction, IMDCT with overlap-add, frequency inversion and the polyphase
// synthesis filter bank.

// output turns d.xr[ch] (in coding order) into 576 samples in out.
func (d *Decoder) output(h Header, g *granule, ch int, out []float32) {
	xr := &d.xr[ch]
	nz := d.nz[ch]
	if g.blockType == 2 {
		d.reorder(h, g, ch)
		nz = 576 // short blocks spread across the subbands
	}
	// Alias reduction between the long-block subbands.
	sbLimit := 32
	if g.blockType == 2 {
		sbLimit = 0
		if g.mixed {
			sbLimit = 2
		}
	}
	sbLimit = min(sbLimit, (nz+17)/18+1, 32)
	for sb := 1; sb < sbLimit; sb++ {
		for i := range 8 {
			a, b := xr[18*sb-1-i], xr[18*sb+i]
			xr[18*sb-1-i] = a*aliasCS[i] - b*aliasCA[i]
			xr[18*sb+i] = b*aliasCS[i] + a*aliasCA[i]
		}
	}
	used := max(min((nz+17)/18+1, 32), sbLimit)
	ov := &d.overlap[ch]
	hyb := &d.hyb
	for sb := range 32 {
		o := hyb[18*sb : 18*sb+18]
		prev := ov[18*sb : 18*sb+18]
		bt := g.blockType
		if g.mixed && sb < 2 {
			bt = 0
		}
		if sb >= used {
			copy(o, prev)
			clear(prev)
		} else if bt == 2 {
			imdctShortBlock(xr[18*sb:18*sb+18], o, prev)
		} else {
			imdctLongBlock(xr[18*sb:18*sb+18], bt, o, prev)
		}
		if sb&1 == 1 {
			for t := 1; t < 18; t += 2 {
				o[t] = -o[t]
			}
		}
	}
	d.synthesize(ch, out)
}

// reorder puts the short bands of a block from coding order (each band
// window by window) into the IMDCT's order (the three windows' lines
// interleaved).
func (d *Decoder) reorder(h Header, g *granule, ch int) {
	xr := &d.xr[ch]
	var tmp [576]float64
	var buf [64]band
	bs := bands(h.rateIndex, g, buf[:])
	lo := 576
	for i := 0; i+2 < len(bs); i++ {
		b := bs[i]
		if b.long || b.win != 0 {
			continue
		}
		lo = min(lo, b.start)
		for w := range 3 {
			src := b.start + w*b.width
			for j := range b.width {
				tmp[b.start+3*j+w] = xr[src+j]
			}
		}
	}
	copy(xr[lo:], tmp[lo:])
}

// imdctLongBlock: the 36-point IMDCT of x, windowed for block type bt,
// overlapped with prev (the last block's second half, replaced by this
// block's).
func imdctLongBlock(x []float64, bt int, out, prev []float64) {
	var y [36]float64
	zero := true
	for _, v := range x[:18] {
		if v != 0 {
			zero = false
			break
		}
	}
	if !zero {
		win := &imdctWin[bt]
		for i := range 36 {
			c := &imdctLong[i]
			s := 0.0
			for k := range 18 {
				s += x[k] * c[k]
			}
			y[i] = s * win[i]
		}
	}
	for i := range 18 {
		out[i] = y[i] + prev[i]
		prev[i] = y[i+18]
	}
}

// imdctShortBlock: three 12-point IMDCTs of the interleaved windows of x,
// windowed and overlapped at 6, 12 and 18 of the 36 samples.
func imdctShortBlock(x []float64, out, prev []float64) {
	var y [36]float64
	for w := range 3 {
		for i := range 12 {
			c := &imdctShort[i]
			s := 0.0
			for k := range 6 {
				s += x[3*k+w] * c[k]
			}
			y[6+6*w+i] += s * imdctWin[2][i]
		}
	}
	for i := range 18 {
		out[i] = y[i] + prev[i]
		prev[i] = y[i+18]
	}
}

// synthesize runs the 18 time slots of d.hyb through the channel's
// polyphase filter bank: 32 samples each.
func (d *Decoder) synthesize(ch int, out []float32) {
	v := &d.v[ch]
	var s [32]float64
	for t := range 18 {
		for k := range 32 {
			s[k] = d.hyb[18*k+t]
		}
		off := (d.voff[ch] - 64) & 1023
		d.voff[ch] = off
		for i := range 64 {
			n := &synthN[i]
			sum := 0.0
			for k := range 32 {
				sum += n[k] * s[k]
			}
			v[off+i] = sum
		}
		o := out[32*t : 32*t+32]
		for j := range 32 {
			sum := 0.0
			for i := range 8 {
				sum += v[(off+128*i+j)&1023] * synthD[64*i+j]
				sum += v[(off+128*i+96+j)&1023] * synthD[64*i+32+j]
			}
			o[j] = float32(max(min(sum, 1), -1))
		}
	}
}

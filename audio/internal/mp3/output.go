package mp3

// The granule's spectrum to samples: reordering of short blocks, alias
// reduction, IMDCT with overlap-add, frequency inversion and the polyphase
// synthesis filter bank.

import "math"

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
		// y[i] = C(i + 9), C(m) = Σ_k x[k] cos(π(2m + 1)(2k + 1)/72), and
		// C(35 − m) = C(m + 36) = −C(m): 18 values give the 36.
		var c [18]float64
		for m := range 18 {
			t := &imdctHalf[m]
			s := 0.0
			for k := range 18 {
				s += x[k] * t[k]
			}
			c[m] = s
		}
		win := &imdctWin[bt]
		for i := range 9 {
			y[i] = c[i+9] * win[i]
			y[i+9] = -c[17-i] * win[i+9]
			y[i+18] = -c[8-i] * win[i+18]
			y[i+27] = -c[i] * win[i+27]
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
		// V[i] = Σ_k cos((16 + i)(2k + 1)π/64) S[k] from X, the DCT-II of
		// S: V[i] = X[16 + i] (i < 16), 0 (i = 16), −X[48 − i] (i ≤ 47),
		// −X[i − 48].
		var x [32]float64
		dct32(&s, &x)
		// V is kept twice (at off and off + 1024) so that the 16 taps
		// below read one run of memory.
		nv := (*[64]float64)(v[off : off+64])
		for i := range 16 {
			nv[i] = x[16+i]
		}
		nv[16] = 0
		for i := 17; i < 48; i++ {
			nv[i] = -x[48-i]
		}
		for i := 48; i < 64; i++ {
			nv[i] = -x[i-48]
		}
		copy(v[off+1024:off+1088], nv[:])
		o := out[32*t : 32*t+32]
		w := v[off : off+1024]
		for j := range 32 {
			sum := 0.0
			for i := range 8 {
				sum += w[128*i+j]*synthD[64*i+j] + w[128*i+96+j]*synthD[64*i+32+j]
			}
			o[j] = float32(max(min(sum, 1), -1))
		}
	}
}

// dct32 is the 32-point DCT-II, X[m] = Σ_k x[k] cos(π m (2k + 1)/64), by
// Lee's halving: with a[i] = x[i] + x[n−1−i] and b[i] = (x[i] − x[n−1−i]) /
// (2 cos(π(2i + 1)/2n)), X[2k] = A[k] and X[2k+1] = B[k] + B[k+1] (B[n/2] = 0),
// A and B the DCTs of half the size.
func dct32(x, out *[32]float64) {
	var a, b, ra, rb [16]float64
	c := &dctCos[16]
	for i := range 16 {
		u, w := x[i], x[31-i]
		a[i], b[i] = u+w, (u-w)*c[i]
	}
	dct16(&a, &ra)
	dct16(&b, &rb)
	for k := range 15 {
		out[2*k], out[2*k+1] = ra[k], rb[k]+rb[k+1]
	}
	out[30], out[31] = ra[15], rb[15]
}

func dct16(x, out *[16]float64) {
	var a, b, ra, rb [8]float64
	c := &dctCos[8]
	for i := range 8 {
		u, w := x[i], x[15-i]
		a[i], b[i] = u+w, (u-w)*c[i]
	}
	dct8(&a, &ra)
	dct8(&b, &rb)
	for k := range 7 {
		out[2*k], out[2*k+1] = ra[k], rb[k]+rb[k+1]
	}
	out[14], out[15] = ra[7], rb[7]
}

func dct8(x, out *[8]float64) {
	var a, b, ra, rb [4]float64
	c := &dctCos[4]
	for i := range 4 {
		u, w := x[i], x[7-i]
		a[i], b[i] = u+w, (u-w)*c[i]
	}
	dct4(&a, &ra)
	dct4(&b, &rb)
	for k := range 3 {
		out[2*k], out[2*k+1] = ra[k], rb[k]+rb[k+1]
	}
	out[6], out[7] = ra[3], rb[3]
}

func dct4(x, out *[4]float64) {
	c := &dctCos[2]
	a0, a1 := x[0]+x[3], x[1]+x[2]
	b0, b1 := (x[0]-x[3])*c[0], (x[1]-x[2])*c[1]
	// The 2-point DCTs: (p + q, (p − q)/(2 cos(π/4))).
	h := dctCos[1][0]
	ra0, ra1 := a0+a1, (a0-a1)*h
	rb0, rb1 := b0+b1, (b0-b1)*h
	out[0], out[1], out[2], out[3] = ra0, rb0+rb1, ra1, rb1
}

// dctCos[n][i] = 1 / (2 cos(π(2i + 1)/(4n))), the odd half's factors of a
// DCT of 2n points.
var dctCos = func() (m [17][16]float64) {
	for h := 1; h <= 16; h *= 2 {
		for i := range h {
			m[h][i] = 1 / (2 * math.Cos(math.Pi*float64(2*i+1)/float64(4*h)))
		}
	}
	return m
}()

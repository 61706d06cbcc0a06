package mp3

import (
	"errors"
	"fmt"
	"math"
)

// ErrCorrupt marks a frame whose side information or main data is invalid.
// Decode still writes the frame's samples, the damaged granules as
// silence (the filter bank's tails carry on), so that the stream keeps its
// length and timing.
var ErrCorrupt = errors.New("corrupt MP3 frame")

// maxReservoir is the farthest back main_data_begin can point (9 bits).
const maxReservoir = 511

// scalefactors of one channel in one granule.
type scalefactors struct {
	l    [22]int    // long bands; band 21 has none (0)
	s    [13][3]int // short bands × windows; band 12 has none
	lmax [22]int    // MPEG-2: the illegal intensity position of each band
	smax [13]int
}

// Decoder decodes the frames of one stream in order.
type Decoder struct {
	res     []byte // the last main data bytes seen (at most maxReservoir kept)
	sf      [2]scalefactors
	is      [2][576]int32 // Huffman-decoded values
	xr      [2][576]float64
	nz      [2]int // lines past the last possibly nonzero one
	hyb     [576]float64
	overlap [2][576]float64
	v       [2][2048]float64 // the synthesis filter bank's V, twice over
	voff    [2]int

	blocks [5]int // granule channels decoded per block type (4: mixed), for tests
}

// NewDecoder returns a decoder at the start of a stream.
func NewDecoder() *Decoder {
	return &Decoder{res: make([]byte, 0, 4096)}
}

// Decode decodes one frame: frame holds at least its h.FrameBytes bytes,
// header first. It writes h.Samples samples to pcm[0] (and pcm[1] when the
// frame is stereo), each of at least that length. An error wrapping
// ErrCorrupt comes with the frame's samples written (see ErrCorrupt); any
// other error means nothing was decoded and the decoder's state is
// unchanged.
func (d *Decoder) Decode(frame []byte, pcm [2][]float32) (Header, error) {
	h, err := ParseHeader(frame)
	if err != nil {
		return h, err
	}
	if len(frame) < h.FrameBytes {
		return h, fmt.Errorf("frame of %d bytes cut off at %d", h.FrameBytes, len(frame))
	}
	nch := h.Channels()
	for ch := range nch {
		if len(pcm[ch]) < h.Samples {
			return h, fmt.Errorf("output buffer of %d samples for a %d-sample frame", len(pcm[ch]), h.Samples)
		}
	}
	off := 4
	if h.CRC {
		off += 2
	}
	side := frame[off : off+h.SideInfoBytes()]
	main := frame[off+h.SideInfoBytes() : h.FrameBytes]
	si, ferr := readSideInfo(h, side)

	have := len(d.res)
	data := append(d.res, main...)
	start := have - si.mainDataBegin
	missing := ferr == nil && start < 0 // main data before the stream start: silence
	ngr := 1
	if h.Version == 1 {
		ngr = 2
	}
	if ferr == nil && !missing {
		bits := 0
		for gr := range ngr {
			for ch := range nch {
				bits += si.gr[gr][ch].part23
			}
		}
		if avail := 8 * (len(data) - start); bits > avail {
			ferr = fmt.Errorf("main data of %d bits, the frame and reservoir hold %d", bits, avail)
		}
	}
	// Each granule channel's data starts where the last one's
	// part2_3_length ends; one that fails is concealed alone.
	frameOK := ferr == nil && !missing
	br := bitReader{data: data}
	pos := 8 * max(start, 0)
	for gr := range ngr {
		ok := frameOK
		for ch := range nch {
			g := &si.gr[gr][ch]
			end := pos + g.part23
			if ok {
				br.pos = pos
				if err := d.readChannel(h, &si, gr, ch, &br, end); err != nil {
					if ferr == nil {
						ferr = err
					}
					ok = false
				}
			}
			pos = end
		}
		if !ok {
			for ch := range nch {
				clear(d.xr[ch][:])
				d.nz[ch] = 0
				si.gr[gr][ch] = granule{}
			}
		} else if h.Mode == JointStereo && h.ModeExt != 0 {
			d.stereo(h, &si.gr[gr])
		}
		for ch := range nch {
			g := &si.gr[gr][ch]
			if g.mixed {
				d.blocks[4]++
			} else {
				d.blocks[g.blockType]++
			}
			d.output(h, g, ch, pcm[ch][gr*576:gr*576+576])
		}
	}

	// Keep the reservoir's last bytes, and only bytes seen.
	if len(data) > maxReservoir {
		data = data[:copy(data, data[len(data)-maxReservoir:])]
	}
	d.res = data
	if ferr != nil {
		return h, fmt.Errorf("%w: %v", ErrCorrupt, ferr)
	}
	return h, nil
}

// readChannel reads one channel's scale factors and Huffman data of one
// granule (bits up to end) and requantizes them into d.xr[ch].
func (d *Decoder) readChannel(h Header, si *sideInfo, gr, ch int, br *bitReader, end int) error {
	g := &si.gr[gr][ch]
	if h.Version == 1 {
		d.scalefactorsMPEG1(si, gr, ch, br)
	} else {
		d.scalefactorsLSF(h, g, ch, br)
	}
	if br.pos > end {
		return fmt.Errorf("scale factors overrun part2_3_length")
	}
	is := &d.is[ch]
	bigEnd := 2 * g.bigValues
	i := 0
	for ; i < bigEnd; i += 2 {
		t := g.table[0]
		if i >= g.region2 {
			t = g.table[2]
		} else if i >= g.region1 {
			t = g.table[1]
		}
		ht := bigTables[t]
		if ht == nil {
			is[i], is[i+1] = 0, 0
			continue
		}
		v := ht.decode(br)
		x, y := int32(v>>4), int32(v&15)
		lb := linbits[t]
		if x == 15 && lb > 0 {
			x += int32(br.read(lb))
		}
		if x != 0 && br.bit() == 1 {
			x = -x
		}
		if y == 15 && lb > 0 {
			y += int32(br.read(lb))
		}
		if y != 0 && br.bit() == 1 {
			y = -y
		}
		is[i], is[i+1] = x, y
	}
	if br.pos > end {
		return fmt.Errorf("big-value Huffman data overruns part2_3_length")
	}
	qt := quadTables[0]
	if g.count1B {
		qt = quadTables[1]
	}
	for i+4 <= 576 && br.pos < end {
		v := qt.decode(br)
		var q [4]int32
		for k := range 4 {
			if v&(8>>k) != 0 {
				q[k] = 1
				if br.bit() == 1 {
					q[k] = -1
				}
			}
		}
		if br.pos > end {
			break // a last quadruple cut by part2_3_length is dropped
		}
		is[i], is[i+1], is[i+2], is[i+3] = q[0], q[1], q[2], q[3]
		i += 4
	}
	for k := i; k < 576; k++ {
		is[k] = 0
	}
	d.nz[ch] = i
	d.requantize(h, g, ch)
	return nil
}

func (d *Decoder) scalefactorsMPEG1(si *sideInfo, gr, ch int, br *bitReader) {
	g := &si.gr[gr][ch]
	sf := &d.sf[ch]
	n1, n2 := uint(slen1[g.sfCompress]), uint(slen2[g.sfCompress])
	if g.blockType == 2 {
		first := 0
		if g.mixed {
			for b := range 8 {
				sf.l[b] = br.read(n1)
			}
			first = 3
		}
		for b := first; b < 12; b++ {
			n := n1
			if b >= 6 {
				n = n2
			}
			for w := range 3 {
				sf.s[b][w] = br.read(n)
			}
		}
		sf.s[12] = [3]int{}
		return
	}
	groups := [5]int{0, 6, 11, 16, 21}
	for k := range 4 {
		if gr == 1 && si.scfsi[ch][k] {
			continue // the first granule's factors stay
		}
		n := n1
		if k >= 2 {
			n = n2
		}
		for b := groups[k]; b < groups[k+1]; b++ {
			sf.l[b] = br.read(n)
		}
	}
	sf.l[21] = 0
}

func (d *Decoder) scalefactorsLSF(h Header, g *granule, ch int, br *bitReader) {
	var slen [4]int
	var row int
	c := g.sfCompress
	if ch == 1 && h.Mode == JointStereo && h.ModeExt&1 != 0 {
		c >>= 1
		switch {
		case c < 180:
			slen, row = [4]int{c / 36, c % 36 / 6, c % 6, 0}, 3
		case c < 244:
			c -= 180
			slen, row = [4]int{c % 64 >> 4, c % 16 >> 2, c % 4, 0}, 4
		default:
			c -= 244
			slen, row = [4]int{c / 3, c % 3, 0, 0}, 5
		}
	} else {
		switch {
		case c < 400:
			slen, row = [4]int{c >> 4 / 5, c >> 4 % 5, c & 15 >> 2, c & 3}, 0
		case c < 500:
			c -= 400
			slen, row = [4]int{c >> 2 / 5, c >> 2 % 5, c & 3, 0}, 1
		default:
			c -= 500
			slen, row = [4]int{c / 3, c % 3, 0, 0}, 2
			g.preflag = true
		}
	}
	kind := 0
	if g.blockType == 2 {
		kind = 1
		if g.mixed {
			kind = 2
		}
	}
	var vals, maxes [39]int
	n := 0
	for p, cnt := range lsfBands[row][kind] {
		for range cnt {
			vals[n] = br.read(uint(slen[p]))
			maxes[n] = 1<<slen[p] - 1
			n++
		}
	}
	sf := &d.sf[ch]
	*sf = scalefactors{}
	k := 0
	switch kind {
	case 0:
		for b := range 21 {
			sf.l[b], sf.lmax[b] = vals[k], maxes[k]
			k++
		}
	default:
		first := 0
		if kind == 2 {
			for b := range 6 {
				sf.l[b], sf.lmax[b] = vals[k], maxes[k]
				k++
			}
			first = 3
		}
		for b := first; b < 12; b++ {
			for w := range 3 {
				sf.s[b][w] = vals[k]
				k++
			}
			sf.smax[b] = maxes[k-1]
		}
	}
}

// band is a run of coded lines sharing one scale factor.
type band struct {
	start, width int
	sfb, win     int
	long         bool
}

// bands lists the granule's scale factor bands in coding order: long bands
// over the whole block, short bands window by window, or (mixed) long bands
// over the first 36 lines and short bands after.
func bands(rate int, g *granule, dst []band) []band {
	dst = dst[:0]
	if g.blockType != 2 {
		for b := range 22 {
			dst = append(dst, band{longStart[rate][b], longWidths[rate][b], b, 0, true})
		}
		return dst
	}
	first := 0
	if g.mixed {
		for b := 0; b < 22 && longStart[rate][b] < 36; b++ {
			w := min(longStart[rate][b+1], 36) - longStart[rate][b]
			dst = append(dst, band{longStart[rate][b], w, b, 0, true})
		}
		first = 3
	}
	for b := first; b < 13; b++ {
		s, w := 3*shortStart[rate][b], shortWidths[rate][b]
		if g.mixed && b == first {
			s, w = 36, (3*shortStart[rate][b+1]-36)/3
		}
		for win := range 3 {
			dst = append(dst, band{s + win*w, w, b, win, false})
		}
	}
	return dst
}

func (d *Decoder) requantize(h Header, g *granule, ch int) {
	sf := &d.sf[ch]
	is, xr := &d.is[ch], &d.xr[ch]
	k := 2
	if g.sfScale == 1 {
		k = 4
	}
	base := 210 - g.gain + 64 // pow2q's offset: exponents from -45
	var buf [64]band
	nz := d.nz[ch]
	for _, b := range bands(h.rateIndex, g, buf[:]) {
		if b.start >= nz {
			clear(xr[b.start : b.start+b.width])
			continue
		}
		var e int
		if b.long {
			p := 0
			if g.preflag {
				p = pretab[b.sfb]
			}
			e = base + k*(sf.l[b.sfb]+p)
		} else {
			e = base + 8*g.subGain[b.win] + k*sf.s[b.sfb][b.win]
		}
		scale := pow2q[min(e, pow2qSize-1)]
		for i := b.start; i < b.start+b.width; i++ {
			v := is[i]
			switch {
			case v == 0:
				xr[i] = 0
			case v > 0:
				xr[i] = pow43[v] * scale
			default:
				xr[i] = -pow43[-v] * scale
			}
		}
	}
}

// stereo applies MS and intensity stereo to a granule's two channels, in
// coding order (both channels have the same block kind in a valid joint
// stereo frame).
func (d *Decoder) stereo(h Header, gs *[2]granule) {
	ms := h.ModeExt&2 != 0
	intensity := h.ModeExt&1 != 0
	l, r := &d.xr[0], &d.xr[1]
	if !intensity {
		n := max(d.nz[0], d.nz[1])
		for i := range n {
			a, b := l[i], r[i]
			l[i], r[i] = (a+b)*math.Sqrt2/2, (a-b)*math.Sqrt2/2
		}
		d.nz[0], d.nz[1] = n, n
		return
	}
	g1 := &gs[1]
	var buf [64]band
	bs := bands(h.rateIndex, g1, buf[:])
	// A band of the right channel is intensity coded from the first band
	// above its last nonzero line on (per window in short blocks; a
	// mixed block whose short part holds anything has no intensity in its
	// long part).
	nonzero := func(b band) bool {
		for i := b.start; i < b.start+b.width; i++ {
			if d.is[1][i] != 0 {
				return true
			}
		}
		return false
	}
	var isFrom [4]int // the first intensity band index per window (3: long)
	for i := range isFrom {
		isFrom[i] = len(bs)
	}
	shortNZ := false
	for i := len(bs) - 1; i >= 0; i-- {
		b := bs[i]
		w := b.win
		if b.long {
			w = 3
		}
		if isFrom[w] == len(bs) && nonzero(b) {
			isFrom[w] = i + 1
			if !b.long {
				shortNZ = true
			}
		}
	}
	// Where nothing is nonzero the whole part is intensity coded.
	for w := range 4 {
		if isFrom[w] == len(bs) {
			isFrom[w] = 0
		}
	}
	if shortNZ {
		isFrom[3] = len(bs) // mixed: the long part is not intensity coded
	}
	lsf := h.Version != 1
	scale := gs[1].sfCompress & 1
	sf := &d.sf[1]
	n := 0
	for i, b := range bs {
		w := b.win
		if b.long {
			w = 3
		}
		useIS := i >= isFrom[w]
		var pos, illegal int
		if b.long {
			s := min(b.sfb, 20)
			pos, illegal = sf.l[s], sf.lmax[s]
		} else {
			s := min(b.sfb, 11)
			pos, illegal = sf.s[s][b.win], sf.smax[s]
		}
		legal := pos < 7
		if lsf {
			legal = pos != illegal
		}
		if useIS && legal {
			var kl, kr float64
			if lsf {
				f := isLSF[scale][pos&31]
				kl, kr = f[0], f[1]
			} else {
				kl, kr = isRatio[pos][0], isRatio[pos][1]
			}
			for j := b.start; j < b.start+b.width; j++ {
				v := l[j]
				l[j], r[j] = v*kl, v*kr
			}
			n = max(n, b.start+b.width)
			continue
		}
		if ms {
			for j := b.start; j < b.start+b.width; j++ {
				a, c := l[j], r[j]
				l[j], r[j] = (a+c)*math.Sqrt2/2, (a-c)*math.Sqrt2/2
			}
			n = max(n, b.start+b.width)
		}
	}
	d.nz[0] = max(d.nz[0], n, d.nz[1])
	d.nz[1] = d.nz[0]
}

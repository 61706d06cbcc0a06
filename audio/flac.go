package audio

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/bits"
)

// decodeFLAC decodes a native FLAC stream (RFC 9639) with pp-offline's own
// decoder. It was github.com/mewkiz/flac, which keeps samples as int32 and
// so refuses 32-bit files (their stereo side channel has 33 bits); no other
// pure-Go FLAC decoder is maintained, and the format is small and fully
// specified, so the whole of it is here: every metadata block (STREAMINFO
// read, the others skipped), fixed and variable block sizes up to 65535,
// bit depths 4 to 32, CONSTANT, VERBATIM, FIXED and LPC subframes with
// wasted bits, both Rice residual codings with escaped partitions, the three
// stereo decorrelations (in int64, so the 33-bit side channel fits), the
// header CRC-8 and the frame CRC-16 of every frame, and STREAMINFO's MD5
// signature of the whole audio (when the encoder wrote one).
//
// Integer samples of b bits are divided by 2^(b−1), as sphn (symphonia) and
// ffmpeg's float conversion do, so FLAC decodes to exactly the float32
// values of the same WAV. The stream must be consistent: every frame's
// channel count, rate and depth those of STREAMINFO, frame (or sample)
// numbers consecutive, every sample within its bit depth, and no frame past
// the total STREAMINFO declares.
func decodeFLAC(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	d := &flacDecoder{b: newFLACBits(io.NewSectionReader(r, 0, size)), size: size, name: name}
	if err := d.readMetadata(); err != nil {
		return nil, err
	}
	si := d.info
	declared := int64(si.total)
	sink, err := newSink(name, "FLAC", si.channels, si.rate, declared, o)
	if err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		if d.b.atEOF() {
			break
		}
		if declared > 0 && int64(sink.frames) == declared && !d.syncNext() {
			break // a trailing tag after the last frame (ID3v1 and the like)
		}
		bs, err := d.frame(n)
		if err != nil {
			if errors.Is(err, errFLACEOF) {
				return nil, formatErr(name, "truncated FLAC stream (frame %d is cut off)", n)
			}
			return nil, formatErr(name, "corrupt FLAC frame %d: %v", n, err)
		}
		if declared > 0 && int64(sink.frames+bs) > declared {
			return nil, formatErr(name, "corrupt FLAC stream: frame %d goes past the %d samples its header declares", n, declared)
		}
		d.hashFrame(bs)
		dst, err := sink.next(bs)
		if err != nil {
			return nil, err
		}
		scale := 1 / float32(int64(1)<<(si.bps-1))
		for c, dc := range dst {
			if dc != nil {
				for i, v := range d.samples[c][:bs] {
					dc[i] = float32(v) * scale
				}
			}
		}
	}
	if declared != 0 && int64(sink.frames) < declared {
		return nil, formatErr(name, "truncated FLAC stream: header says %d samples, only %d decoded", declared, sink.frames)
	}
	if d.sum != nil && !bytes.Equal(d.sum.Sum(nil), d.md5[:]) {
		// Every frame's CRC matched, yet the audio is not what the
		// encoder signed: as `flac -d` (and `flac -t`) refuse it.
		return nil, formatErr(name, "corrupt FLAC stream: the decoded audio does not match the MD5 signature in STREAMINFO")
	}
	return sink.clip()
}

// hashFrame adds the current frame's bs samples to the MD5 signature: as
// the format signs them, interleaved, each little-endian in the fewest
// whole bytes that hold the bit depth.
func (d *flacDecoder) hashFrame(bs int) {
	if d.md5 == ([16]byte{}) {
		return // the encoder left the signature out
	}
	if d.sum == nil {
		d.sum = md5.New()
	}
	nb := int(d.info.bps+7) / 8
	nch := len(d.samples)
	need := bs * nch * nb
	if cap(d.sumBuf) < need {
		d.sumBuf = make([]byte, need)
	}
	buf := d.sumBuf[:need]
	for c := range nch {
		s := d.samples[c][:bs]
		for i, v := range s {
			p := buf[(i*nch+c)*nb:]
			for k := range nb {
				p[k] = byte(v >> (8 * k))
			}
		}
	}
	d.sum.Write(buf)
}

// flacStreamInfo is what decoding needs of STREAMINFO.
type flacStreamInfo struct {
	maxBlock       int
	rate, channels int
	bps            uint
	total          uint64 // samples per channel, 0: unknown
}

type flacDecoder struct {
	b    *flacBits
	size int64
	name string
	info flacStreamInfo

	md5    [16]byte  // STREAMINFO's signature of the audio (zero: none)
	sum    hash.Hash // MD5 of the samples decoded so far (nil: no signature)
	sumBuf []byte    // one frame's samples as the signature counts them

	samples  [][]int64 // per channel, decoded samples of the current frame
	variable bool      // blocking strategy of the first frame
	next     uint64    // the frame (fixed) or sample (variable) number expected
}

// readMetadata checks the "fLaC" marker and reads the metadata blocks:
// STREAMINFO first, the others skipped (each bounded by the file's size).
func (d *flacDecoder) readMetadata() error {
	bad := func(f string, a ...any) error {
		return formatErr(d.name, "bad FLAC header: %s", fmt.Sprintf(f, a...))
	}
	if m, err := d.b.read(32); err != nil || m != 0x664C6143 {
		return bad("no fLaC marker")
	}
	for i := 0; ; i++ {
		h, err := d.b.read(32)
		if err != nil {
			return bad("the file ends inside the metadata (block %d)", i)
		}
		last, typ, length := h>>31 == 1, int(h>>24&0x7F), int64(h&0xFFFFFF)
		if rest := d.size - d.b.offset(); length > rest {
			return bad("metadata block %d claims %d bytes, the file has %d left", i, length, rest)
		}
		switch {
		case i == 0 && typ != 0:
			return bad("the first metadata block is of type %d, not STREAMINFO", typ)
		case i > 0 && typ == 0:
			return bad("a second STREAMINFO block (block %d)", i)
		case typ == 127:
			return bad("metadata block %d has the forbidden type 127", i)
		case typ == 0:
			if length != 34 {
				return bad("STREAMINFO is %d bytes, not 34", length)
			}
			if err := d.readStreamInfo(); err != nil {
				return bad("%v", err)
			}
		default:
			if err := d.b.skip(length); err != nil {
				return bad("the file ends inside metadata block %d", i)
			}
		}
		if last {
			return nil
		}
	}
}

func (d *flacDecoder) readStreamInfo() error {
	b := d.b
	var f [8]uint64
	for i, k := range []uint{16, 16, 24, 24, 20, 3, 5, 36} {
		v, err := b.read(k)
		if err != nil {
			return errors.New("the file ends inside STREAMINFO")
		}
		f[i] = v
	}
	for i := range 2 { // MD5 of the audio
		v, err := b.read(64)
		if err != nil {
			return errors.New("the file ends inside STREAMINFO")
		}
		binary.BigEndian.PutUint64(d.md5[8*i:], v)
	}
	// The block sizes are not checked: only the frames' own count, and
	// encoders write odd values here (0, or below 16 for a short stream).
	si := flacStreamInfo{maxBlock: int(f[1]), rate: int(f[4]), channels: int(f[5]) + 1, bps: uint(f[6]) + 1, total: f[7]}
	if si.rate == 0 {
		return errors.New("sample rate 0")
	}
	if si.bps < 4 {
		return fmt.Errorf("%d bits per sample (4 to 32 are valid)", si.bps)
	}
	d.info = si
	return nil
}

// syncNext tells whether a frame sync code comes next (at a byte boundary).
func (d *flacDecoder) syncNext() bool {
	b := d.b
	if b.n < 16 {
		b.refill()
	}
	return b.n >= 16 && b.cache>>50 == 0x3FFE
}

var (
	flacRates = [16]int{0, 88200, 176400, 192000, 8000, 16000, 22050, 24000, 32000, 44100, 48000, 96000, -1, -2, -3, -4}
	flacDepth = [8]uint{0, 8, 12, 0, 16, 20, 24, 32}
)

// frameHeader reads frame n's header (its CRC-8 checked, its numbers
// against the stream's) and returns the block size, the channel
// assignment and the channel count.
func (d *flacDecoder) frameHeader(n int) (bs int, chCode byte, nch int, err error) {
	b, si := d.b, &d.info
	b.startCRC()
	var hdr [16]byte
	k := 0
	byteOf := func() (byte, error) {
		v, err := b.read(8)
		if k < len(hdr) {
			hdr[k] = byte(v)
			k++
		}
		return byte(v), err
	}
	var h [4]byte
	for i := range h {
		v, err := byteOf()
		if err != nil {
			return 0, 0, 0, err
		}
		h[i] = v
	}
	if h[0] != 0xFF || h[1]&0xFE != 0xF8 {
		return 0, 0, 0, errors.New("no frame sync code")
	}
	variable := h[1]&1 == 1
	if n == 0 {
		d.variable = variable
	} else if variable != d.variable {
		return 0, 0, 0, errors.New("the blocking strategy changes")
	}
	bsCode, rateCode := h[2]>>4, h[2]&15
	chCode, bpsCode := h[3]>>4, h[3]>>1&7
	if h[3]&1 != 0 {
		return 0, 0, 0, errors.New("reserved header bit set")
	}
	// The frame or sample number, UTF-8 coded (up to 36 bits in 7 bytes).
	c0, err := byteOf()
	if err != nil {
		return 0, 0, 0, err
	}
	var num uint64
	switch extra := bitsLeadingOnes8(c0); {
	case extra == 0:
		num = uint64(c0)
	case extra == 1 || extra > 7 || !variable && extra > 6:
		return 0, 0, 0, errors.New("bad coded frame number")
	default:
		num = uint64(c0) & (0x7F >> extra)
		for range extra - 1 {
			c, err := byteOf()
			if err != nil {
				return 0, 0, 0, err
			}
			if c&0xC0 != 0x80 {
				return 0, 0, 0, errors.New("bad coded frame number")
			}
			num = num<<6 | uint64(c&0x3F)
		}
	}
	bs, rate, err := flacBlockAndRate(bsCode, rateCode, byteOf)
	if err != nil {
		return 0, 0, 0, err
	}
	got := byte(crc8(hdr[:k]))
	want, err := b.read(8)
	if err != nil {
		return 0, 0, 0, err
	}
	if got != byte(want) {
		return 0, 0, 0, errors.New("header CRC mismatch")
	}
	if rate != 0 && rate != si.rate {
		return 0, 0, 0, fmt.Errorf("sample rate %d Hz, the stream's is %d Hz", rate, si.rate)
	}
	bps := si.bps
	if bpsCode == 3 {
		return 0, 0, 0, errors.New("reserved sample size code")
	}
	if bpsCode != 0 && flacDepth[bpsCode] != bps {
		return 0, 0, 0, fmt.Errorf("%d bits per sample, the stream has %d", flacDepth[bpsCode], bps)
	}
	nch = int(chCode) + 1
	if chCode >= 8 {
		if chCode > 10 {
			return 0, 0, 0, fmt.Errorf("reserved channel assignment %d", chCode)
		}
		nch = 2
	}
	if nch != si.channels {
		return 0, 0, 0, fmt.Errorf("%d channels, the stream has %d", nch, si.channels)
	}
	// Frame (or, with variable block sizes, sample) numbers run on from
	// the first frame's (a stream cut out of a longer one starts past 0).
	if n == 0 {
		d.next = num
	}
	if num != d.next {
		what := "frame number"
		if variable {
			what = "first sample number"
		}
		return 0, 0, 0, fmt.Errorf("%s %d, expected %d (a frame is missing or out of place)", what, num, d.next)
	}
	if variable {
		d.next += uint64(bs)
	} else {
		d.next++
	}
	return bs, chCode, nch, nil
}

// flacBlockAndRate decodes a frame header's block size and sample rate
// codes, reading the bytes that follow the coded number through byteOf (0:
// the rate of STREAMINFO).
func flacBlockAndRate(bsCode, rateCode byte, byteOf func() (byte, error)) (bs, rate int, err error) {
	switch {
	case bsCode == 0:
		return 0, 0, errors.New("reserved block size code")
	case bsCode == 1:
		bs = 192
	case bsCode <= 5:
		bs = 576 << (bsCode - 2)
	case bsCode == 6:
		v, err := byteOf()
		if err != nil {
			return 0, 0, err
		}
		bs = int(v) + 1
	case bsCode == 7:
		v1, err := byteOf()
		if err != nil {
			return 0, 0, err
		}
		v2, err := byteOf()
		if err != nil {
			return 0, 0, err
		}
		bs = int(v1)<<8 | int(v2) + 1
	default:
		bs = 256 << (bsCode - 8)
	}
	if bs > 65535 {
		return 0, 0, fmt.Errorf("block size %d (65535 at most)", bs)
	}
	rate = flacRates[rateCode]
	if rate < 0 {
		var v [2]byte
		m := 1
		if rateCode != 12 {
			m = 2
		}
		if rateCode == 15 {
			return 0, 0, errors.New("invalid sample rate code")
		}
		for i := range m {
			if v[i], err = byteOf(); err != nil {
				return 0, 0, err
			}
		}
		switch rateCode {
		case 12:
			rate = int(v[0]) * 1000
		case 13:
			rate = int(v[0])<<8 | int(v[1])
		case 14:
			rate = (int(v[0])<<8 | int(v[1])) * 10
		}
	}
	return bs, rate, nil
}

// frame decodes frame n into d.samples and returns its block size.
func (d *flacDecoder) frame(n int) (int, error) {
	bs, chCode, nch, err := d.frameHeader(n)
	if err != nil {
		return 0, err
	}
	b, si, bps := d.b, &d.info, d.info.bps
	if len(d.samples) != nch || cap(d.samples[0]) < bs {
		d.samples = make([][]int64, nch)
		for c := range d.samples {
			d.samples[c] = make([]int64, max(bs, min(si.maxBlock, 65535)))
		}
	}
	for c := range nch {
		sbps := bps
		if chCode == 8 && c == 1 || chCode == 9 && c == 0 || chCode == 10 && c == 1 {
			sbps++ // the side channel
		}
		if err := d.subframe(d.samples[c][:bs], sbps); err != nil {
			return 0, fmt.Errorf("channel %d: %w", c, err)
		}
	}
	b.align()
	got16 := b.frameCRC()
	want16, err := b.read(16)
	if err != nil {
		return 0, err
	}
	if got16 != uint16(want16) {
		return 0, errors.New("CRC-16 mismatch (the frame is damaged)")
	}
	s0, s1 := d.samples[0][:bs], []int64(nil)
	if nch == 2 {
		s1 = d.samples[1][:bs]
	}
	decorrelate(chCode, s0, s1)
	lo, hi := -int64(1)<<(bps-1), int64(1)<<(bps-1)-1
	for c := range nch {
		for _, v := range d.samples[c][:bs] {
			if v < lo || v > hi {
				return 0, fmt.Errorf("channel %d: a sample outside %d bits", c, bps)
			}
		}
	}
	return bs, nil
}

// decorrelate undoes a stereo frame's channel assignment in place.
func decorrelate(chCode byte, s0, s1 []int64) {
	switch chCode {
	case 8: // left, side
		for i, s := range s1 {
			s1[i] = s0[i] - s
		}
	case 9: // side, right
		for i, s := range s0 {
			s0[i] = s + s1[i]
		}
	case 10: // mid, side
		for i, s := range s1 {
			m := s0[i]<<1 | s&1
			s0[i], s1[i] = (m+s)>>1, (m-s)>>1
		}
	}
}

func bitsLeadingOnes8(c byte) int {
	n := 0
	for c&0x80 != 0 {
		n++
		c <<= 1
	}
	return n
}

// subframe decodes one channel's subframe of len(out) samples of sbps bits.
func (d *flacDecoder) subframe(out []int64, sbps uint) error {
	b := d.b
	h, err := b.read(8)
	if err != nil {
		return err
	}
	if h&0x80 != 0 {
		return errors.New("subframe padding bit set")
	}
	typ := h >> 1 & 0x3F
	var wasted uint
	if h&1 != 0 {
		w, err := b.unary(64)
		if err != nil {
			return err
		}
		wasted = uint(w) + 1
		if wasted >= sbps {
			return fmt.Errorf("%d wasted bits of %d", wasted, sbps)
		}
		sbps -= wasted
	}
	switch {
	case typ == 0: // CONSTANT
		v, err := b.readSigned(sbps)
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = v
		}
	case typ == 1: // VERBATIM
		for i := range out {
			v, err := b.readSigned(sbps)
			if err != nil {
				return err
			}
			out[i] = v
		}
	case typ >= 8 && typ <= 12: // FIXED, order 0..4
		order := int(typ - 8)
		if err := d.warmup(out, order, sbps); err != nil {
			return err
		}
		if err := d.residual(out, order); err != nil {
			return err
		}
		fixedPredict(out, order)
	case typ >= 32: // LPC, order 1..32
		order := int(typ-32) + 1
		if err := d.warmup(out, order, sbps); err != nil {
			return err
		}
		p, err := b.read(4)
		if err != nil {
			return err
		}
		if p == 15 {
			return errors.New("invalid LPC precision")
		}
		prec := uint(p) + 1
		shift, err := b.readSigned(5)
		if err != nil {
			return err
		}
		if shift < 0 {
			return errors.New("negative LPC shift")
		}
		var coef [32]int64
		for i := range order {
			if coef[i], err = b.readSigned(prec); err != nil {
				return err
			}
		}
		if err := d.residual(out, order); err != nil {
			return err
		}
		lpcPredict(out, coef[:order], uint(shift))
	default:
		return fmt.Errorf("reserved subframe type %d", typ)
	}
	if wasted > 0 {
		for i := range out {
			out[i] <<= wasted
		}
	}
	return nil
}

func (d *flacDecoder) warmup(out []int64, order int, sbps uint) error {
	if order > len(out) {
		return fmt.Errorf("predictor order %d over the block size %d", order, len(out))
	}
	for i := range order {
		v, err := d.b.readSigned(sbps)
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

// residual reads the coded residual of out[order:] into it.
func (d *flacDecoder) residual(out []int64, order int) error {
	b := d.b
	h, err := b.read(6)
	if err != nil {
		return err
	}
	method, porder := h>>4, uint(h&15)
	if method > 1 {
		return fmt.Errorf("reserved residual coding method %d", method)
	}
	pbits, escape := uint(4), uint64(15)
	if method == 1 {
		pbits, escape = 5, 31
	}
	bs := len(out)
	if bs&(1<<porder-1) != 0 || bs>>porder < order {
		return fmt.Errorf("partition order %d does not fit the block size %d (predictor order %d)", porder, bs, order)
	}
	psize := bs >> porder
	i := order
	for p := range 1 << porder {
		end := (p + 1) * psize
		k, err := b.read(pbits)
		if err != nil {
			return err
		}
		if k == escape {
			nb, err := b.read(5)
			if err != nil {
				return err
			}
			for ; i < end; i++ {
				if out[i], err = b.readSigned(uint(nb)); err != nil {
					return err
				}
			}
			continue
		}
		if err := b.rice(out[i:end], uint(k)); err != nil {
			return err
		}
		i = end
	}
	return nil
}

// rice reads len(out) Rice-coded residuals of parameter k. A residual must
// fit in 32 bits (RFC 9639 §9.2.7), which bounds the unary part.
func (b *flacBits) rice(out []int64, k uint) error {
	limit := uint64(1<<32) >> k
	for i := range out {
		// Fast path: the whole code is in the cache.
		if b.n < 57 {
			b.refill()
		}
		var q uint64
		if z := uint(bits.LeadingZeros64(b.cache)); z+1+k <= b.n {
			b.cache <<= z + 1
			b.n -= z + 1
			q = uint64(z)
		} else {
			var err error
			if q, err = b.unary(limit); err != nil {
				return err
			}
		}
		if q > limit {
			return errFLACRange
		}
		r, err := b.read(k)
		if err != nil {
			return err
		}
		u := q<<k | r
		out[i] = int64(u>>1) ^ -int64(u&1)
	}
	return nil
}

func fixedPredict(s []int64, order int) {
	switch order {
	case 1:
		for i := 1; i < len(s); i++ {
			s[i] += s[i-1]
		}
	case 2:
		for i := 2; i < len(s); i++ {
			s[i] += 2*s[i-1] - s[i-2]
		}
	case 3:
		for i := 3; i < len(s); i++ {
			s[i] += 3*s[i-1] - 3*s[i-2] + s[i-3]
		}
	case 4:
		for i := 4; i < len(s); i++ {
			s[i] += 4*s[i-1] - 6*s[i-2] + 4*s[i-3] - s[i-4]
		}
	}
}

// lpcPredict adds to each residual s[i] (i ≥ order) the prediction
// Σ coef[j]·s[i−1−j] >> shift.
func lpcPredict(s []int64, coef []int64, shift uint) {
	order := len(coef)
	for i := order; i < len(s); i++ {
		var sum int64
		h := s[i-order : i]
		for j, c := range coef {
			sum += c * h[order-1-j]
		}
		s[i] += sum >> shift
	}
}

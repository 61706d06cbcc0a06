package audio

import (
	"bufio"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// A small FLAC encoder (RFC 9639) for pp-offline's outputs: 16-bit
// samples, 1–8 independent channels, fixed blocks of flacBlockSize frames,
// each subframe VERBATIM or FIXED of order 2 with one Rice partition,
// whichever is smaller. It is lossless: decoding gives back exactly the
// int16 samples EncodePCM16 writes. STREAMINFO carries the real minimum and
// maximum frame sizes, the total and the MD5 of the samples (as flac
// computes it: signed little-endian, interleaved); every frame has its
// CRC-8 and CRC-16. No library: the well-kept Go FLAC packages decode only
// (mewkiz/flac's encoder writes VERBATIM frames without STREAMINFO's MD5),
// and what this needs is a few hundred lines.

// flacBlockSize is the frames per FLAC block (flac's default at -5..-8).
const flacBlockSize = 4096

// EncodeFLAC16 writes channels (each the same length) as a 16-bit FLAC
// stream at rate, every sample converted as EncodePCM16 converts it
// (int16(trunc(clamp(x, −1, 1)·32767)), NaN as 0).
func EncodeFLAC16(w io.Writer, channels [][]float32, rate int) error {
	nch := len(channels)
	if nch < 1 || nch > 8 {
		return fmt.Errorf("flac: %d channels (1 to 8)", nch)
	}
	n := len(channels[0])
	for _, c := range channels {
		if len(c) != n {
			return fmt.Errorf("flac: channels of different lengths (%d and %d)", n, len(c))
		}
	}
	if rate <= 0 || rate >= 1<<20 {
		return fmt.Errorf("flac: invalid sample rate %d", rate)
	}
	if int64(n) >= 1<<36 {
		return fmt.Errorf("flac: %d frames do not fit in STREAMINFO", n)
	}
	pcm := make([][]int32, nch)
	sum := md5.New()
	for c := range pcm {
		pcm[c] = make([]int32, n)
		for i, x := range channels[c] {
			pcm[c][i] = int32(pcm16(x))
		}
	}
	var le [2]byte
	buf := make([]byte, 0, 1<<16)
	for i := range n {
		for c := range pcm {
			binary.LittleEndian.PutUint16(le[:], uint16(int16(pcm[c][i])))
			buf = append(buf, le[:]...)
		}
		if len(buf) >= 1<<16-16 {
			sum.Write(buf)
			buf = buf[:0]
		}
	}
	sum.Write(buf)

	var frames [][]byte
	minFrame, maxFrame := 0, 0
	for start, num := 0, uint64(0); start < n; start, num = start+flacBlockSize, num+1 {
		end := min(start+flacBlockSize, n)
		f := flacFrame(pcm, start, end, num, rate)
		if minFrame == 0 || len(f) < minFrame {
			minFrame = len(f)
		}
		maxFrame = max(maxFrame, len(f))
		frames = append(frames, f)
	}
	if maxFrame >= 1<<24 {
		return fmt.Errorf("flac: a frame of %d bytes", maxFrame)
	}

	bw := bufio.NewWriterSize(w, 1<<16)
	var si flacEncBits
	si.put(0x664C6143, 32) // "fLaC"
	si.put(1, 1)           // last metadata block
	si.put(0, 7)           // STREAMINFO
	si.put(34, 24)
	// A fixed-block-size stream: every block but the last has
	// flacBlockSize frames, the last may have fewer (RFC 9639 8.2).
	si.put(flacBlockSize, 16)
	si.put(flacBlockSize, 16)
	si.put(uint64(minFrame), 24)
	si.put(uint64(maxFrame), 24)
	si.put(uint64(rate), 20)
	si.put(uint64(nch-1), 3)
	si.put(15, 5) // 16 bits per sample
	si.put(uint64(n), 36)
	if _, err := bw.Write(si.b); err != nil {
		return err
	}
	if _, err := bw.Write(sum.Sum(nil)); err != nil {
		return err
	}
	for _, f := range frames {
		if _, err := bw.Write(f); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// flacFrame codes frames start..end of every channel as frame num.
func flacFrame(pcm [][]int32, start, end int, num uint64, rate int) []byte {
	bs := end - start
	var w flacEncBits
	w.put(0xFFF8, 16) // sync, reserved, fixed block size
	bsCode, bsTail := uint64(7), 16
	if bs == flacBlockSize {
		bsCode, bsTail = 12, 0 // 256·2^(12−8)
	} else if bs <= 256 {
		bsCode, bsTail = 6, 8
	}
	rateCode, rateTail, rateVal := flacRateCode(rate)
	w.put(bsCode, 4)
	w.put(rateCode, 4)
	w.put(uint64(len(pcm)-1), 4) // independent channels
	w.put(4, 3)                  // 16 bits per sample
	w.put(0, 1)
	w.putCodedNumber(num)
	if bsTail > 0 {
		w.put(uint64(bs-1), uint(bsTail))
	}
	if rateTail > 0 {
		w.put(rateVal, uint(rateTail))
	}
	w.put(uint64(crc8(w.b)), 8)
	for _, ch := range pcm {
		flacSubframe(&w, ch[start:end])
	}
	w.align()
	crc := crc16Update(0, w.b)
	return binary.BigEndian.AppendUint16(w.b, crc)
}

// flacRateCode is a frame header's sample rate code and the bits (and
// value) that follow the header for it.
func flacRateCode(rate int) (code uint64, tail int, val uint64) {
	for c, r := range flacRates[1:12] { // the decoder's table of the codes 1–11
		if r == rate {
			return uint64(c + 1), 0, 0
		}
	}
	switch {
	case rate%1000 == 0 && rate/1000 < 256:
		return 12, 8, uint64(rate / 1000)
	case rate < 1<<16:
		return 13, 16, uint64(rate)
	case rate%10 == 0 && rate/10 < 1<<16:
		return 14, 16, uint64(rate / 10)
	}
	return 0, 0, 0 // from STREAMINFO
}

// flacSubframe appends one channel's samples as a FIXED order-2 subframe
// (one Rice partition) or, when that is no smaller, VERBATIM.
func flacSubframe(w *flacEncBits, s []int32) {
	const bps = 16
	n := len(s)
	if n > 2 {
		res := make([]uint64, n-2)
		for i := 2; i < n; i++ {
			e := int64(s[i]) - 2*int64(s[i-1]) + int64(s[i-2])
			res[i-2] = uint64(e<<1) ^ uint64(e>>63) // zigzag
		}
		k, cost := riceParam(res)
		if fixed := 8 + 2*bps + 2 + 4 + 4 + cost; fixed < 8+int64(n)*bps {
			w.put(0b0_001010_0, 8) // FIXED (001), order 2, no wasted bits
			w.putSigned(int64(s[0]), bps)
			w.putSigned(int64(s[1]), bps)
			w.put(0, 2) // Rice, 4-bit parameters
			w.put(0, 4) // partition order 0
			w.put(uint64(k), 4)
			for _, u := range res {
				w.putUnary(u >> k)
				w.put(u, k)
			}
			return
		}
	}
	w.put(0b00000010, 8) // VERBATIM
	for _, x := range s {
		w.putSigned(int64(x), bps)
	}
}

// riceParam is the Rice parameter (0..14) coding res in the fewest bits,
// and that count.
func riceParam(res []uint64) (uint, int64) {
	best, bestCost := uint(0), int64(-1)
	for k := uint(0); k <= 14; k++ {
		cost := int64(len(res)) * int64(k+1)
		for _, u := range res {
			cost += int64(u >> k)
		}
		if bestCost < 0 || cost < bestCost {
			best, bestCost = k, cost
		}
	}
	return best, bestCost
}

// flacEncBits is an MSB-first bit writer.
type flacEncBits struct {
	b   []byte
	acc uint64 // pending bits, fewer than 8 of them
	n   uint
}

func (w *flacEncBits) put(v uint64, k uint) {
	for k > 32 {
		k -= 32
		w.put(v>>k, 32)
	}
	if k == 0 {
		return
	}
	w.acc = w.acc<<k | v&(1<<k-1)
	w.n += k
	for w.n >= 8 {
		w.n -= 8
		w.b = append(w.b, byte(w.acc>>w.n))
	}
	w.acc &= 1<<w.n - 1
}

func (w *flacEncBits) putSigned(v int64, k uint) { w.put(uint64(v), k) }

// putUnary writes q zeros then a one.
func (w *flacEncBits) putUnary(q uint64) {
	for ; q >= 32; q -= 32 {
		w.put(0, 32)
	}
	w.put(1, uint(q)+1)
}

func (w *flacEncBits) align() {
	if w.n > 0 {
		w.put(0, 8-w.n)
	}
}

// putCodedNumber writes v in FLAC's extended UTF-8 coding (up to 36 bits).
func (w *flacEncBits) putCodedNumber(v uint64) {
	if v < 0x80 {
		w.put(v, 8)
		return
	}
	// nb continuation bytes of 6 bits each; the first byte holds 6−nb.
	nb := 1
	for 5*nb+6 < bits.Len64(v) {
		nb++
	}
	lead := uint64(0xFF) << (7 - nb) & 0xFF
	w.put(lead|v>>(6*nb), 8)
	for i := nb - 1; i >= 0; i-- {
		w.put(0x80|(v>>(6*i))&0x3F, 8)
	}
}

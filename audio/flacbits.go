package audio

import (
	"errors"
	"io"
	"math/bits"
)

// flacBits reads a FLAC stream MSB first through its own buffer and keeps
// the CRC-16 of the current frame (RFC 9639 §9.1.8: polynomial 0x8005,
// initial 0, over every byte of the frame before the CRC itself).
//
// The next bits are left-aligned in cache (n of them valid). Bytes move from
// buf into cache 8 at a time; the CRC is brought up to date lazily, over the
// bytes that have left the cache whole, when buf is refilled and at the end
// of a frame, so the hot loops touch only cache and n.
type flacBits struct {
	r        io.Reader
	buf      []byte
	pos, end int // buf[pos:end] not yet in cache
	cache    uint64
	n        uint
	crcPos   int // buf[crcPos:] is not yet in crc
	crc      uint16
	err      error // the reader's error once buf is drained (io.EOF at the end)
	consumed int64 // bytes dropped from the front of buf (for offsets)
}

var errFLACEOF = errors.New("unexpected end of FLAC data")

func newFLACBits(r io.Reader) *flacBits {
	return &flacBits{r: r, buf: make([]byte, 64<<10)}
}

// fill reads more of the stream into buf. The bytes still in the cache
// are kept in front of buf (not for reading: for the CRC, which has not
// covered them yet).
func (b *flacBits) fill() bool {
	if b.err != nil {
		return false
	}
	done := b.pos - int((b.n+7)/8) // bytes wholly read out of the cache
	b.crc = crc16Update(b.crc, b.buf[b.crcPos:done])
	k := copy(b.buf, b.buf[done:b.end])
	b.consumed += int64(done)
	b.crcPos, b.pos, b.end = 0, k-(b.end-b.pos), k
	for b.end < len(b.buf) && b.err == nil {
		m, err := b.r.Read(b.buf[b.end:])
		b.end += m
		if err != nil {
			b.err = err
		}
		if m > 0 {
			break
		}
	}
	return b.pos < b.end
}

// refill tops the cache up to at least 57 bits where the stream has them.
func (b *flacBits) refill() {
	for b.n <= 56 {
		if b.pos == b.end && !b.fill() {
			return
		}
		b.cache |= uint64(b.buf[b.pos]) << (56 - b.n)
		b.pos++
		b.n += 8
	}
}

// read returns the next k ≤ 57 bits as an unsigned number.
func (b *flacBits) read(k uint) (uint64, error) {
	if b.n < k {
		b.refill()
		if b.n < k {
			return 0, errFLACEOF
		}
	}
	if k == 0 {
		return 0, nil
	}
	v := b.cache >> (64 - k)
	b.cache <<= k
	b.n -= k
	return v, nil
}

// readSigned returns the next k ≤ 57 bits as a two's complement number.
func (b *flacBits) readSigned(k uint) (int64, error) {
	v, err := b.read(k)
	if err != nil || k == 0 {
		return 0, err
	}
	return int64(v<<(64-k)) >> (64 - k), nil
}

// unary counts zero bits up to the next one bit (consumed), failing past
// limit zeros.
func (b *flacBits) unary(limit uint64) (uint64, error) {
	var q uint64
	for {
		if b.n == 0 {
			b.refill()
			if b.n == 0 {
				return 0, errFLACEOF
			}
		}
		if z := uint(bits.LeadingZeros64(b.cache)); z < b.n {
			b.cache <<= z + 1
			b.n -= z + 1
			q += uint64(z)
			if q > limit {
				return 0, errFLACRange
			}
			return q, nil
		}
		q += uint64(b.n)
		b.cache, b.n = 0, 0
		if q > limit {
			return 0, errFLACRange
		}
	}
}

var errFLACRange = errors.New("a residual value out of range")

// align skips to the next byte boundary.
func (b *flacBits) align() {
	k := b.n % 8
	b.cache <<= k
	b.n -= k
}

// offset is the byte position in the stream of the next whole byte (after
// align).
func (b *flacBits) offset() int64 {
	return b.consumed + int64(b.pos) - int64(b.n/8)
}

// startCRC starts a frame's CRC-16 at the current (byte-aligned) position.
func (b *flacBits) startCRC() {
	b.crc = 0
	b.crcPos = b.pos - int(b.n/8)
}

// frameCRC is the CRC-16 of the bytes from startCRC to the current
// (byte-aligned) position.
func (b *flacBits) frameCRC() uint16 {
	b.crc = crc16Update(b.crc, b.buf[b.crcPos:b.pos-int(b.n/8)])
	b.crcPos = b.pos - int(b.n/8)
	return b.crc
}

// atEOF tells, at a byte boundary, whether the stream has no more bytes.
func (b *flacBits) atEOF() bool {
	if b.n > 0 {
		return false
	}
	return b.pos == b.end && !b.fill()
}

// skip drops k bytes at a byte boundary.
func (b *flacBits) skip(k int64) error {
	for k > 0 && b.n > 0 {
		b.cache <<= 8
		b.n -= 8
		k--
	}
	for k > 0 {
		if b.pos == b.end && !b.fill() {
			return errFLACEOF
		}
		m := min(k, int64(b.end-b.pos))
		b.pos += int(m)
		k -= m
	}
	return nil
}

var crc8Table, crc16Table = func() (t8 [256]uint8, t16 [256]uint16) {
	for i := range 256 {
		c8, c16 := uint8(i), uint16(i)<<8
		for range 8 {
			if c8&0x80 != 0 {
				c8 = c8<<1 ^ 0x07
			} else {
				c8 <<= 1
			}
			if c16&0x8000 != 0 {
				c16 = c16<<1 ^ 0x8005
			} else {
				c16 <<= 1
			}
		}
		t8[i], t16[i] = c8, c16
	}
	return
}()

// crc8 is the frame header's CRC-8 (polynomial 0x07, initial 0).
func crc8(p []byte) uint8 {
	var c uint8
	for _, x := range p {
		c = crc8Table[c^x]
	}
	return c
}

func crc16Update(c uint16, p []byte) uint16 {
	for _, x := range p {
		c = c<<8 ^ crc16Table[byte(c>>8)^x]
	}
	return c
}

package mp3

// Huffman decoding: each table's codewords (tabledata.go) become a lookup
// on the next 8 bits, with second-level lookups for longer codewords.

import "encoding/binary"

// bitReader reads big-endian bits from data; past the end it reads zeros
// (callers compare pos with their bounds).
type bitReader struct {
	data []byte
	pos  int // in bits
}

// peek returns the next n (≤ 32) bits without consuming them.
func (b *bitReader) peek(n uint) uint32 {
	i := b.pos >> 3
	var v uint64
	if i+8 <= len(b.data) {
		v = binary.BigEndian.Uint64(b.data[i:])
	} else {
		for k := range 8 {
			v <<= 8
			if i+k < len(b.data) {
				v |= uint64(b.data[i+k])
			}
		}
	}
	v <<= uint(b.pos & 7)
	return uint32(v >> (64 - n))
}

func (b *bitReader) read(n uint) int {
	if n == 0 {
		return 0
	}
	v := b.peek(n)
	b.pos += int(n)
	return int(v)
}

func (b *bitReader) bit() int { return b.read(1) }

const (
	lookBits = 8
	subFlag  = 1 << 31
)

// huffTable is a two-level lookup. An entry is either a codeword
// (length << 16 | value) or, with subFlag, a second-level table
// (bits << 16 | offset into the same slice).
type huffTable []uint32

type code struct {
	len   int
	bits  uint32
	value uint32
}

func newHuffTable(codes []code) huffTable {
	t := make(huffTable, 1<<lookBits)
	// Second-level tables: one per 8-bit prefix of longer codewords, as
	// wide as the longest codeword under it needs.
	extra := map[uint32]int{}
	for _, c := range codes {
		if c.len > lookBits {
			p := c.bits >> (c.len - lookBits)
			extra[p] = max(extra[p], c.len-lookBits)
		}
	}
	for p := uint32(0); p < 1<<lookBits; p++ {
		if n, ok := extra[p]; ok {
			t[p] = subFlag | uint32(n)<<16 | uint32(len(t))
			t = append(t, make([]uint32, 1<<n)...)
		}
	}
	for _, c := range codes {
		if c.len <= lookBits {
			shift := lookBits - c.len
			base := c.bits << shift
			for k := uint32(0); k < 1<<shift; k++ {
				t[base+k] = uint32(c.len)<<16 | c.value
			}
			continue
		}
		rest := c.len - lookBits
		e := t[c.bits>>rest]
		n := int(e>>16) & 0xFF
		off := e & 0xFFFF
		shift := n - rest
		base := (c.bits & (1<<rest - 1)) << shift
		for k := uint32(0); k < 1<<shift; k++ {
			t[off+base+k] = uint32(rest)<<16 | c.value
		}
	}
	return t
}

// decode reads one codeword and returns its value.
func (t huffTable) decode(b *bitReader) uint32 {
	e := t[b.peek(lookBits)]
	if e&subFlag != 0 {
		b.pos += lookBits
		e = t[e&0xFFFF+b.peek(uint(e>>16)&0xFF)]
	}
	b.pos += int(e>>16) & 0xFF
	return e & 0xFFFF
}

var (
	// bigTables[t] decodes big-value table t to x<<4 | y (nil: no codes).
	bigTables [32]huffTable
	// linbits[t] is table t's count of extra bits for values of 15.
	linbits = [32]uint{16: 1, 2, 3, 4, 6, 8, 10, 13, 4, 5, 6, 7, 8, 9, 11, 13}
	// quadTables: count1 tables A and B, to v<<3 | w<<2 | x<<1 | y.
	quadTables [2]huffTable
)

func init() {
	for t, ct := range bigValueCodes {
		if len(ct.hlen) == 0 {
			continue
		}
		n := 2
		for n*n < len(ct.hlen) {
			n++
		}
		codes := make([]code, len(ct.hlen))
		for i, l := range ct.hlen {
			codes[i] = code{len: int(l), bits: uint32(ct.hcod[i]), value: uint32(i/n)<<4 | uint32(i%n)}
		}
		bigTables[t] = newHuffTable(codes)
	}
	for t := 17; t < 24; t++ {
		bigTables[t] = bigTables[16]
	}
	for t := 25; t < 32; t++ {
		bigTables[t] = bigTables[24]
	}
	var a, b []code
	for v, l := range quadCodesA.hlen {
		a = append(a, code{len: int(l), bits: uint32(quadCodesA.hcod[v]), value: uint32(v)})
		b = append(b, code{len: 4, bits: uint32(15 - v), value: uint32(v)})
	}
	quadTables = [2]huffTable{newHuffTable(a), newHuffTable(b)}
}

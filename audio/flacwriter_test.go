package audio

import (
	"math/bits"
	"testing"
)

// A FLAC writer for tests: it builds the streams flac 1.4 cannot (variable
// block sizes, every subframe type and residual coding by choice, escaped
// partitions, wasted bits, huge sample numbers) and the silent streams of
// the limits tests. flac_test.go checks its files decode as flac -d decodes
// them, so the writer is not only checked against the decoder it tests.

type flacBitWriter struct {
	b   []byte
	acc uint64
	n   uint
}

func (w *flacBitWriter) put(v uint64, k uint) {
	for k > 32 { // acc holds < 8 pending bits; 32 more fit
		k -= 32
		w.put(v>>k, 32)
	}
	if k == 0 {
		return
	}
	w.acc = w.acc<<k | v&(1<<k-1)
	w.n += k
	for w.n >= 8 {
		w.b = append(w.b, byte(w.acc>>(w.n-8)))
		w.n -= 8
	}
}

func (w *flacBitWriter) putSigned(v int64, k uint) { w.put(uint64(v), k) }

func (w *flacBitWriter) align() {
	if w.n > 0 {
		w.put(0, 8-w.n)
	}
}

// tSub says how to code one subframe.
type tSub struct {
	kind    string // "constant", "verbatim", "fixed", "lpc"
	order   int    // predictor order (fixed: 0..4, lpc: 1..32)
	wasted  uint   // wasted bits (the samples must be multiples of 2^wasted)
	method  int    // residual coding method 0 or 1
	porder  uint   // partition order
	escape  bool   // escape (raw-code) every other partition
	coef    []int64
	prec    uint // LPC coefficient precision
	shift   int64
	riceMax uint // cap on the Rice parameter (0: the method's)
}

// tFrame is one frame: its samples per channel (in the channels' own
// order: left/right, not side), its channel assignment (0: independent,
// 8: left/side, 9: side/right, 10: mid/side) and how each subframe is coded.
type tFrame struct {
	samples [][]int64
	assign  int
	subs    []tSub
}

type tStream struct {
	rate, channels int
	bps            uint
	total          uint64 // STREAMINFO's, 0: unknown
	variable       bool
	first          uint64   // the first frame's number (fixed) or sample number (variable)
	extra          [][]byte // metadata blocks after STREAMINFO: type byte, then the body
	frames         []tFrame
	frameAt        []int // set by bytes: where each frame starts
}

// bytes encodes the stream.
func (s *tStream) bytes() []byte {
	w := &flacBitWriter{}
	w.b = append(w.b, "fLaC"...)
	maxBS := 16
	for _, f := range s.frames {
		maxBS = max(maxBS, len(f.samples[0]))
	}
	last := uint64(0)
	if len(s.extra) == 0 {
		last = 1
	}
	w.put(last, 1)
	w.put(0, 7)
	w.put(34, 24)
	w.put(16, 16)
	w.put(uint64(maxBS), 16)
	w.put(0, 24)
	w.put(0, 24)
	w.put(uint64(s.rate), 20)
	w.put(uint64(s.channels-1), 3)
	w.put(uint64(s.bps-1), 5)
	w.put(s.total, 36)
	w.b = append(w.b, make([]byte, 16)...) // no MD5
	for i, e := range s.extra {
		l := uint64(0)
		if i == len(s.extra)-1 {
			l = 1
		}
		w.put(l, 1)
		w.put(uint64(e[0]), 7)
		w.put(uint64(len(e)-1), 24)
		w.b = append(w.b, e[1:]...)
	}
	num := s.first
	s.frameAt = s.frameAt[:0]
	for _, f := range s.frames {
		s.frameAt = append(s.frameAt, len(w.b))
		w.b = s.frame(w.b, num, f)
		if s.variable {
			num += uint64(len(f.samples[0]))
		} else {
			num++
		}
	}
	return w.b
}

func (s *tStream) frame(out []byte, num uint64, f tFrame) []byte {
	start := len(out)
	w := &flacBitWriter{b: out}
	bs := len(f.samples[0])
	w.put(0x3FFE, 14)
	w.put(0, 1)
	if s.variable {
		w.put(1, 1)
	} else {
		w.put(0, 1)
	}
	bsCode, bsExtra, bsBits := uint64(0), uint64(0), uint(0)
	switch {
	case bs == 192:
		bsCode = 1
	case bs >= 576 && bs <= 4608 && bs%576 == 0 && bits.OnesCount(uint(bs/576)) == 1:
		bsCode = 2 + uint64(bits.TrailingZeros(uint(bs/576)))
	case bs >= 256 && bs <= 32768 && bits.OnesCount(uint(bs)) == 1:
		bsCode = 8 + uint64(bits.TrailingZeros(uint(bs))-8)
	case bs <= 256:
		bsCode, bsExtra, bsBits = 6, uint64(bs-1), 8
	default:
		bsCode, bsExtra, bsBits = 7, uint64(bs-1), 16
	}
	rateCode, rateExtra, rateBits := uint64(0), uint64(0), uint(0)
	for i, r := range flacRates {
		if r == s.rate && r > 0 {
			rateCode = uint64(i)
		}
	}
	if rateCode == 0 {
		switch {
		case s.rate%1000 == 0 && s.rate <= 255000:
			rateCode, rateExtra, rateBits = 12, uint64(s.rate/1000), 8
		case s.rate <= 65535:
			rateCode, rateExtra, rateBits = 13, uint64(s.rate), 16
		case s.rate%10 == 0 && s.rate <= 655350:
			rateCode, rateExtra, rateBits = 14, uint64(s.rate/10), 16
		}
	}
	w.put(bsCode, 4)
	w.put(rateCode, 4)
	if f.assign != 0 {
		w.put(uint64(f.assign), 4)
	} else {
		w.put(uint64(s.channels-1), 4)
	}
	bpsCode := uint64(0)
	for i, d := range flacDepth {
		if d == s.bps && d > 0 {
			bpsCode = uint64(i)
		}
	}
	w.put(bpsCode, 3)
	w.put(0, 1)
	// UTF-8-like coded number.
	if num < 0x80 {
		w.put(num, 8)
	} else {
		n := 2
		for num >= 1<<(5*n+1) {
			n++
		}
		w.put(uint64(0xFF00>>n)&0xFF|num>>(6*(n-1)), 8)
		for i := n - 2; i >= 0; i-- {
			w.put(0x80|num>>(6*i)&0x3F, 8)
		}
	}
	w.put(bsExtra, bsBits)
	w.put(rateExtra, rateBits)
	w.put(uint64(crc8(w.b[start:])), 8)
	ch := f.samples
	if f.assign != 0 {
		l, r := ch[0], ch[1]
		side := make([]int64, bs)
		mid := make([]int64, bs)
		for i := range l {
			side[i] = l[i] - r[i]
			mid[i] = (l[i] + r[i]) >> 1
		}
		switch f.assign {
		case 8:
			ch = [][]int64{l, side}
		case 9:
			ch = [][]int64{side, r}
		case 10:
			ch = [][]int64{mid, side}
		}
	}
	for c, x := range ch {
		sbps := s.bps
		if f.assign == 8 && c == 1 || f.assign == 9 && c == 0 || f.assign == 10 && c == 1 {
			sbps++
		}
		writeSub(w, x, sbps, f.subs[c])
	}
	w.align()
	crc := crc16Update(0, w.b[start:])
	w.put(uint64(crc), 16)
	return w.b
}

func writeSub(w *flacBitWriter, x []int64, sbps uint, sub tSub) {
	typ := uint64(0)
	switch sub.kind {
	case "verbatim":
		typ = 1
	case "fixed":
		typ = 8 + uint64(sub.order)
	case "lpc":
		typ = 32 + uint64(sub.order-1)
	}
	w.put(0, 1)
	w.put(typ, 6)
	if sub.wasted > 0 {
		w.put(1, 1)
		w.put(0, sub.wasted-1)
		w.put(1, 1)
		y := make([]int64, len(x))
		for i, v := range x {
			y[i] = v >> sub.wasted
		}
		x, sbps = y, sbps-sub.wasted
	} else {
		w.put(0, 1)
	}
	switch sub.kind {
	case "constant":
		w.putSigned(x[0], sbps)
		return
	case "verbatim":
		for _, v := range x {
			w.putSigned(v, sbps)
		}
		return
	}
	for _, v := range x[:sub.order] {
		w.putSigned(v, sbps)
	}
	res := make([]int64, len(x))
	if sub.kind == "fixed" {
		for i := sub.order; i < len(x); i++ {
			p := int64(0)
			switch sub.order {
			case 1:
				p = x[i-1]
			case 2:
				p = 2*x[i-1] - x[i-2]
			case 3:
				p = 3*x[i-1] - 3*x[i-2] + x[i-3]
			case 4:
				p = 4*x[i-1] - 6*x[i-2] + 4*x[i-3] - x[i-4]
			}
			res[i] = x[i] - p
		}
	} else {
		w.put(uint64(sub.prec-1), 4)
		w.putSigned(sub.shift, 5)
		for _, c := range sub.coef {
			w.putSigned(c, sub.prec)
		}
		for i := sub.order; i < len(x); i++ {
			var sum int64
			for j, c := range sub.coef {
				sum += c * x[i-1-j]
			}
			res[i] = x[i] - sum>>sub.shift
		}
	}
	w.put(uint64(sub.method), 2)
	w.put(uint64(sub.porder), 4)
	pbits, escape := uint(4), uint64(15)
	if sub.method == 1 {
		pbits, escape = 5, 31
	}
	psize := len(x) >> sub.porder
	for p := 0; p < 1<<sub.porder; p++ {
		lo := p * psize
		if p == 0 {
			lo = sub.order
		}
		part := res[lo : (p+1)*psize]
		if sub.escape && p%2 == 1 {
			nb := uint(0) // the fewest bits holding every value (0: all zero)
			for _, v := range part {
				for v != 0 && (v < -int64(1)<<max(nb, 1)>>1 || v >= int64(1)<<max(nb, 1)>>1 || nb == 0) {
					nb++
				}
			}
			w.put(escape, pbits)
			w.put(uint64(nb), 5)
			for _, v := range part {
				w.putSigned(v, nb)
			}
			continue
		}
		// Rice parameter from the mean magnitude.
		var sum uint64
		for _, v := range part {
			sum += zigzag(v)
		}
		k := uint(0)
		if len(part) > 0 {
			for k < 30 && uint64(len(part))<<(k+1) <= sum {
				k++
			}
		}
		kmax := uint(escape - 1)
		if sub.riceMax > 0 {
			kmax = min(kmax, sub.riceMax)
		}
		k = min(k, kmax)
		w.put(uint64(k), pbits)
		for _, v := range part {
			u := zigzag(v)
			for q := u >> k; q > 0; q -= min(q, 32) {
				w.put(0, uint(min(q, 32)))
			}
			w.put(1, 1)
			w.put(u, k)
		}
	}
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// silentFLAC encodes frames×65535 samples of silence at rate Hz (constant
// subframes, a few bytes each); declared is what STREAMINFO says (0:
// unknown).
func silentFLAC(t testing.TB, rate, channels, frames int, declared uint64) []byte {
	t.Helper()
	s := &tStream{rate: rate, channels: channels, bps: 16, total: declared}
	zeros := make([]int64, 65535)
	f := tFrame{}
	for range channels {
		f.samples = append(f.samples, zeros)
		f.subs = append(f.subs, tSub{kind: "constant"})
	}
	for range frames {
		s.frames = append(s.frames, f)
	}
	return s.bytes()
}

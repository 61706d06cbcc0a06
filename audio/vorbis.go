package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/jfreymuth/vorbis"
)

// Ogg Vorbis.
//
// The Vorbis packets are decoded by github.com/jfreymuth/vorbis (pure Go,
// the decoder under github.com/jfreymuth/oggvorbis, which Ebitengine uses;
// small and stable). Everything around it is ours, because that library
// trusts its input: it allocates whatever the headers count (a comment
// header claiming 2^32 comments asked for 64 GiB; a codebook of 2^24 entries
// and 65535 dimensions for petabytes: a fatal out-of-memory that no recover
// catches), loops forever on a codebook of zero dimensions, and its Ogg
// layer (oggvorbis) recursed once per empty packet and read a non-seekable
// stream to the end before knowing its length. So:
//
//   - the Ogg pages are read here (oggDemux): CRC-checked, one logical
//     stream (the first; pages of other streams multiplexed with it are
//     skipped), packets held to maxOggPacket bytes. A chained file (RFC
//     3533: streams one after another, as `cat a.ogg b.ogg` makes, with the
//     same serial number or another) is refused in one line: a stream that
//     begins after another stream's data pages is a new link, looked for
//     up to the end of the file, so no link is dropped silently. Decoding
//     the links one after the other is not done: each has its own headers
//     and granule positions, and ffmpeg's joins are not sample-exact to
//     follow;
//   - the three Vorbis headers are parsed and validated here first
//     (checkVorbisHeaders), every count bounded by the bits the header
//     packet really has, every index checked against what it indexes, and
//     what the library will allocate for them summed and bounded, before the
//     library sees them;
//   - the stream's length is read from the granule position of its last
//     page (a seek to the end of the file, no decoding), checked against the
//     caller's limit up front, and decoding stops with an error if the stream
//     runs past it, so a file cannot make the decoder work longer than its
//     declared length (a 1-hour file of silence over the limit is refused at
//     once);
//   - the output starts and ends where the granule positions say (the
//     leading samples of the first audio page dropped when its granule says
//     so, the last page's granule ends the stream), as the Vorbis spec,
//     libvorbis and symphonia do;
//   - any panic of the library is recovered in the same goroutine (guard)
//     and becomes one line.
//
// Samples are the library's floats as they are (not clipped to ±1, as
// libvorbis's float API and symphonia leave them). Channels come in WAV
// order (vorbisOrder), as ffmpeg and oggdec give them.

// maxOggPacket bounds one Ogg packet (pages joined): Vorbis audio packets
// are a few KB (at most ~255 channels × 4096 coefficients of a few bits);
// setup headers are under 64 KB in every encoder we know.
const maxOggPacket = 8 << 20

// maxVorbisSetupAlloc bounds what the library allocates for a setup header
// (Huffman tables and vector-quantisation values, bytes): libvorbis's
// largest setup headers need under 1 MiB.
const maxVorbisSetupAlloc = 32 << 20

// maxVorbisEntries bounds one codebook's entries: the library builds its
// Huffman tree in time that grows faster than linearly with them; libvorbis
// books have at most a few thousand.
const maxVorbisEntries = 1 << 16

func decodeVorbis(r io.ReaderAt, size int64, name string, o decodeOpts) (clip *Clip, err error) {
	defer guard(name, "Ogg Vorbis", &err)
	dm := &oggDemux{r: r, size: size, name: name}
	var hdr [3][]byte
	for i := range hdr {
		p, _, err := dm.packet()
		if err == io.EOF || dm.truncated {
			return nil, formatErr(name, "bad Ogg Vorbis header: the file ends in header %d of 3", i+1)
		}
		if err != nil {
			return nil, err
		}
		hdr[i] = p
	}
	id, err := checkVorbisHeaders(hdr)
	if err != nil {
		return nil, formatErr(name, "bad Ogg Vorbis header: %s", err)
	}
	gaps, err := checkVorbisSetup(hdr[2][7:], id.channels)
	if err != nil {
		return nil, formatErr(name, "bad Ogg Vorbis setup header: %s", err)
	}
	if len(gaps) > 0 {
		hdr[2] = append(hdr[2][:7:7], padFloors(hdr[2][7:], gaps)...)
	}
	var d vorbis.Decoder
	for _, h := range hdr {
		if err := d.ReadHeader(h); err != nil {
			return nil, formatErr(name, "bad Ogg Vorbis header: %s", oneLine(err.Error()))
		}
	}
	nch, rate := id.channels, id.rate
	if d.Channels() != nch || d.SampleRate() != rate {
		return nil, formatErr(name, "bad Ogg Vorbis header: %d channels at %d Hz", d.Channels(), d.SampleRate())
	}

	// The declared length: the last page's granule position.
	last, haveLast := dm.lastGranule()
	var declared int64
	if haveLast {
		declared = last
	}
	sink, err := newSink(name, "Ogg Vorbis", nch, rate, declared, o)
	if err != nil {
		return nil, err
	}
	buf := make([]float32, d.BufferSize())
	var (
		pos      int64 // frames decoded (before the start trim)
		drop     int64 // leading frames to drop
		base     int64 // granule position of the first kept frame
		seenGran bool  // a granule position was applied
		endAt    int64 = -1
	)
	for {
		p, gran, err := dm.packet()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(p) == 0 {
			continue // an empty packet carries no audio (spec 4.3.1)
		}
		if p[0]&1 != 0 {
			return nil, formatErr(name, "corrupt Ogg Vorbis stream: a header packet among the audio packets (chained streams are not supported)")
		}
		out, err := d.DecodeInto(p, buf)
		if err != nil {
			return nil, formatErr(name, "corrupt Ogg Vorbis data after %d samples: %s", sink.frames, oneLine(err.Error()))
		}
		n := len(out) / nch
		pos += int64(n)
		if haveLast && pos-drop > last+int64(id.block1) {
			// A later link of a chain with the same serial number can
			// end the file with a smaller granule position: say so.
			if err := dm.checkChain(); err != nil {
				return nil, err
			}
			return nil, formatErr(name, "corrupt Ogg Vorbis stream: it decodes past the %d samples its last page declares", last)
		}
		dst, err := sink.next(n)
		if err != nil {
			return nil, err
		}
		for c, x := range dst {
			vc := vorbisChannel(c, nch)
			for i := range x { // x is nil for a channel not kept
				x[i] = out[i*nch+vc]
			}
		}
		if gran >= 0 {
			if !seenGran {
				// The first granule position: fewer samples than decoded
				// means the stream starts that many samples in, unless
				// the page also ends the stream (then it marks the end).
				seenGran = true
				if dm.eos {
					base = 0
				} else if pos > gran {
					drop = pos - gran
				} else {
					base = gran - pos
				}
			}
			if dm.eos {
				endAt = gran - base
			}
		}
	}
	if endAt < 0 && haveLast {
		endAt = last - base
	}
	end := int64(sink.frames)
	if endAt >= 0 {
		end = min(end, endAt+drop)
	}
	sink.trim(int(min(drop, end)), int(end))
	return sink.clip()
}

// vorbisOrder maps the WAV channel order (front left, front right, centre,
// LFE, back, side; the order of WAV, FLAC, ffmpeg's output and oggdec's) to
// Vorbis's own order for 3 to 8 channels (spec 4.3.9: left, centre, right,
// then back / side, LFE last). Channel 0 is front left in both.
var vorbisOrder = [9][]int{
	3: {0, 2, 1},
	5: {0, 2, 1, 3, 4},
	6: {0, 2, 1, 5, 3, 4},
	7: {0, 2, 1, 6, 5, 3, 4},
	8: {0, 2, 1, 7, 5, 6, 3, 4},
}

// vorbisChannel is the Vorbis channel that is channel c of nch in WAV
// order.
func vorbisChannel(c, nch int) int {
	if nch < len(vorbisOrder) && vorbisOrder[nch] != nil {
		return vorbisOrder[nch][c]
	}
	return c
}

// vorbisID is what checkVorbisHeaders keeps of the identification header.
type vorbisID struct {
	channels, rate int
	block0, block1 int
}

// checkVorbisHeaders validates the three Vorbis header packets (spec
// section 4.2) before the library reads them.
func checkVorbisHeaders(h [3][]byte) (vorbisID, error) {
	var id vorbisID
	for i, typ := range []byte{1, 3, 5} {
		if len(h[i]) < 7 || h[i][0] != typ || string(h[i][1:7]) != "vorbis" {
			return id, fmt.Errorf("header packet %d is not the Vorbis %s header", i+1, [...]string{"identification", "comment", "setup"}[i])
		}
	}
	b := h[0][7:]
	if len(b) < 23 {
		return id, errors.New("identification header is too short")
	}
	le := binary.LittleEndian
	if v := le.Uint32(b); v != 0 {
		return id, fmt.Errorf("version %d (only Vorbis I, version 0, exists)", v)
	}
	id.channels = int(b[4])
	rate := le.Uint32(b[5:])
	e0, e1 := int(b[21]&15), int(b[21]>>4)
	switch {
	case id.channels == 0:
		return id, errors.New("zero channels")
	case rate == 0 || rate > MaxRate:
		return id, fmt.Errorf("sample rate %d Hz", rate)
	case e0 < 6 || e1 > 13 || e0 > e1:
		return id, fmt.Errorf("block sizes %d and %d (want powers of two 64 ≤ short ≤ long ≤ 8192)", 1<<e0, 1<<e1)
	case b[22]&1 == 0:
		return id, errors.New("identification header has no framing bit")
	}
	id.rate, id.block0, id.block1 = int(rate), 1<<e0, 1<<e1

	// Comment header: a vendor string and a list of comments, each a
	// length and that many bytes; the library allocates the list's count.
	c := h[1][7:]
	take := func(n int) ([]byte, bool) {
		if n < 0 || n > len(c) {
			return nil, false
		}
		x := c[:n]
		c = c[n:]
		return x, true
	}
	u32 := func() (int, bool) {
		x, ok := take(4)
		if !ok {
			return 0, false
		}
		return int(le.Uint32(x)), true
	}
	n, ok := u32()
	if ok {
		_, ok = take(n)
	}
	var count int
	if ok {
		count, ok = u32()
	}
	if !ok || count > len(c)/4 {
		return id, errors.New("comment header is cut off or counts more than it holds")
	}
	for i := 0; i < count; i++ {
		n, ok := u32()
		if ok {
			_, ok = take(n)
		}
		if !ok {
			return id, fmt.Errorf("comment header is cut off in comment %d of %d", i+1, count)
		}
	}
	return id, nil
}

// bitReader reads Vorbis's LSB-first bit packing; reading past the end sets
// over (and yields zeros).
type bitReader struct {
	b    []byte
	pos  int // bit position
	over bool
}

func (r *bitReader) left() int { return 8*len(r.b) - r.pos }

func (r *bitReader) u(n int) uint32 {
	var v uint32
	for i := 0; i < n; i++ {
		if r.pos >= 8*len(r.b) {
			r.over = true
			return 0
		}
		v |= uint32(r.b[r.pos>>3]>>(r.pos&7)&1) << i
		r.pos++
	}
	return v
}

func (r *bitReader) n(bits int) int { return int(r.u(bits)) }

func ilog(x int) int {
	n := 0
	for x > 0 {
		n++
		x >>= 1
	}
	return n
}

// lookup1Values is the greatest r with r^dims ≤ entries (spec 9.2.3), in
// integers.
func lookup1Values(entries, dims int) int {
	r := int(math.Floor(math.Pow(float64(entries), 1/float64(dims))))
	pow := func(x int) int64 { // x^dims, saturating past entries
		p := int64(1)
		for i := 0; i < dims; i++ {
			p *= int64(x)
			if p > int64(entries) {
				return p
			}
		}
		return p
	}
	for r > 0 && pow(r) > int64(entries) {
		r--
	}
	for pow(r+1) <= int64(entries) {
		r++
	}
	return r
}

// checkVorbisSetup walks a setup header (spec 4.2.4) as the library will
// read it, and refuses one that is cut off, indexes past what it defines,
// or would make the library allocate more than maxVorbisSetupAlloc.
//
// It also returns the bit positions of the type-1 floors with no partitions
// (libvorbis writes one for the LFE channel of 5.1 files). The library
// misreads those: it reads one partition class even when there are none
// (spec: maximum_class is −1 then), takes the bits of what follows as that
// class and fails further on, so 5.1 files were refused. padFloors inserts,
// at each of those positions, the bits of an unused class for the library
// to consume; the floor decodes as the spec says (no partitions).
func checkVorbisSetup(b []byte, channels int) (gaps []int, err error) {
	r := &bitReader{b: b}
	nbooks, err := checkVorbisCodebooks(r)
	if err != nil {
		return nil, err
	}
	for i, n := 0, r.n(6)+1; i < n; i++ {
		if r.u(16) != 0 {
			return nil, errors.New("nonzero time-domain transform")
		}
	}
	nfloors, gaps, err := checkVorbisFloors(r, nbooks)
	if err != nil {
		return nil, err
	}
	nres, err := checkVorbisResidues(r, nbooks)
	if err != nil {
		return nil, err
	}
	nmaps, err := checkVorbisMappings(r, channels, nfloors, nres)
	if err != nil {
		return nil, err
	}
	if err := checkVorbisModes(r, nmaps); err != nil {
		return nil, err
	}
	if r.u(1) != 1 || r.over {
		return nil, errors.New("cut off (no framing bit)")
	}
	return gaps, nil
}

// errVorbisCut is a setup header that ends before what it declares.
var errVorbisCut = errors.New("cut off")

// checkVorbisCodebooks checks the codebooks (spec 3.2.1) and returns how
// many there are.
func checkVorbisCodebooks(r *bitReader) (int, error) {
	var alloc int64
	nbooks := r.n(8) + 1
	for i := 0; i < nbooks; i++ {
		if err := checkVorbisCodebook(r, i, &alloc); err != nil {
			return 0, err
		}
	}
	return nbooks, nil
}

// checkVorbisCodebook checks codebook i, adding what the library will
// allocate for it to *alloc.
func checkVorbisCodebook(r *bitReader, i int, alloc *int64) error {
	if r.u(24) != 0x564342 {
		return fmt.Errorf("codebook %d has no sync pattern", i)
	}
	dims := r.n(16)
	entries := r.n(24)
	if r.over {
		return errVorbisCut
	}
	if dims == 0 || entries < 2 || entries > maxVorbisEntries {
		return fmt.Errorf("codebook %d: %d entries of %d dimensions (want 2..%d entries, ≥ 1 dimension)", i, entries, dims, maxVorbisEntries)
	}
	used := 0
	if r.u(1) == 0 { // not ordered: a length per entry
		sparse := r.u(1) == 1
		if entries > r.left() {
			return fmt.Errorf("codebook %d: %d entries in %d bits", i, entries, r.left())
		}
		for e := 0; e < entries && !r.over; e++ {
			if !sparse || r.u(1) == 1 {
				r.u(5)
				used++
			}
		}
	} else { // ordered: runs of increasing lengths
		length := r.n(5) + 1
		for used < entries && !r.over {
			if length > 32 {
				return fmt.Errorf("codebook %d: code lengths past 32 bits", i)
			}
			num := r.n(ilog(entries - used))
			if used+num > entries {
				return fmt.Errorf("codebook %d: %d code lengths for %d entries", i, used+num, entries)
			}
			used += num
			length++
		}
	}
	if r.over {
		return errVorbisCut
	}
	if used == 0 {
		return fmt.Errorf("codebook %d has no used entry", i)
	}
	*alloc += 9 * int64(entries) // the library's Huffman table
	switch lt := r.n(4); lt {
	case 0:
	case 1, 2:
		r.u(32)
		r.u(32)
		bits := r.n(4) + 1
		r.u(1)
		nv := int64(entries) * int64(dims)
		if lt == 1 {
			nv = int64(lookup1Values(entries, dims))
			if lib := int64(math.Floor(math.Pow(float64(entries), 1/float64(dims)))); lib != nv {
				return fmt.Errorf("codebook %d: %d entries in %d dimensions, which the decoder library miscounts", i, entries, dims)
			}
		}
		if nv*int64(bits) > int64(r.left()) {
			return fmt.Errorf("codebook %d: %d values of %d bits in %d bits", i, nv, bits, r.left())
		}
		r.pos += int(nv) * bits
		*alloc += 4*nv + 4*int64(entries)*int64(dims)
	default:
		return fmt.Errorf("codebook %d: lookup type %d", i, lt)
	}
	if *alloc > maxVorbisSetupAlloc {
		return fmt.Errorf("codebooks would take more than %d MiB", maxVorbisSetupAlloc>>20)
	}
	return nil
}

// vorbisBook checks a codebook number against the nbooks defined.
func vorbisBook(x, nbooks int, what string) error {
	if x >= nbooks {
		return fmt.Errorf("%s uses codebook %d of %d", what, x, nbooks)
	}
	return nil
}

// checkVorbisFloors checks the floors and returns how many there are and
// the positions of the type-1 floors with no partitions.
func checkVorbisFloors(r *bitReader, nbooks int) (nfloors int, gaps []int, err error) {
	nfloors = r.n(6) + 1
	for i := 0; i < nfloors; i++ {
		what := fmt.Sprintf("floor %d", i)
		switch t := r.n(16); t {
		case 0:
			r.u(8 + 16 + 16 + 6 + 8)
			for j, n := 0, r.n(4)+1; j < n; j++ {
				if err := vorbisBook(r.n(8), nbooks, what); err != nil {
					return 0, nil, err
				}
			}
		case 1:
			parts := r.n(5)
			if parts == 0 {
				gaps = append(gaps, r.pos)
			}
			classes := make([]int, parts)
			maxClass := -1
			for j := range classes {
				classes[j] = r.n(4)
				maxClass = max(maxClass, classes[j])
			}
			dims := make([]int, maxClass+1)
			for j := range dims {
				dims[j] = r.n(3) + 1
				sub := r.n(2)
				if sub != 0 {
					if err := vorbisBook(r.n(8), nbooks, what); err != nil {
						return 0, nil, err
					}
				}
				for k := 0; k < 1<<sub; k++ {
					if x := r.n(8) - 1; x >= 0 {
						if err := vorbisBook(x, nbooks, what); err != nil {
							return 0, nil, err
						}
					}
				}
			}
			r.u(2)
			rangeBits := r.n(4)
			points := 2
			for _, c := range classes {
				points += dims[c]
				r.pos += dims[c] * rangeBits
			}
			if points > 65 {
				return 0, nil, fmt.Errorf("%s has %d points (at most 65)", what, points)
			}
		default:
			return 0, nil, fmt.Errorf("%s has type %d", what, t)
		}
		if r.over {
			return 0, nil, errVorbisCut
		}
	}
	return nfloors, gaps, nil
}

// checkVorbisResidues checks the residues and returns how many there are.
func checkVorbisResidues(r *bitReader, nbooks int) (int, error) {
	nres := r.n(6) + 1
	for i := 0; i < nres; i++ {
		what := fmt.Sprintf("residue %d", i)
		if t := r.n(16); t > 2 {
			return 0, fmt.Errorf("%s has type %d", what, t)
		}
		r.u(24 + 24 + 24)
		ncls := r.n(6) + 1
		if err := vorbisBook(r.n(8), nbooks, what); err != nil {
			return 0, err
		}
		cascade := make([]int, ncls)
		for j := range cascade {
			cascade[j] = r.n(3)
			if r.u(1) == 1 {
				cascade[j] |= r.n(5) << 3
			}
		}
		for _, c := range cascade {
			for k := 0; k < 8; k++ {
				if c>>k&1 == 1 {
					if err := vorbisBook(r.n(8), nbooks, what); err != nil {
						return 0, err
					}
				}
			}
		}
		if r.over {
			return 0, errVorbisCut
		}
	}
	return nres, nil
}

// checkVorbisMappings checks the mappings against the channels, floors and
// residues and returns how many there are.
func checkVorbisMappings(r *bitReader, channels, nfloors, nres int) (int, error) {
	nmaps := r.n(6) + 1
	for i := 0; i < nmaps; i++ {
		if r.u(16) != 0 {
			return 0, fmt.Errorf("mapping %d has a nonzero type", i)
		}
		submaps := 1
		if r.u(1) == 1 {
			submaps = r.n(4) + 1
		}
		if r.u(1) == 1 {
			steps := r.n(8) + 1
			bits := ilog(channels - 1)
			for j := 0; j < steps; j++ {
				m, a := r.n(bits), r.n(bits)
				if m == a || m >= channels || a >= channels {
					return 0, fmt.Errorf("mapping %d couples channels %d and %d of %d", i, m, a, channels)
				}
			}
		}
		if r.u(2) != 0 {
			return 0, fmt.Errorf("mapping %d: reserved bits set", i)
		}
		if submaps > 1 {
			for j := 0; j < channels; j++ {
				if m := r.n(4); m >= submaps {
					return 0, fmt.Errorf("mapping %d puts channel %d in submap %d of %d", i, j, m, submaps)
				}
			}
		}
		for j := 0; j < submaps; j++ {
			r.u(8)
			if f, x := r.n(8), r.n(8); f >= nfloors || x >= nres {
				return 0, fmt.Errorf("mapping %d: submap %d uses floor %d of %d, residue %d of %d", i, j, f, nfloors, x, nres)
			}
		}
		if r.over {
			return 0, errVorbisCut
		}
	}
	return nmaps, nil
}

// checkVorbisModes checks the modes against the mappings.
func checkVorbisModes(r *bitReader, nmaps int) error {
	nmodes := r.n(6) + 1
	for i := 0; i < nmodes; i++ {
		r.u(1)
		window, transform := r.u(16), r.u(16)
		if window != 0 || transform != 0 {
			return fmt.Errorf("mode %d has a nonzero window or transform type", i)
		}
		if m := r.n(8); m >= nmaps {
			return fmt.Errorf("mode %d uses mapping %d of %d", i, m, nmaps)
		}
	}
	return nil
}

// padFloors returns setup header b with an unused floor class (13 bits:
// dimension 1, no subclasses, no book) inserted at each bit position of
// gaps (see checkVorbisSetup).
func padFloors(b []byte, gaps []int) []byte {
	out := make([]byte, 0, len(b)+2*len(gaps)+1)
	var acc uint64
	var nacc int
	put := func(v uint32, n int) {
		acc |= uint64(v) << nacc
		nacc += n
		for nacc >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			nacc -= 8
		}
	}
	r := &bitReader{b: b}
	for _, g := range gaps {
		for r.pos < g {
			k := min(g-r.pos, 24)
			put(r.u(k), k)
		}
		put(0, 3+2+8) // dimension 0+1, subclasses 0, book 0−1 (none)
	}
	for r.left() > 0 {
		k := min(r.left(), 24)
		put(r.u(k), k)
	}
	if nacc > 0 {
		out = append(out, byte(acc))
	}
	return out
}

// oggDemux reads the packets of the first logical stream of an Ogg file.
type oggDemux struct {
	r      io.ReaderAt
	size   int64
	name   string
	off    int64 // next page
	serial uint32
	pages  int
	queue  [][]byte // packets completed on the current page, not yet returned
	gran   int64    // the current page's granule position
	part   []byte   // a packet continued on the next page
	eos    bool     // the current page ends the stream
	done   bool
	body   []byte

	// Chains (checkChain). data is set once a page that begins no stream
	// has been read (so the streams of the first group have all begun);
	// link is the offset of a page of another serial beginning a stream
	// after that, unless a page of this stream followed it (0: none).
	data    bool
	link    int64
	checked bool // checkChain has looked at the rest of the file

	truncated bool // the file ends mid-page or mid-packet
}

// cut is the error for a stream cut off mid-page.
func (d *oggDemux) cut(what string) error {
	d.truncated = true
	return formatErr(d.name, "truncated Ogg Vorbis stream (%s)", what)
}

// packet returns the next packet and, for the last packet completed on its
// page, the page's granule position (−1 otherwise); io.EOF at the end of
// the stream.
func (d *oggDemux) packet() ([]byte, int64, error) {
	for len(d.queue) == 0 {
		if d.done {
			if err := d.checkChain(); err != nil {
				return nil, -1, err
			}
			return nil, -1, io.EOF
		}
		if err := d.page(); err != nil {
			return nil, -1, err
		}
	}
	p := d.queue[0]
	d.queue = d.queue[1:]
	if len(d.queue) == 0 {
		return p, d.gran, nil
	}
	return p, -1, nil
}

// oggHeader parses the page header at b (27 bytes and its segment table);
// it returns the header's length and the body's.
func oggHeader(b []byte) (hlen, blen int, ok bool) {
	if len(b) < 27 || string(b[:4]) != "OggS" || b[4] != 0 {
		return 0, 0, false
	}
	hlen = 27 + int(b[26])
	if len(b) < hlen {
		return hlen, 0, true
	}
	for _, s := range b[27:hlen] {
		blen += int(s)
	}
	return hlen, blen, true
}

// page reads the next page of the stream into queue.
func (d *oggDemux) page() error {
	for {
		if d.off >= d.size {
			if d.part != nil || d.pages == 0 {
				return d.cut(fmt.Sprintf("a packet is cut off after page %d", d.pages))
			}
			d.done = true
			return nil
		}
		if d.size-d.off < 27 {
			return d.cut(fmt.Sprintf("page %d is cut off", d.pages+1))
		}
		var h [27 + 255]byte
		n := min(int64(len(h)), d.size-d.off)
		if _, err := d.r.ReadAt(h[:n], d.off); err != nil && err != io.EOF {
			return formatErr(d.name, "reading Ogg page: %v", err)
		}
		hlen, blen, ok := oggHeader(h[:n])
		if !ok {
			return formatErr(d.name, "corrupt Ogg stream: no page at offset %d", d.off)
		}
		if int64(hlen+blen) > d.size-d.off || hlen > int(n) {
			return d.cut(fmt.Sprintf("page %d is cut off", d.pages+1))
		}
		if cap(d.body) < hlen+blen {
			d.body = make([]byte, hlen+blen)
		}
		pg := d.body[:hlen+blen]
		if _, err := d.r.ReadAt(pg, d.off); err != nil && err != io.EOF {
			return formatErr(d.name, "reading Ogg page: %v", err)
		}
		if !oggCRCOK(pg) {
			return formatErr(d.name, "corrupt Ogg stream: page at offset %d fails its checksum", d.off)
		}
		at := d.off
		d.off += int64(len(pg))
		flags := pg[5]
		serial := binary.LittleEndian.Uint32(pg[14:])
		bos := flags&2 != 0
		switch {
		case d.pages == 0:
			if !bos {
				return formatErr(d.name, "corrupt Ogg stream: the first page does not begin a stream")
			}
			d.serial = serial
		case bos && d.data && serial == d.serial:
			return d.chained(at) // the stream begins again: a link with the same serial
		case serial != d.serial:
			// Another logical stream: multiplexed with this one (its pages
			// are skipped), or, if it begins after data pages, the next
			// link of a chain, unless this stream goes on after it.
			if bos && d.data && d.link == 0 {
				d.link = at
			}
			d.data = d.data || !bos
			continue
		}
		d.data = d.data || !bos
		d.link = 0
		d.pages++
		d.gran = int64(binary.LittleEndian.Uint64(pg[6:]))
		d.eos = flags&4 != 0
		if flags&1 == 0 && d.part != nil {
			return formatErr(d.name, "corrupt Ogg stream: page %d drops a packet the previous page began", d.pages)
		}
		if flags&1 != 0 && d.part == nil && d.pages > 1 {
			return formatErr(d.name, "corrupt Ogg stream: page %d continues a packet no page began", d.pages)
		}
		body := pg[hlen:]
		// Split the body into packets by the lacing values.
		pos := 0
		seg := pg[27:hlen]
		for i := 0; i < len(seg); {
			j, n := i, 0
			for j < len(seg) && seg[j] == 255 {
				n += 255
				j++
			}
			complete := j < len(seg)
			if complete {
				n += int(seg[j])
				j++
			}
			if len(d.part)+n > maxOggPacket {
				return formatErr(d.name, "corrupt Ogg stream: a packet of more than %d MiB", maxOggPacket>>20)
			}
			chunk := body[pos : pos+n]
			pos += n
			if complete {
				p := append(d.part, chunk...)
				if d.part == nil {
					p = append([]byte(nil), chunk...)
				}
				d.queue = append(d.queue, p)
				d.part = nil
			} else {
				d.part = append(d.part, chunk...)
				if d.part == nil {
					d.part = []byte{}
				}
			}
			i = j
		}
		if d.eos {
			d.done = true
		}
		if len(d.queue) > 0 || d.done {
			return nil
		}
	}
}

// chained is the error for a chained file whose second link begins at
// offset at.
func (d *oggDemux) chained(at int64) error {
	return formatErr(d.name, "chained Ogg stream (a second logical stream starts at byte %d): not supported; convert the file: ffmpeg -i %s -c:a pcm_f32le out.wav", at, shellQuote(d.name))
}

// checkChain fails if the file is chained: if a stream began after data
// pages and this stream did not go on after it, or if a page after d.off
// begins a stream (all this stream's pages have been read when it is
// called at the end of the stream: a stream that begins after them is a
// next link). Pages after the stream's end are walked by their headers;
// the first bytes that are no page end the walk (trailing junk is ignored,
// as before), and a page that would begin a stream counts only if its
// checksum holds. It looks once.
func (d *oggDemux) checkChain() error {
	if d.checked {
		return nil
	}
	d.checked = true
	if d.link != 0 {
		return d.chained(d.link)
	}
	var h [27 + 255]byte
	for off := d.off; off < d.size; {
		n := min(int64(len(h)), d.size-off)
		if _, err := d.r.ReadAt(h[:n], off); err != nil && err != io.EOF {
			return formatErr(d.name, "reading Ogg page: %v", err)
		}
		hlen, blen, ok := oggHeader(h[:n])
		if !ok || hlen > int(n) || int64(hlen+blen) > d.size-off {
			return nil
		}
		if h[5]&2 != 0 {
			pg := make([]byte, hlen+blen)
			if _, err := d.r.ReadAt(pg, off); err != nil && err != io.EOF {
				return formatErr(d.name, "reading Ogg page: %v", err)
			}
			if oggCRCOK(pg) {
				return d.chained(off)
			}
			return nil
		}
		off += int64(hlen + blen)
	}
	return nil
}

// lastGranule returns the granule position of the stream's last page, found
// by searching the file's last 64 KiB (a page is at most 65307 bytes)
// backwards for a page of the stream with a valid checksum.
func (d *oggDemux) lastGranule() (int64, bool) {
	const maxPage = 27 + 255 + 255*255
	n := min(d.size, 2*maxPage)
	tail := make([]byte, n)
	if _, err := d.r.ReadAt(tail, d.size-n); err != nil && err != io.EOF {
		return 0, false
	}
	for i := len(tail) - 27; i >= 0; i-- {
		if tail[i] != 'O' {
			continue
		}
		hlen, blen, ok := oggHeader(tail[i:])
		if !ok || i+hlen+blen > len(tail) || !oggCRCOK(tail[i:i+hlen+blen]) {
			continue
		}
		if binary.LittleEndian.Uint32(tail[i+14:]) != d.serial {
			continue
		}
		g := int64(binary.LittleEndian.Uint64(tail[i+6:]))
		if g < 0 {
			continue
		}
		return g, true
	}
	return 0, false
}

var oggCRCTable = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i) << 24
		for j := 0; j < 8; j++ {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04C11DB7
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return
}()

// oggCRCOK checks a whole page's CRC-32 (polynomial 0x04C11DB7, not
// reflected, zero initial value, computed with the CRC field zeroed).
func oggCRCOK(pg []byte) bool {
	var crc uint32
	for i, b := range pg {
		if i >= 22 && i < 26 {
			b = 0
		}
		crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^b]
	}
	return crc == binary.LittleEndian.Uint32(pg[22:])
}

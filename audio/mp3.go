package audio

import (
	"errors"
	"fmt"
	"io"

	"github.com/pp-offline/pp-offline/audio/internal/mp3"
)

// mp3Decoder is the decoder delay of an MP3 decoder (the synthesis filter
// bank), which LAME's encoder-delay field does not include: 528 + 1 samples,
// as ffmpeg and LAME's own decoder count it.
const mp3Decoder = 529

// maxID3Tags bounds the ID3v2 tags skipped before the first frame.
const maxID3Tags = 16

// maxMP3Junk bounds the bytes searched for the first frame after the tags.
const maxMP3Junk = 4096

// decodeMP3 decodes an MPEG-1, MPEG-2 or MPEG-2.5 layer III file with
// pp-offline's own decoder (audio/internal/mp3) and trims it the way ffmpeg
// does.
//
// ID3v2 tags are skipped with their sizes bounded by the file; the first
// frame's header gives the sample rate and the channel count (a mono file
// gives one channel; a stereo frame in it gives its left channel, a mono
// frame in a stereo file both), and its Xing/LAME tag the samples to drop,
// as ffmpeg's gapless trimming drops them: the Xing frame (decoded, not
// kept), then encoder delay + 529 at the start, padding − 529 at the end. Frames follow one another; where the next bytes are no frame header
// of the stream (junk, a tag inside the file, a header of another version or
// rate) decoding resumes at the next header that another one follows, as
// decoders resynchronise; trailing tags end the stream. A frame whose side
// information or main data is invalid is decoded as silence, its length
// kept (ffmpeg drops some such frames and zeroes the damaged part of
// others; keeping the length keeps the timing), and so is a frame whose
// main data begins before the stream (a cut file), as decoders do; a file
// none of whose audio frames decodes is an error. A last frame cut off by the end of the file is
// dropped, what came before kept, as ffmpeg and symphonia keep it.
func decodeMP3(r io.ReaderAt, size int64, name string, o decodeOpts) (clip *Clip, err error) {
	defer guard(name, "MP3", &err)
	off, err := skipID3(r, size, name)
	if err != nil {
		return nil, err
	}
	win := &mp3Window{r: r, size: size}
	// The first frame header must follow the tags (a little junk is
	// tolerated, as decoders do): one that another frame header of the
	// same stream follows, or the end of the file, or failing that the
	// first header seen.
	var h mp3.Header
	found := false
	var why error
	first := int64(-1)
	var firstH mp3.Header
	for end := min(off+maxMP3Junk, size-3); off < end; off++ {
		b, err := win.at(off, 4)
		if err != nil {
			return nil, formatErr(name, "reading MP3 data: %v", err)
		}
		h2, herr := mp3.ParseHeader(b)
		if herr != nil {
			if errors.Is(herr, mp3.ErrFreeFormat) && why == nil {
				why = herr
			}
			continue
		}
		if first < 0 {
			first, firstH = off, h2
		}
		next := off + int64(h2.FrameBytes)
		if next+4 <= size {
			b, err := win.at(next, 4)
			if err != nil {
				return nil, formatErr(name, "reading MP3 data: %v", err)
			}
			if h3, err := mp3.ParseHeader(b); err != nil || !h2.SameStream(h3) {
				continue
			}
		}
		h, found = h2, true
		break
	}
	if !found && first >= 0 {
		off, h, found = first, firstH, true
	}
	if !found {
		if why != nil {
			return nil, formatErr(name, "%v", why)
		}
		tagEnd, _ := skipID3(r, size, name)
		if tagEnd == 0 {
			return nil, formatErr(name, "no MP3 frame found")
		}
		head, err := win.at(tagEnd, sniffLen)
		if err != nil {
			return nil, formatErr(name, "reading MP3 data: %v", err)
		}
		return nil, formatErr(name, "no MP3 frame or FLAC stream found after the ID3 tag: it is followed by %s", afterID3(head, size-tagEnd))
	}
	skipStart, dropEnd := 0, 0
	var declared int64 // frames the Xing/Info tag counts (0: unknown)
	fr, err := win.at(off, h.FrameBytes)
	if err != nil {
		return nil, formatErr(name, "reading MP3 data: %v", err)
	}
	if info, ok := parseXing(fr, mpegHeader{version: h.Version, crc: h.CRC, mono: h.Mode == mp3.Mono}); ok {
		skipStart = h.Samples // the Xing/Info frame itself
		declared = int64(info.frames) * int64(h.Samples)
		if info.lame {
			skipStart += info.delay + mp3Decoder
			dropEnd = max(info.padding-mp3Decoder, 0)
		}
	}
	nch := h.Channels()
	// The Xing count is checked against the limit before decoding; it is
	// not trusted further (concatenated files make it short), so decoding
	// past it only grows the store, under the limit.
	sink, err := newSink(name, "MP3", nch, h.Rate, declared, o)
	if err != nil {
		return nil, err
	}
	dec := mp3.NewDecoder()
	scratch := make([]float32, 1152)
	good, bad := 0, 0
	var firstBad error
	xingFrame := skipStart > 0 // decoded (silence) but not stored
	for off+4 <= size {
		b, err := win.at(off, 4)
		if err != nil {
			return nil, formatErr(name, "reading MP3 data: %v", err)
		}
		fh, herr := mp3.ParseHeader(b)
		if herr != nil || !h.SameStream(fh) {
			next, err := win.resync(h, off+1)
			if err != nil {
				return nil, formatErr(name, "reading MP3 data: %v", err)
			}
			if next < 0 {
				break // trailing tags or junk
			}
			off = next
			continue
		}
		fr, err := win.at(off, fh.FrameBytes)
		if err != nil {
			return nil, formatErr(name, "reading MP3 data: %v", err)
		}
		if len(fr) < fh.FrameBytes {
			break // cut off by the end of the file
		}
		// The frame is decoded into the store: channel 0 into its first
		// channel, channel 1 into the second where that is kept (else
		// into scratch).
		var dst [][]float32
		if xingFrame {
			dst = [][]float32{scratch, nil}
		} else if dst, err = sink.next(fh.Samples); err != nil {
			return nil, err
		}
		pcm := [2][]float32{dst[0], scratch}
		if len(dst) > 1 && dst[1] != nil && fh.Channels() == 2 {
			pcm[1] = dst[1]
		}
		if _, err := dec.Decode(fr, pcm); err != nil {
			if !errors.Is(err, mp3.ErrCorrupt) {
				return nil, formatErr(name, "corrupt MP3 data at offset %d: %s", off, oneLine(err.Error()))
			}
			if bad++; firstBad == nil {
				firstBad = fmt.Errorf("offset %d: %s", off, oneLine(err.Error()))
			}
		} else if !xingFrame {
			good++
		}
		if len(dst) > 1 && dst[1] != nil && fh.Channels() == 1 {
			copy(dst[1], dst[0]) // a mono frame in a stereo stream
		}
		if xingFrame {
			xingFrame = false
			skipStart -= h.Samples
		}
		off += int64(fh.FrameBytes)
	}
	if good == 0 && firstBad != nil {
		return nil, formatErr(name, "corrupt MP3 data: no frame decodes (%v)", firstBad)
	}
	sink.trim(skipStart, sink.frames-dropEnd)
	return sink.clip()
}

// mp3Window reads an MP3 file through a buffer.
type mp3Window struct {
	r     io.ReaderAt
	size  int64
	buf   []byte
	start int64 // file offset of buf[0]
}

// at returns the n bytes at off, fewer where the file ends first. A refill
// starts a little before off, so that the resynchronisation's look-ahead
// to the next frame and its return to the following byte stay in one
// buffer.
func (w *mp3Window) at(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), w.size)
	if off >= w.start && end <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start : end-w.start], nil
	}
	const chunk, back = 1 << 16, 1 << 12
	start := max(off-back, 0)
	m := min(int64(max(n, chunk))+off-start, w.size-start)
	if end <= off {
		return nil, nil
	}
	if int64(cap(w.buf)) < m {
		w.buf = make([]byte, 0, m)
	}
	w.buf = w.buf[:m]
	got, err := w.r.ReadAt(w.buf, start)
	if err != nil && !(errors.Is(err, io.EOF) && int64(got) == m) {
		w.buf = w.buf[:0]
		return nil, err
	}
	w.start = start
	return w.buf[off-start : end-start], nil
}

// resync finds the next frame header of the stream of h at or after off:
// one whose next frame is another such header or the end of the file (so
// that a stray sync pattern in junk is passed over). It returns -1 if there
// is none.
func (w *mp3Window) resync(h mp3.Header, off int64) (int64, error) {
	for ; off+4 <= w.size; off++ {
		b, err := w.at(off, 4)
		if err != nil {
			return 0, err
		}
		if b[0] != 0xFF {
			continue
		}
		c, err := mp3.ParseHeader(b)
		if err != nil || !h.SameStream(c) {
			continue
		}
		next := off + int64(c.FrameBytes)
		if next+4 > w.size {
			return off, nil
		}
		b, err = w.at(next, 4)
		if err != nil {
			return 0, err
		}
		if d, err := mp3.ParseHeader(b); err == nil && h.SameStream(d) {
			return off, nil
		}
	}
	return -1, nil
}

// id3Size returns the size of the ID3v2 tag that b starts with: its
// 10-byte header, the 28-bit syncsafe size it gives, and the 10-byte footer
// when its flags say there is one. ok is false where b holds no tag header
// (too short, or no "ID3") or the size is not syncsafe (a byte ≥ 0x80).
func id3Size(b []byte) (n int64, ok bool) {
	if len(b) < 10 || string(b[:3]) != "ID3" || b[6]|b[7]|b[8]|b[9] >= 0x80 {
		return 0, false
	}
	n = 10 + (int64(b[6])<<21 | int64(b[7])<<14 | int64(b[8])<<7 | int64(b[9]))
	if b[5]&0x10 != 0 {
		n += 10 // footer
	}
	return n, true
}

// skipID3 returns the offset after the ID3v2 tags at the start of the file;
// a tag that claims more bytes than the file has left is an error.
func skipID3(r io.ReaderAt, size int64, name string) (int64, error) {
	var off int64
	for i := 0; i < maxID3Tags; i++ {
		var h [10]byte
		if off+10 > size {
			return off, nil
		}
		if _, err := r.ReadAt(h[:], off); err != nil {
			return 0, formatErr(name, "reading ID3 tag: %v", err)
		}
		if string(h[:3]) != "ID3" {
			return off, nil
		}
		n, ok := id3Size(h[:])
		if !ok {
			return 0, formatErr(name, "corrupt ID3 tag at offset %d (bad size)", off)
		}
		if off+n > size {
			return 0, formatErr(name, "truncated ID3 tag: it claims %d bytes, the file has %d", n, size-off)
		}
		off += n
	}
	return 0, formatErr(name, "more than %d ID3 tags", maxID3Tags)
}

// xingInfo is what the Xing/Info and LAME tags of a first frame say.
type xingInfo struct {
	frames         uint32 // frame count (0: not given)
	lame           bool
	delay, padding int
}

// parseXing reads a Xing/Info (or VBRI) tag in the first frame, and the LAME
// extension with the encoder delay and padding when present.
func parseXing(f []byte, h mpegHeader) (xingInfo, bool) {
	var x xingInfo
	side := 32
	switch {
	case h.version == 1 && h.mono:
		side = 17
	case h.version != 1 && h.mono:
		side = 9
	case h.version != 1:
		side = 17
	}
	// The tag follows the side information; in a CRC-protected frame LAME
	// (and ffmpeg, which reads it there) still puts it at 4 + side, so
	// that place is tried first, then after the CRC.
	p := 4 + side
	tag := func(p int) bool {
		return len(f) >= p+8 && (string(f[p:p+4]) == "Xing" || string(f[p:p+4]) == "Info")
	}
	if len(f) >= 4+32+4 && string(f[36:40]) == "VBRI" {
		return x, true
	}
	if !tag(p) {
		if !h.crc || !tag(p+2) {
			return x, false
		}
		p += 2
	}
	flags := uint32(f[p+4])<<24 | uint32(f[p+5])<<16 | uint32(f[p+6])<<8 | uint32(f[p+7])
	q := p + 8
	if flags&1 != 0 {
		if len(f) < q+4 {
			return x, true
		}
		x.frames = uint32(f[q])<<24 | uint32(f[q+1])<<16 | uint32(f[q+2])<<8 | uint32(f[q+3])
		q += 4
	}
	if flags&2 != 0 {
		q += 4
	}
	if flags&4 != 0 {
		q += 100
	}
	if flags&8 != 0 {
		q += 4
	}
	if len(f) < q+24 {
		return x, true
	}
	enc := string(f[q : q+4])
	if enc == "LAME" || enc == "Lavf" || enc == "Lavc" {
		x.lame = true
		x.delay = int(f[q+21])<<4 | int(f[q+22])>>4
		x.padding = int(f[q+22]&0x0F)<<8 | int(f[q+23])
	}
	return x, true
}

package audio

import (
	"errors"
	"io"
	"strings"

	mp3 "github.com/hajimehoshi/go-mp3"
)

// mp3Decoder is the decoder delay of an MP3 decoder (the synthesis filter
// bank), which LAME's encoder-delay field does not include: 528 + 1 samples,
// as ffmpeg and LAME's own decoder count it.
const mp3Decoder = 529

// maxID3 bounds the ID3v2 tags skipped before the first frame.
const maxID3Tags = 16

// decodeMP3 decodes an MP3 file with github.com/hajimehoshi/go-mp3 (see
// decode.go for why that library) and trims it the way ffmpeg does.
//
// go-mp3 yields 16-bit stereo for every file and decodes every frame,
// including the Xing/Info (or VBRI) frame an encoder puts first (silence)
// and the encoder delay and padding recorded in LAME's tag. Here: ID3v2 tags
// are skipped with their sizes bounded by the file (go-mp3 itself would
// allocate whatever size a tag claims); the first frame's header gives the
// channel count (a mono file yields its left channel) and its Xing/LAME tag
// the samples to drop, as ffmpeg's gapless trimming drops them: the Xing
// frame, then encoder delay + 529 at the start, padding − 529 at the end.
func decodeMP3(r io.ReaderAt, size int64, name string, o decodeOpts) (clip *Clip, err error) {
	defer guard(name, "MP3", &err)
	off, err := skipID3(r, size, name)
	if err != nil {
		return nil, err
	}
	// The first frame header must follow the tags (a little junk is
	// tolerated, as decoders do).
	var head [4]byte
	var h mpegHeader
	found := false
	const maxJunk = 4096
	for skip := int64(0); skip < maxJunk && off+4 <= size; skip++ {
		if _, err := r.ReadAt(head[:], off); err != nil {
			return nil, formatErr(name, "reading MP3 data: %v", err)
		}
		if h2, ok := parseMPEGHeader(head[:]); ok && h2.layer == 3 {
			h, found = h2, true
			break
		}
		off++
	}
	if !found {
		return nil, formatErr(name, "no MP3 frame found after the ID3 tag")
	}
	if h.version == 25 {
		// MPEG-2.5 (8, 11.025, 12 kHz: telephone recordings). go-mp3
		// refuses it and no well-kept pure-Go decoder reads it, so it goes
		// through ffmpeg when that is installed (ffmpeg.go), with the
		// same limits; without ffmpeg the error says how to convert it.
		return decodeFFmpeg(r, size, name, "MPEG-2.5 MP3 (8 / 11.025 / 12 kHz)", o)
	}
	skipStart, dropEnd := 0, 0
	var declared int64 // frames the Xing/Info tag counts (0: unknown)
	first := make([]byte, min(int64(h.frameBytes), size-off))
	if _, err := r.ReadAt(first, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, formatErr(name, "reading MP3 data: %v", err)
	}
	if info, ok := parseXing(first, h); ok {
		skipStart = h.samples // the Xing/Info frame itself
		declared = int64(info.frames) * int64(h.samples)
		if info.lame {
			skipStart += info.delay + mp3Decoder
			dropEnd = max(info.padding-mp3Decoder, 0)
		}
	}

	// A plain io.Reader: given an io.Seeker, go-mp3 would first scan the
	// whole file for frame offsets.
	src := struct{ io.Reader }{io.NewSectionReader(r, off, size-off)}
	d, err := mp3.NewDecoder(src)
	if err != nil {
		return nil, formatErr(name, "corrupt MP3 data: %s", mp3Err(err))
	}
	if d.SampleRate() != h.rate {
		return nil, formatErr(name, "corrupt MP3 data: first frame says %d Hz, the decoder %d Hz", h.rate, d.SampleRate())
	}
	nch := 2
	if h.mono {
		nch = 1
	}
	// The Xing count is checked against the limit before decoding; it is
	// not trusted further (concatenated files make it short), so decoding
	// past it only grows the store, under the limit.
	sink, err := newSink(name, "MP3", nch, h.rate, declared, o)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	var carry int
	for {
		n, rerr := d.Read(buf[carry:])
		n += carry
		frames := n / 4
		dst, err := sink.next(frames)
		if err != nil {
			return nil, err
		}
		for c := 0; c < nch; c++ {
			if d := dst[c]; d != nil {
				for i := range d {
					p := buf[4*i+2*c:]
					d[i] = float32(int16(uint16(p[0])|uint16(p[1])<<8)) / 32768
				}
			}
		}
		carry = copy(buf, buf[4*frames:n])
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if sink.frames > 0 && isMP3Truncation(rerr) {
				// A cut-off last frame: what was decoded is kept, as
				// ffmpeg and symphonia keep it.
				break
			}
			return nil, formatErr(name, "corrupt MP3 data after %d samples: %s", sink.frames, mp3Err(rerr))
		}
	}
	sink.trim(skipStart, sink.frames-dropEnd)
	return sink.clip()
}

func mp3Err(err error) string { return oneLine(err.Error()) }

// isMP3Truncation: go-mp3 reports a frame cut off by the end of the file as
// an unexpected EOF (its own error type, whose message says so).
func isMP3Truncation(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(strings.ToLower(err.Error()), "unexpected eof")
}

// skipID3 returns the offset after the ID3v2 tags at the start of the file.
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
		if h[6]|h[7]|h[8]|h[9] >= 0x80 {
			return 0, formatErr(name, "corrupt ID3 tag at offset %d (bad size)", off)
		}
		n := int64(h[6])<<21 | int64(h[7])<<14 | int64(h[8])<<7 | int64(h[9])
		n += 10
		if h[5]&0x10 != 0 {
			n += 10 // footer
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
	p := 4 + side
	if h.crc {
		p += 2
	}
	if len(f) >= 4+32+4 && string(f[36:40]) == "VBRI" {
		return x, true
	}
	if len(f) < p+8 || (string(f[p:p+4]) != "Xing" && string(f[p:p+4]) != "Info") {
		return x, false
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

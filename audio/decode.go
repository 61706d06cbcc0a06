package audio

// Compressed input: FLAC, MP3 and Ogg Vorbis, as the reference reads them
// through sphn (symphonia).
//
// The format is told by the content, never by the file name: "RIFF" / "RF64"
// / "BW64" → WAV (wav.go), "fLaC" → FLAC, "OggS" with a Vorbis identification
// header → Ogg Vorbis, an ID3v2 tag or an MPEG-1/2/2.5 layer III frame header
// → MP3. Ogg Opus and Ogg FLAC are recognised and refused with a message that
// says so and how to convert.
//
// Decoders, chosen after checking each candidate's upkeep, open bug reports
// and output against ffmpeg's decoding of the same files (the tests under
// testdata/audio/, made by scripts/make_audio_fixtures.sh):
//   - FLAC: github.com/mewkiz/flac (maintained, releases through 2025, its
//     own test suite runs the reference libFLAC test vectors). Decoded
//     samples equal ffmpeg's bit for bit (16- and 24-bit tested).
//   - MP3: github.com/hajimehoshi/go-mp3 (the decoder of the Ebitengine game
//     engine, maintained by its author). It has had index-out-of-range panics
//     on corrupt input reported and fixed over the years, so every call into
//     it runs under recover (see guard). It always yields 16-bit stereo and
//     does not apply the encoder delay / padding of the LAME/Xing header;
//     mp3.go parses that header and trims as ffmpeg does (gapless), and takes
//     the left channel of mono files. Measured against ffmpeg's float
//     decoder: max abs difference 3.9e-5 (16-bit output rounding), SNR 73 dB.
//   - Ogg Vorbis: github.com/jfreymuth/oggvorbis (pure Go, used by Ebitengine
//     too; small and stable, last release v1.0.5). Max abs difference from
//     ffmpeg's decoding 1.5e-7. It ends the stream at the last page's granule
//     position (the encoded length); Debian 12's ffmpeg 5.1 returns the whole
//     last block instead (96 / 80 samples more on the fixtures): the tests
//     compare the common length and check ours is the encoded one.
//   - Opus: not read. The pure-Go Opus decoders found (github.com/pion/opus:
//     SILK only, no CELT, so most files fail; and one-author projects with
//     no release history) are not ones to rely on; Opus input gets an error
//     naming the ffmpeg command that converts it.
//
// Bounds: a compressed file can expand a thousandfold (a FLAC frame of a
// constant signal is a few bytes for 65535 samples), so nothing is allocated
// from a length the file declares; samples are appended as decoded and the
// total is capped at maxDecodedSamples. Every decoder error, panic or
// overrun becomes a one-line FormatError naming the file.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// maxDecodedSamples caps the samples (all channels together) a compressed
// file may decode to: 2^28 float32 samples are 1 GiB, 3.1 hours of 24 kHz
// mono or 46 minutes of 48 kHz stereo. A variable so tests can lower it.
var maxDecodedSamples int64 = 1 << 28

// sniffLen is how many leading bytes detection looks at.
const sniffLen = 64

// kind is a detected container/codec.
type kind int

const (
	kindUnknown kind = iota
	kindWAV
	kindFLAC
	kindMP3
	kindVorbis
	kindOpus
	kindOggFLAC
	kindOggOther
	kindMPEGOther // MPEG audio layer I or II
)

// sniff tells the format from the first bytes of a file.
func sniff(b []byte) kind {
	switch {
	case len(b) >= 4 && (string(b[:4]) == "RIFF" || string(b[:4]) == "RF64" || string(b[:4]) == "BW64" || string(b[:4]) == "RIFX"):
		return kindWAV
	case len(b) >= 4 && string(b[:4]) == "fLaC":
		return kindFLAC
	case len(b) >= 4 && string(b[:4]) == "OggS":
		// The first page holds the codec's identification packet.
		if len(b) < 27 {
			return kindOggOther
		}
		nseg := int(b[26])
		p := b[min(len(b), 27+nseg):]
		switch {
		case bytes.HasPrefix(p, []byte("\x01vorbis")):
			return kindVorbis
		case bytes.HasPrefix(p, []byte("OpusHead")):
			return kindOpus
		case bytes.HasPrefix(p, []byte("\x7fFLAC")):
			return kindOggFLAC
		}
		return kindOggOther
	case len(b) >= 3 && string(b[:3]) == "ID3":
		return kindMP3 // an ID3v2 tag: MP3 follows (checked by the decoder)
	}
	if h, ok := parseMPEGHeader(b); ok {
		if h.layer == 3 {
			return kindMP3
		}
		return kindMPEGOther
	}
	return kindUnknown
}

// DecodeReaderAt decodes an audio file of the given size read through r
// (any format Read takes); name is used in error messages.
func DecodeReaderAt(r io.ReaderAt, size int64, name string) (*Clip, error) {
	head := make([]byte, min(size, sniffLen))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, formatErr(name, "reading header: %v", err)
	}
	k := sniff(head)
	if k == kindWAV || k == kindUnknown && size < 12 {
		return decodeWAV(r, size, name)
	}
	in := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16)
	switch k {
	case kindFLAC:
		return decodeFLAC(in, name)
	case kindMP3:
		return decodeMP3(r, size, name)
	case kindVorbis:
		return decodeVorbis(in, name)
	case kindOpus:
		return nil, formatErr(name, "Ogg Opus is not supported (no well-kept pure-Go Opus decoder); convert it: ffmpeg -i %s out.wav", name)
	case kindOggFLAC:
		return nil, formatErr(name, "Ogg FLAC is not supported (plain .flac is); convert it: ffmpeg -i %s out.flac", name)
	case kindOggOther:
		return nil, formatErr(name, "Ogg file without a Vorbis stream (only Ogg Vorbis is supported)")
	case kindMPEGOther:
		return nil, formatErr(name, "MPEG audio layer I/II is not supported (MP3, layer III, is)")
	}
	return nil, formatErr(name, "not a supported audio file (no WAV, FLAC, MP3 or Ogg Vorbis header)")
}

// guard turns a panic of a third-party decoder into a one-line error. It is
// deferred by each decoder wrapper with its named error result.
func guard(name, format string, err *error) {
	if r := recover(); r != nil {
		*err = formatErr(name, "corrupt %s data (the decoder failed: %s)", format, oneLine(fmt.Sprint(r)))
	}
}

// oneLine joins a message's lines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// sampleSink collects decoded samples per channel under the size cap.
type sampleSink struct {
	name, format string
	chans        [][]float32
	total        int64
}

func newSink(name, format string, channels int) *sampleSink {
	return &sampleSink{name: name, format: format, chans: make([][]float32, channels)}
}

// grow reserves n more frames; it fails past maxDecodedSamples.
func (s *sampleSink) grow(n int) error {
	s.total += int64(n) * int64(len(s.chans))
	if s.total > maxDecodedSamples {
		return formatErr(s.name, "%s data decodes to more than %d samples (the limit; cut or convert the file)", s.format, maxDecodedSamples)
	}
	return nil
}

func (s *sampleSink) clip(rate int) (*Clip, error) {
	if len(s.chans) == 0 || len(s.chans[0]) == 0 {
		return nil, formatErr(s.name, "%s stream has no audio samples", s.format)
	}
	return &Clip{SampleRate: rate, Channels: s.chans}, nil
}

// mpegHeader is the part of an MPEG audio frame header mp3.go needs.
type mpegHeader struct {
	version    int // 1, 2 or 25 (2.5)
	layer      int // 1, 2, 3
	crc        bool
	rate       int
	mono       bool
	frameBytes int
	samples    int // samples per channel per frame
}

var (
	mpegRates   = [3][3]int{{44100, 48000, 32000}, {22050, 24000, 16000}, {11025, 12000, 8000}}
	mpeg1L3Kbps = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}
	mpeg2L3Kbps = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0}
)

// parseMPEGHeader reads a 4-byte MPEG audio frame header.
func parseMPEGHeader(b []byte) (mpegHeader, bool) {
	var h mpegHeader
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return h, false
	}
	switch (b[1] >> 3) & 3 {
	case 0:
		h.version = 25
	case 2:
		h.version = 2
	case 3:
		h.version = 1
	default:
		return h, false
	}
	h.layer = 4 - int((b[1]>>1)&3)
	if h.layer == 4 {
		return h, false
	}
	h.crc = b[1]&1 == 0
	bi, ri := int(b[2]>>4), int((b[2]>>2)&3)
	if bi == 0 || bi == 15 || ri == 3 {
		return h, false
	}
	vi := map[int]int{1: 0, 2: 1, 25: 2}[h.version]
	h.rate = mpegRates[vi][ri]
	h.mono = b[3]>>6 == 3
	if h.layer == 3 {
		pad := int((b[2] >> 1) & 1)
		if h.version == 1 {
			h.samples = 1152
			h.frameBytes = 144*mpeg1L3Kbps[bi]*1000/h.rate + pad
		} else {
			h.samples = 576
			h.frameBytes = 72*mpeg2L3Kbps[bi]*1000/h.rate + pad
		}
	}
	return h, true
}

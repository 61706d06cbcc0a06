package audio

// Compressed input: FLAC, MP3 and Ogg Vorbis, as the reference reads them
// through sphn (symphonia).
//
// The format is told by the content, never by the file name: "RIFF" / "RF64"
// / "BW64" → WAV (wav.go), "fLaC" → FLAC, "OggS" with a Vorbis identification
// header → Ogg Vorbis, an ID3v2 tag or an MPEG-1/2/2.5 layer III frame header
// → MP3. Ogg Opus and Ogg FLAC are recognised and refused with a message that
// says so and how to convert. An ID3v2 tag is skipped and what follows it is
// told apart (decodeAfterID3): MP3 mostly, but taggers put one before FLAC
// too, and flac -d and ffmpeg read such files.
//
// Decoders, chosen after checking each candidate's upkeep, open bug reports
// and output against ffmpeg's decoding of the same files (the tests under
// testdata/audio/, made by scripts/make_audio_fixtures.sh):
//   - FLAC: pp-offline's own decoder (flac.go), the whole of RFC 9639;
//     it replaced github.com/mewkiz/flac, whose int32 samples cannot hold
//     the 33-bit side channel of 32-bit stereo, so it refused 32-bit files.
//     Decoded samples equal flac -d's bit for bit (4 to 32 bits, fixed and
//     variable block sizes, tested by TestCorpusFLAC and TestFLACHandBuilt),
//     2.4 times as fast as mewkiz/flac was (BenchmarkDecodeFLAC).
//   - MP3: pp-offline's own layer III decoder (audio/internal/mp3, driven
//     by mp3.go): MPEG-1, MPEG-2 and MPEG-2.5 (8 to 48 kHz), float output
//     with no 16-bit rounding. It replaced github.com/hajimehoshi/go-mp3
//     (archived in April 2023), which refused MPEG-2.5, mis-decoded
//     22.05 kHz at 32 kbit/s and rounded to 16 bits. mp3.go parses the
//     LAME/Xing header and trims as ffmpeg does (gapless), resynchronises
//     past junk and decodes a corrupt frame as silence. Measured against
//     lame --decode (TestCorpusMP3, every rate): SNR 87 dB, max abs
//     difference 3.2e-5 (lame's 16-bit output rounding).
//   - Ogg Vorbis: github.com/jfreymuth/vorbis (pure Go, the packet decoder
//     under jfreymuth/oggvorbis, which Ebitengine uses; small and stable),
//     with the Ogg layer, header validation, the length check and the
//     granule trimming ours (vorbis.go says why). Max abs difference from
//     ffmpeg's decoding 1.5e-7. The stream ends at the last page's granule
//     position (the encoded length); Debian 12's ffmpeg 5.1 returns the
//     whole last block instead (96 / 80 samples more on the fixtures): the
//     tests compare the common length and check ours is the encoded one.
//   - Opus: not read. The pure-Go Opus decoders found (github.com/pion/opus:
//     SILK only, no CELT, so most files fail; and one-author projects with
//     no release history) are not ones to rely on; Opus input gets an error
//     naming the ffmpeg command that converts it.
//
// Bounds: a compressed file can expand a thousandfold (a FLAC frame of a
// constant signal is a few bytes for 65535 samples), so the decoded length
// is bounded by the caller's Limits before it is allocated: against the
// length the header declares (FLAC STREAMINFO, the last Ogg page's granule
// position, the MP3 Xing frame count) up front, and against the samples as
// they are decoded. Storage is pre-sized from a declared length only after
// that length passed the limit, and otherwise grows by doubling capped at the
// limit. Every decoder error, panic or overrun becomes a one-line
// FormatError naming the file.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/pp-offline/pp-offline/audio/internal/mp3"
)

// DefaultMaxSamples is the decoded-size limit used when Limits.MaxSamples is
// 0: 2^28 float32 samples are 1 GiB, 3.1 hours of 24 kHz mono or 46 minutes
// of 48 kHz stereo.
const DefaultMaxSamples int64 = 1 << 28

// maxDecodedSamples is the limit in force when Limits.MaxSamples is 0 (a
// variable so tests can lower it).
var maxDecodedSamples = DefaultMaxSamples

// Limits bounds what decoding an input may allocate.
type Limits struct {
	// MaxSamples caps the float32 samples a decoded file may hold, all kept
	// channels together (ReadLimits keeps every channel, LoadMonoLimits the
	// first), and separately the resampled copy LoadMonoLimits makes; so
	// LoadMonoLimits holds at most 8·MaxSamples bytes of samples at once. A
	// file over the limit fails with a one-line error saying how long it is
	// and how long a file the limit allows. 0 means DefaultMaxSamples.
	MaxSamples int64
}

func (l Limits) maxSamples() int64 {
	if l.MaxSamples <= 0 {
		return maxDecodedSamples
	}
	return l.MaxSamples
}

// tooLong is the error for a file whose decoded length (frames per channel;
// at least that many when !exact) is over the limit.
func (l Limits) tooLong(name string, frames int64, exact bool, rate, channels int) error {
	lim := l.maxSamples()
	capFrames := lim / int64(max(channels, 1))
	what := fmt.Sprintf("decodes to %s at %d Hz, more than the %s", duration(frames, rate), rate, duration(capFrames, rate))
	if !exact {
		what = fmt.Sprintf("decodes to more than the %s at %d Hz", duration(capFrames, rate), rate)
	}
	return formatErr(name, "%s this job can hold (%s of samples); cut the file (ffmpeg -i %s -t %s out.wav) or give the job more memory",
		what, gib(lim*4), name, strconv.FormatFloat(math.Floor(float64(capFrames)/float64(max(rate, 1))*100)/100, 'f', -1, 64))
}

// duration renders frames at rate Hz as "2 h 47 min", "12 min 5 s", "35 s"
// or "0.25 s".
func duration(frames int64, rate int) string {
	if rate <= 0 {
		return fmt.Sprintf("%d samples", frames)
	}
	s := frames / int64(rate)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
	case s >= 60:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	case s >= 10:
		return fmt.Sprintf("%d s", s)
	}
	return fmt.Sprintf("%.2f s", float64(frames)/float64(rate))
}

// gib renders a byte count in GiB, MiB or KiB.
func gib(bytes int64) string {
	switch {
	case bytes >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(bytes)/(1<<30))
	case bytes >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", math.Ceil(float64(bytes)/(1<<10)))
}

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
	kindAIFF      // AIFF or AIFF-C (aiff.go)
	kindMP4       // ISO base media / QuickTime: .m4a, .mp4, .mov (AAC, ALAC)
	kindMatroska  // Matroska / WebM
	kindADTS      // raw AAC in ADTS frames
	kindCAF       // Apple Core Audio Format
	kindAU        // Sun/NeXT .au
	kindASF       // ASF (WMA)
	kindID3       // an ID3v2 tag: what follows decides (decodeAfterID3)
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
		return kindID3
	case len(b) >= 12 && string(b[:4]) == "FORM" && (string(b[8:12]) == "AIFF" || string(b[8:12]) == "AIFC"):
		return kindAIFF
	case len(b) >= 8 && (string(b[4:8]) == "ftyp" || string(b[4:8]) == "moov" || string(b[4:8]) == "mdat" || string(b[4:8]) == "wide"):
		return kindMP4
	case len(b) >= 4 && string(b[:4]) == "\x1a\x45\xdf\xa3":
		return kindMatroska // EBML header
	case len(b) >= 4 && string(b[:4]) == "caff":
		return kindCAF
	case len(b) >= 4 && string(b[:4]) == ".snd":
		return kindAU
	case len(b) >= 16 && string(b[:16]) == "\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9\x00\xaa\x00\x62\xce\x6c":
		return kindASF
	case len(b) >= 7 && b[0] == 0xFF && b[1]&0xF6 == 0xF0 && (b[2]>>2)&0xF < 13 && int(b[3]&3)<<11|int(b[4])<<3|int(b[5]>>5) >= 7:
		// ADTS: 12-bit sync, layer 0, a valid sampling-frequency index and
		// a frame length of at least its 7-byte header.
		return kindADTS
	}
	if h, ok := parseMPEGHeader(b); ok {
		if h.layer == 3 {
			return kindMP3
		}
		return kindMPEGOther
	}
	if _, err := mp3.ParseHeader(b); errors.Is(err, mp3.ErrFreeFormat) {
		return kindMP3 // the decoder says it is free format, in one line
	}
	return kindUnknown
}

// SniffLen is how many leading bytes Sniff looks at.
const SniffLen = sniffLen

// kindNames name the formats for Sniff.
var kindNames = map[kind]string{
	kindWAV: "WAV", kindFLAC: "FLAC", kindMP3: "MP3", kindVorbis: "Ogg Vorbis", kindOpus: "Ogg Opus",
	kindOggFLAC: "Ogg FLAC", kindOggOther: "Ogg", kindMPEGOther: "MPEG audio layer I/II", kindAIFF: "AIFF",
	kindMP4: "MP4/M4A", kindMatroska: "Matroska/WebM", kindADTS: "AAC (ADTS)", kindCAF: "CAF", kindAU: "AU", kindASF: "ASF/WMA",
}

// Sniff names the format the reader takes a file starting with head for
// (its first SniffLen bytes, or all of a shorter file), natively or
// through ffmpeg; "" when it is no audio format the reader knows. It
// reads the content only, never a name, as the reader does.
func Sniff(head []byte) string {
	k := sniff(head)
	if k != kindID3 {
		return kindNames[k]
	}
	// What follows the tag, where head holds it; else MP3, the format that
	// an ID3v2 tag mostly leads (the reader checks when it decodes).
	if n, ok := id3Size(head); ok && n < int64(len(head)) && sniff(head[n:]) == kindFLAC {
		return "FLAC"
	}
	return "MP3"
}

// DecodeReaderAt decodes an audio file of the given size read through r
// (any format Read takes); name is used in error messages.
func DecodeReaderAt(r io.ReaderAt, size int64, name string) (*Clip, error) {
	return DecodeReaderAtLimits(r, size, name, Limits{})
}

// DecodeReaderAtLimits is DecodeReaderAt under lim.
func DecodeReaderAtLimits(r io.ReaderAt, size int64, name string, lim Limits) (*Clip, error) {
	return decodeAll(r, size, name, decodeOpts{lim: lim})
}

// decodeOpts is how one decoding runs: under lim, keeping every channel or
// (firstOnly) channel 0 alone, the others left nil.
type decodeOpts struct {
	lim       Limits
	firstOnly bool
}

// newClip allocates a clip of frames samples per channel (channel 0 only
// with firstOnly) at rate, after checking the kept samples against the
// limit: the decoders whose length is known before they decode (PCM AIFF,
// ADPCM) size it once.
func (o decodeOpts) newClip(name string, frames int64, rate, channels int) (*Clip, error) {
	kept := int64(channels)
	if o.firstOnly {
		kept = 1
	}
	if frames*kept > o.lim.maxSamples() {
		return nil, o.lim.tooLong(name, frames, true, rate, int(kept))
	}
	clip := &Clip{SampleRate: rate, Channels: make([][]float32, channels)}
	for c := range clip.Channels {
		if c == 0 || !o.firstOnly {
			clip.Channels[c] = make([]float32, frames)
		}
	}
	return clip, nil
}

func decodeAll(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	head := make([]byte, min(size, sniffLen))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, formatErr(name, "reading header: %v", err)
	}
	k := sniff(head)
	if k == kindWAV || k == kindUnknown && size < 12 {
		// PCM WAV samples are at most the file's bytes: decoding is bounded
		// by the file; the limit is checked on what it holds. ADPCM (two
		// samples a byte) checks it before allocating (adpcm.go).
		c, err := decodeWAVOpts(r, size, name, o)
		if err != nil {
			return nil, err
		}
		kept := int64(0)
		for _, ch := range c.Channels {
			if ch != nil {
				kept++
			}
		}
		if kept*int64(c.Frames()) > o.lim.maxSamples() {
			return nil, o.lim.tooLong(name, int64(c.Frames()), true, c.SampleRate, int(kept))
		}
		return c, nil
	}
	switch k {
	case kindID3:
		return decodeAfterID3(r, size, name, o)
	case kindFLAC:
		return decodeFLAC(r, size, name, o)
	case kindMP3:
		return decodeMP3(r, size, name, o)
	case kindVorbis:
		return decodeVorbis(r, size, name, o)
	case kindAIFF:
		return decodeAIFFAny(r, size, name, o) // aiff.go
	case kindOpus, kindOggFLAC, kindOggOther, kindMPEGOther, kindMP4, kindMatroska, kindADTS, kindCAF, kindAU, kindASF:
		return decodeFFmpegKind(r, size, name, k, o) // ffmpeg.go
	}
	return nil, formatErr(name, "not a supported audio file (no WAV, AIFF, FLAC, MP3, Ogg, MP4/M4A, Matroska/WebM or MPEG audio header)")
}

// decodeAfterID3 decodes a file that starts with ID3v2 tags. The tags are
// skipped, their sizes bounded by the file (skipID3), and what follows them
// is sniffed: a FLAC stream is decoded from there, exactly as without the
// tags (flac -d and ffmpeg skip them too); an MP3 frame header, or bytes
// of no format of their own (junk the MP3 decoder passes over before its
// first frame, or a sync pattern of another MPEG audio kind), go to the MP3
// decoder as before, whose error says what follows the tags if it finds no
// frame; any other format is refused, named.
func decodeAfterID3(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	off, err := skipID3(r, size, name)
	if err != nil {
		return nil, err
	}
	head := make([]byte, min(size-off, sniffLen))
	if _, err := r.ReadAt(head, off); err != nil && err != io.EOF {
		return nil, formatErr(name, "reading after the ID3 tag: %v", err)
	}
	switch k := sniff(head); k {
	case kindFLAC:
		return decodeFLAC(io.NewSectionReader(r, off, size-off), size-off, name, o)
	case kindMP3, kindUnknown, kindMPEGOther, kindADTS:
		return decodeMP3(r, size, name, o)
	case kindID3: // skipID3 stopped at a tag header cut off by the end of the file
		return nil, formatErr(name, "truncated ID3 tag: the file ends in its 10-byte header")
	default:
		return nil, formatErr(name, "an ID3 tag followed by %s data: not supported; remove the tag or convert the file: ffmpeg -i %s -c:a pcm_f32le out.wav", afterID3Name(k), shellQuote(name))
	}
}

// afterID3Name names a kind found after an ID3 tag, for messages.
func afterID3Name(k kind) string {
	if k == kindMPEGOther {
		return "MPEG audio layer I/II"
	}
	return kindNames[k]
}

// afterID3 says what the bytes after the ID3 tags are (head, the first of
// them, rest of them in all), for the MP3 decoder's error when it finds no
// frame there.
func afterID3(head []byte, rest int64) string {
	if rest == 0 {
		return "nothing (the file ends with the tag)"
	}
	if k := sniff(head); k != kindUnknown && k != kindMP3 {
		return afterID3Name(k) + " data"
	}
	return fmt.Sprintf("%d bytes of no known format (starting % x)", rest, head[:min(len(head), 8)])
}

// ReadLimits is Read under lim.
func ReadLimits(path string, lim Limits) (*Clip, error) {
	return readLimits(path, decodeOpts{lim: lim})
}

// LoadMonoLimits is LoadMonoContext under lim: the decoded file (its first
// channel) and its copy resampled to rate are each held to lim.MaxSamples
// samples, checked before either is allocated where the file declares its
// length.
func LoadMonoLimits(ctx context.Context, path string, rate int, lim Limits) ([]float32, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("%s: invalid target sample rate %d", path, rate)
	}
	c, err := readLimits(path, decodeOpts{lim: lim, firstOnly: true})
	if err != nil {
		return nil, err
	}
	if c.SampleRate < MinRate || c.SampleRate > MaxRate {
		return nil, fmt.Errorf("%s: sample rate %d Hz is not an audio rate (%d..%d Hz)", path, c.SampleRate, MinRate, MaxRate)
	}
	if out := (int64(c.Frames())*int64(rate) + int64(c.SampleRate) - 1) / int64(c.SampleRate); out > lim.maxSamples() {
		return nil, lim.tooLong(path, out, true, rate, 1)
	}
	out, err := ResampleContext(ctx, c.Channels[0], c.SampleRate, rate)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// readLimits opens path as Read does and decodes it with o.
func readLimits(path string, o decodeOpts) (*Clip, error) {
	// Before opening: opening a named pipe waits for a writer (a run would
	// hang), and a pipe or a device has no size to read audio from.
	if st, err := os.Stat(path); err == nil {
		switch m := st.Mode(); {
		case m.IsDir():
			return nil, formatErr(path, "is a directory, not an audio file")
		case m&os.ModeNamedPipe != 0:
			return nil, formatErr(path, "is a pipe, not a file: write the audio to a file first")
		case m&(os.ModeDevice|os.ModeCharDevice|os.ModeSocket) != 0:
			return nil, formatErr(path, "is a device, not an audio file")
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return decodeAll(f, st.Size(), path, o)
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

// sampleSink collects decoded samples per channel under the limit.
type sampleSink struct {
	name, format string
	rate         int
	lim          Limits
	chans        [][]float32 // nil for a channel not kept
	kept         int         // channels kept
	frames       int         // frames stored
	maxFrames    int64
}

// newSink makes the store for a stream of the given channels and rate.
// declared is the length in frames the header gives (0: unknown); past the
// limit it is refused here, under it the store is sized for it.
func newSink(name, format string, channels, rate int, declared int64, o decodeOpts) (*sampleSink, error) {
	s := &sampleSink{name: name, format: format, rate: rate, lim: o.lim, chans: make([][]float32, channels), kept: channels}
	if o.firstOnly {
		s.kept = 1
	}
	s.maxFrames = o.lim.maxSamples() / int64(s.kept)
	if declared > s.maxFrames {
		return nil, o.lim.tooLong(name, declared, true, rate, s.kept)
	}
	for c := 0; c < s.kept; c++ {
		s.chans[c] = make([]float32, 0, declared)
	}
	return s, nil
}

// next makes room for n more frames and returns them, one slice of n per
// channel (nil for a channel not kept) for the decoder to fill. It fails
// past the limit. The store grows by doubling, never past the limit.
func (s *sampleSink) next(n int) ([][]float32, error) {
	if int64(s.frames)+int64(n) > s.maxFrames {
		return nil, s.lim.tooLong(s.name, int64(s.frames)+int64(n), false, s.rate, s.kept)
	}
	end := s.frames + n
	if end > cap(s.chans[0]) {
		c := int(min(max(int64(2*cap(s.chans[0])), int64(end), 4096), s.maxFrames))
		for i := 0; i < s.kept; i++ {
			x := make([]float32, s.frames, c)
			copy(x, s.chans[i])
			s.chans[i] = x
		}
	}
	out := make([][]float32, len(s.chans))
	for i := 0; i < s.kept; i++ {
		s.chans[i] = s.chans[i][:end]
		out[i] = s.chans[i][s.frames:end]
	}
	s.frames = end
	return out, nil
}

// trim keeps frames [start, end) of what was decoded.
func (s *sampleSink) trim(start, end int) {
	end = max(min(end, s.frames), 0)
	start = max(min(start, end), 0)
	for i := 0; i < s.kept; i++ {
		s.chans[i] = s.chans[i][start:end]
	}
	s.frames = end - start
}

func (s *sampleSink) clip() (*Clip, error) {
	if s.frames == 0 {
		return nil, formatErr(s.name, "%s stream has no audio samples", s.format)
	}
	return &Clip{SampleRate: s.rate, Channels: s.chans}, nil
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

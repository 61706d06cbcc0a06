// Package audio reads audio files (WAV, FLAC, MP3, Ogg Vorbis; see
// decode.go), writes WAV files, resamples, and measures and normalises
// loudness the way the PersonaPlex reference does (sphn for I/O, pyloudnorm
// for the −24 LUFS voice-prompt normalisation).
//
// WAV reading: why this package parses RIFF itself instead of using
// github.com/go-audio/wav (named by the design card). go-audio/wav v1.1.0 was
// checked against the inputs users actually have and falls short in ways that
// would silently feed garbage to the model:
//   - IEEE-float files (format 3) come back as the raw bit patterns of the
//     float32 samples stored in ints, not as sample values;
//   - WAVE_FORMAT_EXTENSIBLE hides its sub-format GUID, so extensible float
//     cannot be told from extensible PCM;
//   - a truncated data chunk (header says more bytes than the file has) is
//     accepted and decoded short without an error, and 64-bit float is not
//     supported at all.
//
// Guarding each of those would mean re-reading the header ourselves anyway, so
// the reader below walks the RIFF chunks directly (about 400 lines, standard
// library only): 8/16/24/32-bit integer PCM, 32/64-bit float, 8-bit µ-law and
// A-law (G.711), extensible with a PCM, float, µ-law or A-law sub-format, any channel count, unknown chunks (LIST, fact,
// odd-sized chunks with their pad byte, …) skipped, RF64 for files over
// 4 GiB. Every malformed input is a one-line error that names the file. The
// RIFF size in the file header is not trusted (writers often leave it wrong);
// chunk sizes are: a chunk that claims more bytes than the file has is an
// error, except a data size of 0xFFFFFFFF, the "unknown length" marker of
// streaming writers, which means "to the end of the file".
//
// Sample conversion follows sphn (symphonia): integer PCM is divided by its
// full scale (8-bit unsigned (s−128)/128, 16-bit s/32768, 24-bit s/2^23,
// 32-bit s/2^31; samples narrower than their container are left-justified, so
// the container's full scale is used), floats are taken as they are (64-bit
// rounded to float32), µ-law and A-law are expanded to 16-bit linear with the
// G.711 tables (as ffmpeg and symphonia do) and divided by 32768.
package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Clip is decoded audio: one slice of samples per channel, all the same
// length, at SampleRate Hz.
type Clip struct {
	SampleRate int
	Channels   [][]float32
}

// Frames returns the number of samples per channel.
func (c *Clip) Frames() int {
	if c == nil || len(c.Channels) == 0 {
		return 0
	}
	return len(c.Channels[0])
}

// FormatError is returned for a file that is not a WAV file this package can
// read. Its message is one line and starts with the file name.
type FormatError struct {
	Name string // file name as given to Read / Decode
	Msg  string
}

func (e *FormatError) Error() string { return e.Name + ": " + e.Msg }

func formatErr(name, format string, args ...any) error {
	return &FormatError{Name: name, Msg: fmt.Sprintf(format, args...)}
}

// Read decodes the audio file at path: WAV, FLAC, MP3 or Ogg Vorbis, told
// apart by their content (see decode.go), not by the file name.
func Read(path string) (*Clip, error) { return readLimits(path, decodeOpts{}) }

// read is Read; firstOnly decodes channel 0 alone (the others are nil).
func read(path string, firstOnly bool) (*Clip, error) {
	return readLimits(path, decodeOpts{firstOnly: firstOnly})
}

// Decode decodes an audio file held in memory (any format Read takes); name
// is used in error messages.
func Decode(data []byte, name string) (*Clip, error) {
	return DecodeReaderAt(bytes.NewReader(data), int64(len(data)), name)
}

// LoadMono reads the audio file at path (any format Read takes) and returns its first channel resampled
// to rate Hz (unchanged when the file is already at rate), as the reference's
// load_audio + `sample[0:1]` does. See Resample for how the resampled samples
// differ from the reference's for other rates.
func LoadMono(path string, rate int) ([]float32, error) {
	return LoadMonoContext(context.Background(), path, rate)
}

// LoadMonoContext is LoadMono that stops resampling when ctx is cancelled
// (returning ctx.Err()).
func LoadMonoContext(ctx context.Context, path string, rate int) ([]float32, error) {
	return LoadMonoLimits(ctx, path, rate, Limits{})
}

// WAV format tags.
const (
	tagPCM        = 0x0001
	tagFloat      = 0x0003
	tagALaw       = 0x0006
	tagMuLaw      = 0x0007
	tagExtensible = 0xFFFE
)

// The 14 bytes that follow the 2-byte format code in a KSDATAFORMAT_SUBTYPE_*
// GUID (…-0000-0010-8000-00AA00389B71).
var subtypeSuffix = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

var knownTags = map[uint16]string{
	0x0002: "Microsoft ADPCM",
	0x0006: "A-law",
	0x0007: "µ-law",
	0x0011: "IMA ADPCM",
	0x0031: "GSM 6.10",
	0x0050: "MPEG",
	0x0055: "MPEG layer 3",
	0x0161: "WMA",
}

// wavFormat is the validated content of the fmt chunk.
type wavFormat struct {
	float      bool
	law        uint16 // tagMuLaw or tagALaw for G.711 data, else 0
	channels   int
	rate       int
	blockAlign int
	container  int  // bytes per sample in the data
	bigEndian  bool // AIFF: big-endian samples, 8-bit signed (aiff.go)
	// ADPCM (adpcm.go): tagIMAADPCM or tagMSADPCM, else 0.
	adpcm           uint16
	samplesPerBlock int
}

func parseFmt(b []byte, name string) (*wavFormat, error) {
	if len(b) < 16 {
		return nil, formatErr(name, "fmt chunk is %d bytes, need at least 16", len(b))
	}
	le := binary.LittleEndian
	tag := le.Uint16(b[0:])
	channels := int(le.Uint16(b[2:]))
	rate := le.Uint32(b[4:])
	blockAlign := int(le.Uint16(b[12:]))
	bits := int(le.Uint16(b[14:]))
	validBits := bits
	if tag == tagExtensible {
		if len(b) < 40 || le.Uint16(b[16:]) < 22 {
			return nil, formatErr(name, "WAVE_FORMAT_EXTENSIBLE fmt chunk is too short (%d bytes, need 40)", len(b))
		}
		validBits = int(le.Uint16(b[18:]))
		guid := b[24:40]
		if !bytes.Equal(guid[2:], subtypeSuffix) {
			return nil, formatErr(name, "unsupported WAVE_FORMAT_EXTENSIBLE sub-format %s", guidString(guid))
		}
		tag = le.Uint16(guid[0:])
		if tag != tagPCM && tag != tagFloat && tag != tagALaw && tag != tagMuLaw {
			return nil, formatErr(name, "unsupported WAVE_FORMAT_EXTENSIBLE sub-format %s (%s)", guidString(guid), tagName(tag))
		}
		if validBits == 0 {
			validBits = bits
		}
	}
	if (tag == tagIMAADPCM || tag == tagMSADPCM) && channels != 0 && rate != 0 && rate <= math.MaxInt32 {
		return parseADPCMFmt(b, tag, channels, int(rate), blockAlign, bits, name)
	}
	if tag != tagPCM && tag != tagFloat && tag != tagALaw && tag != tagMuLaw {
		return nil, formatErr(name, "unsupported WAV encoding %s; convert it to PCM or float", tagName(tag))
	}
	if channels == 0 {
		return nil, formatErr(name, "fmt chunk declares zero channels")
	}
	if rate == 0 {
		return nil, formatErr(name, "fmt chunk declares a zero sample rate")
	}
	if rate > math.MaxInt32 {
		return nil, formatErr(name, "implausible sample rate %d Hz", rate)
	}
	if bits == 0 {
		return nil, formatErr(name, "fmt chunk declares 0 bits per sample")
	}
	container := (bits + 7) / 8
	f := &wavFormat{float: tag == tagFloat, channels: channels, rate: int(rate), blockAlign: blockAlign, container: container}
	if tag == tagALaw || tag == tagMuLaw {
		if bits != 8 {
			return nil, formatErr(name, "unsupported %s sample size: %d bits (want 8)", knownTags[tag], bits)
		}
		f.law = tag
	} else if f.float {
		if bits != 32 && bits != 64 {
			return nil, formatErr(name, "unsupported float sample size: %d bits (want 32 or 64)", bits)
		}
	} else if container > 4 {
		return nil, formatErr(name, "unsupported PCM sample size: %d bits (want 8, 16, 24 or 32)", bits)
	}
	if validBits > bits {
		return nil, formatErr(name, "valid bits per sample (%d) exceed the container size (%d bits)", validBits, bits)
	}
	if blockAlign != channels*container {
		return nil, formatErr(name, "block align %d does not match %d channel(s) × %d byte(s) per sample", blockAlign, channels, container)
	}
	return f, nil
}

func tagName(tag uint16) string {
	switch tag {
	case tagPCM:
		return "PCM (format 0x0001)"
	case tagFloat:
		return "IEEE float (format 0x0003)"
	}
	if n, ok := knownTags[tag]; ok {
		return fmt.Sprintf("%s (format 0x%04X)", n, tag)
	}
	return fmt.Sprintf("format 0x%04X", tag)
}

func guidString(g []byte) string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", le.Uint32(g[0:]), le.Uint16(g[4:]), le.Uint16(g[6:]), g[8:10], g[10:16])
}

// printableID renders a chunk id for an error message.
func printableID(id []byte) string {
	for _, c := range id {
		if c < 0x20 || c > 0x7E {
			return fmt.Sprintf("0x%X", id)
		}
	}
	return fmt.Sprintf("%q", string(id))
}

// decodeWAVOpts decodes a WAV file of the given size read through r (name is
// used in error messages) under o: o.firstOnly decodes channel 0 alone (the
// others are left nil), so that a 64-channel file costs one channel's memory
// where only the first is used. PCM, float and G.711 hold at most one sample
// per byte of the file; ADPCM, which holds two, is checked against o's limit
// before anything is allocated.
func decodeWAVOpts(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	firstOnly := o.firstOnly
	var hdr [12]byte
	if size < 12 {
		return nil, formatErr(name, "not a WAV file (only %d bytes)", size)
	}
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, formatErr(name, "reading header: %v", err)
	}
	rf64 := false
	switch string(hdr[0:4]) {
	case "RIFF":
	case "RF64", "BW64":
		rf64 = true
	case "RIFX":
		return nil, formatErr(name, "big-endian (RIFX) WAV is not supported")
	default:
		return nil, formatErr(name, "not a WAV file (no RIFF header)")
	}
	if string(hdr[8:12]) != "WAVE" {
		return nil, formatErr(name, "not a WAV file (RIFF type %s, want \"WAVE\")", printableID(hdr[8:12]))
	}

	le := binary.LittleEndian
	var (
		format   *wavFormat
		dataOff  int64 = -1
		dataSize int64
		ds64Data int64 = -1
		off      int64 = 12
		ch       [8]byte
	)
	for {
		if off+8 > size {
			break
		}
		if _, err := r.ReadAt(ch[:], off); err != nil {
			return nil, formatErr(name, "reading chunk header at offset %d: %v", off, err)
		}
		id := string(ch[0:4])
		csize := int64(le.Uint32(ch[4:]))
		body := off + 8
		left := size - body
		switch id {
		case "data":
			dataOff = body
			dataSize = csize
			if rf64 && csize == 0xFFFFFFFF && ds64Data >= 0 {
				dataSize = ds64Data
			}
			if dataSize == 0xFFFFFFFF && !rf64 {
				// "Length unknown" marker left by streaming writers that
				// could not seek back: the data runs to the end of the file.
				dataSize = left
			}
			if dataSize > left {
				return nil, formatErr(name, "truncated data chunk: header says %d bytes, file has %d", dataSize, left)
			}
		case "fmt ":
			if format != nil {
				return nil, formatErr(name, "more than one fmt chunk")
			}
			if csize > left {
				return nil, formatErr(name, "fmt chunk at offset %d claims %d bytes, only %d left in the file", off, csize, left)
			}
			if csize > 1<<16 {
				return nil, formatErr(name, "implausible fmt chunk size %d", csize)
			}
			b := make([]byte, csize)
			if _, err := r.ReadAt(b, body); err != nil {
				return nil, formatErr(name, "reading fmt chunk: %v", err)
			}
			f, err := parseFmt(b, name)
			if err != nil {
				return nil, err
			}
			format = f
		case "ds64":
			if !rf64 {
				break
			}
			if csize < 24 || csize > left {
				return nil, formatErr(name, "bad ds64 chunk (size %d, %d bytes left)", csize, left)
			}
			var b [24]byte
			if _, err := r.ReadAt(b[:], body); err != nil {
				return nil, formatErr(name, "reading ds64 chunk: %v", err)
			}
			ds := le.Uint64(b[8:])
			if ds > math.MaxInt64 {
				return nil, formatErr(name, "implausible RF64 data size %d", ds)
			}
			ds64Data = int64(ds)
		default:
			if csize > left {
				return nil, formatErr(name, "chunk %s at offset %d claims %d bytes, only %d left in the file", printableID(ch[0:4]), off, csize, left)
			}
		}
		if dataOff >= 0 && format != nil {
			break
		}
		if id == "data" {
			csize = dataSize
		}
		// Chunks are padded to an even size.
		off = body + csize + csize&1
	}
	if format == nil {
		if dataOff >= 0 {
			return nil, formatErr(name, "no fmt chunk")
		}
		return nil, formatErr(name, "no fmt chunk and no data chunk")
	}
	if dataOff < 0 {
		return nil, formatErr(name, "no data chunk")
	}

	if format.adpcm != 0 {
		return decodeADPCM(r, dataOff, dataSize, format, name, o)
	}
	// A partial frame at the end of the data (its size not a multiple of the
	// block align) is dropped, as libsndfile and Python's wave module do.
	frames := dataSize / int64(format.blockAlign)
	if frames > math.MaxInt32 {
		return nil, formatErr(name, "too long: %d frames", frames)
	}
	clip := &Clip{SampleRate: format.rate, Channels: make([][]float32, format.channels)}
	for c := range clip.Channels {
		if c == 0 || !firstOnly {
			clip.Channels[c] = make([]float32, frames)
		}
	}
	if err := convert(r, dataOff, int(frames), format, clip.Channels); err != nil {
		return nil, formatErr(name, "reading samples: %v", err)
	}
	return clip, nil
}

// convert reads frames interleaved frames starting at off and de-interleaves
// them into chans as float32.
func convert(r io.ReaderAt, off int64, frames int, f *wavFormat, chans [][]float32) error {
	const chunkBytes = 1 << 16
	perChunk := chunkBytes / f.blockAlign
	if perChunk < 1 {
		perChunk = 1
	}
	buf := make([]byte, perChunk*f.blockAlign)
	nch := f.channels
	cs := f.container
	for start := 0; start < frames; start += perChunk {
		n := min(perChunk, frames-start)
		b := buf[:n*f.blockAlign]
		if _, err := r.ReadAt(b, off+int64(start)*int64(f.blockAlign)); err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		p := 0
		for i := 0; i < n; i++ {
			for c := 0; c < nch; c++ {
				if chans[c] == nil {
					p += cs
					continue
				}
				if f.law != 0 {
					chans[c][start+i] = lawSample(b[p], f.law)
				} else if f.bigEndian {
					chans[c][start+i] = sampleBE(b[p:p+cs], f.float)
				} else {
					chans[c][start+i] = sampleAt(b[p:p+cs], f.float)
				}
				p += cs
			}
		}
	}
	return nil
}

// sampleAt converts one little-endian sample of len(b) bytes.
func sampleAt(b []byte, float bool) float32 {
	le := binary.LittleEndian
	if float {
		if len(b) == 4 {
			return math.Float32frombits(le.Uint32(b))
		}
		return float32(math.Float64frombits(le.Uint64(b)))
	}
	switch len(b) {
	case 1:
		return (float32(b[0]) - 128) / 128
	case 2:
		return float32(int16(le.Uint16(b))) / 32768
	case 3:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float32(v) / (1 << 23)
	default:
		return float32(int32(le.Uint32(b))) / (1 << 31)
	}
}

// lawSample expands one G.711 byte (ITU-T G.711, as ffmpeg's pcm_alaw /
// pcm_mulaw and symphonia decode it) to linear 16-bit and scales by 1/32768.
func lawSample(b byte, law uint16) float32 {
	if law == tagMuLaw {
		return float32(ulawToLinear(b)) / 32768
	}
	return float32(alawToLinear(b)) / 32768
}

func ulawToLinear(u byte) int16 {
	u = ^u
	t := (int(u&0x0F) << 3) + 0x84
	t <<= (u & 0x70) >> 4
	if u&0x80 != 0 {
		return int16(0x84 - t)
	}
	return int16(t - 0x84)
}

func alawToLinear(a byte) int16 {
	a ^= 0x55
	t := int(a&0x0F) << 4
	seg := int(a&0x70) >> 4
	switch seg {
	case 0:
		t += 8
	case 1:
		t += 0x108
	default:
		t += 0x108
		t <<= seg - 1
	}
	if a&0x80 != 0 {
		return int16(t)
	}
	return int16(-t)
}

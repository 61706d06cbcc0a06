package audio

// AIFF and AIFF-C reading.
//
// Why not github.com/go-audio/aiff (the go-audio family named by the design
// card): v1.1.0 (May 2022, the last release) reads AIFF-C's compression type
// but decodes every file as big-endian integer PCM, so "sowt" (little-endian,
// what macOS writes), "fl32"/"fl64" floats and G.711 come out as garbage; it
// reads the 80-bit sample rate as an integer by truncation; and it allocates
// buffers of whatever size a chunk header claims (a 12-byte file can ask for
// 4 GiB). Guarding all of that means parsing the chunks ourselves, which is
// the small reader below (standard library only).
//
// Layout (Apple's "Audio Interchange File Format" 1.3 and AIFF-C draft):
// "FORM", a big-endian size (not trusted, as for WAV), "AIFF" or "AIFC",
// then chunks with big-endian 32-bit sizes padded to an even length. COMM
// gives channels, frames, sample size and the sample rate as an 80-bit IEEE
// extended float; AIFF-C adds a compression type. SSND holds an offset, a
// block size and the interleaved samples. Every chunk size is checked against
// the bytes left in the file before anything is read or allocated.
//
// Encodings read, as ffmpeg's aiff demuxer maps them: NONE / twos
// (big-endian signed integers, 1–32 bits, left-justified in whole bytes),
// sowt (16-bit little-endian), in24 / in32, raw (8-bit unsigned), fl32 /
// fl64 (big-endian IEEE floats), ulaw / alaw (G.711). Integers are divided by
// their container's full scale, 2^(8·bytes−1), as symphonia and ffmpeg do.
// Other AIFF-C codecs (ima4, MACE, GSM, QDesign, …) are compressed formats
// this package does not decode; they go to ffmpeg (ffmpeg.go).

import (
	"encoding/binary"
	"io"
	"math"
	"math/bits"
	"strings"
)

// aiffCodec is an AIFF-C compression type this reader decodes natively.
type aiffCodec struct {
	be, float bool
	law       uint16 // tagMuLaw / tagALaw
	unsigned  bool   // 8-bit unsigned ("raw ")
	bits      int    // fixed sample size; 0 = the COMM chunk's
}

var aiffCodecs = map[string]aiffCodec{
	"NONE": {be: true},
	"twos": {be: true},
	"sowt": {bits: 16},
	"in24": {be: true, bits: 24},
	"in32": {be: true, bits: 32},
	"raw ": {unsigned: true, bits: 8},
	"fl32": {be: true, float: true, bits: 32},
	"FL32": {be: true, float: true, bits: 32},
	"fl64": {be: true, float: true, bits: 64},
	"FL64": {be: true, float: true, bits: 64},
	"ulaw": {law: tagMuLaw, bits: 8},
	"ULAW": {law: tagMuLaw, bits: 8},
	"alaw": {law: tagALaw, bits: 8},
	"ALAW": {law: tagALaw, bits: 8},
}

// errAIFFCompressed is returned (wrapped in aiffCompressedError) for an
// AIFF-C file whose codec is not decoded here; the dispatcher hands the file
// to ffmpeg.
type aiffCompressedError struct{ codec string }

func (e *aiffCompressedError) Error() string { return "AIFF-C " + e.codec }

// extendedRate converts an 80-bit IEEE 754 extended float (sign, 15-bit
// exponent, 64-bit mantissa with an explicit integer bit) to a sample rate in
// Hz, rounding a fractional rate to the nearest integer (halves up) as
// ffmpeg's aiff demuxer does. ok is false for a negative, zero, infinite,
// NaN or out-of-range (over 2^31−1 Hz) value.
func extendedRate(b []byte) (rate int, ok bool) {
	se := binary.BigEndian.Uint16(b[0:])
	m := binary.BigEndian.Uint64(b[2:])
	if se&0x8000 != 0 || se&0x7FFF == 0x7FFF || m == 0 {
		return 0, false
	}
	// value = m · 2^e
	e := int(se&0x7FFF) - 16383 - 63
	var v uint64
	switch {
	case e >= 0:
		if e >= 64 || bits.LeadingZeros64(m) < e {
			return 0, false
		}
		v = m << e
	case e <= -65:
		return 0, false // below 0.5
	default:
		k := uint(-e)
		if k == 64 {
			v = m >> 63 // m / 2^64 rounded: 1 when m ≥ 2^63
		} else {
			v = m >> k
			if m&(1<<(k-1)) != 0 {
				v++
			}
		}
	}
	if v == 0 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// decodeAIFF decodes an AIFF or AIFF-C file of the given size read through
// r under o (o.firstOnly decodes channel 0 alone, the others left nil).
func decodeAIFF(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	var hdr [12]byte
	if size < 12 {
		return nil, formatErr(name, "not an AIFF file (only %d bytes)", size)
	}
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, formatErr(name, "reading header: %v", err)
	}
	if string(hdr[0:4]) != "FORM" {
		return nil, formatErr(name, "not an AIFF file (no FORM header)")
	}
	aifc := false
	switch string(hdr[8:12]) {
	case "AIFF":
	case "AIFC":
		aifc = true
	default:
		return nil, formatErr(name, "not an AIFF file (FORM type %s, want \"AIFF\" or \"AIFC\")", printableID(hdr[8:12]))
	}
	be := binary.BigEndian
	var (
		comm             []byte
		dataOff, dataLen int64 = -1, 0
		off              int64 = 12
		ch               [8]byte
	)
	for off+8 <= size && (comm == nil || dataOff < 0) {
		if _, err := r.ReadAt(ch[:], off); err != nil {
			return nil, formatErr(name, "reading chunk header at offset %d: %v", off, err)
		}
		id := string(ch[0:4])
		csize := int64(be.Uint32(ch[4:]))
		body := off + 8
		left := size - body
		if csize > left {
			if id == "SSND" {
				return nil, formatErr(name, "truncated SSND chunk: header says %d bytes, file has %d", csize, left)
			}
			return nil, formatErr(name, "chunk %s at offset %d claims %d bytes, only %d left in the file", printableID(ch[0:4]), off, csize, left)
		}
		switch id {
		case "COMM":
			if comm != nil {
				return nil, formatErr(name, "more than one COMM chunk")
			}
			if csize > 1<<16 {
				return nil, formatErr(name, "implausible COMM chunk size %d", csize)
			}
			comm = make([]byte, csize)
			if _, err := r.ReadAt(comm, body); err != nil {
				return nil, formatErr(name, "reading COMM chunk: %v", err)
			}
		case "SSND":
			if dataOff >= 0 {
				return nil, formatErr(name, "more than one SSND chunk")
			}
			if csize < 8 {
				return nil, formatErr(name, "SSND chunk is %d bytes, need at least 8", csize)
			}
			var b [8]byte
			if _, err := r.ReadAt(b[:], body); err != nil {
				return nil, formatErr(name, "reading SSND chunk: %v", err)
			}
			o := int64(be.Uint32(b[0:]))
			if o > csize-8 {
				return nil, formatErr(name, "SSND data offset %d is past the chunk's %d bytes", o, csize-8)
			}
			dataOff, dataLen = body+8+o, csize-8-o
		}
		off = body + csize + csize&1
	}
	if comm == nil {
		return nil, formatErr(name, "no COMM chunk")
	}
	f, frames, err := parseCOMM(comm, aifc, name)
	if err != nil {
		return nil, err
	}
	if dataOff < 0 {
		if frames == 0 { // the spec allows an empty file without SSND
			return &Clip{SampleRate: f.rate, Channels: make([][]float32, f.channels)}, nil
		}
		return nil, formatErr(name, "no SSND chunk")
	}
	// The COMM frame count is the length; the SSND chunk must hold it (more
	// bytes are padding).
	if have := dataLen / int64(f.blockAlign); have < frames {
		return nil, formatErr(name, "truncated SSND chunk: COMM says %d frames, the data holds %d", frames, have)
	}
	clip, err := o.newClip(name, frames, f.rate, f.channels)
	if err != nil {
		return nil, err
	}
	if err := convert(r, dataOff, int(frames), f, clip.Channels); err != nil {
		return nil, formatErr(name, "reading samples: %v", err)
	}
	return clip, nil
}

// parseCOMM validates a COMM chunk and returns the sample layout and the
// frame count.
func parseCOMM(b []byte, aifc bool, name string) (*wavFormat, int64, error) {
	need := 18
	if aifc {
		need = 22
	}
	if len(b) < need {
		return nil, 0, formatErr(name, "COMM chunk is %d bytes, need at least %d", len(b), need)
	}
	be := binary.BigEndian
	channels := int(int16(be.Uint16(b[0:])))
	frames := int64(be.Uint32(b[2:]))
	sbits := int(int16(be.Uint16(b[6:])))
	rate, ok := extendedRate(b[8:18])
	if !ok {
		return nil, 0, formatErr(name, "implausible sample rate (80-bit value %X)", b[8:18])
	}
	codec := aiffCodecs["NONE"]
	if aifc {
		c, ok := aiffCodecs[string(b[18:22])]
		if !ok {
			desc := printableID(b[18:22])
			if len(b) > 22 && int(b[22]) <= len(b)-23 && b[22] > 0 {
				desc += " (" + strings.TrimSpace(oneLine(string(b[23:23+int(b[22])]))) + ")"
			}
			return nil, 0, &aiffCompressedError{codec: desc}
		}
		codec = c
	}
	if channels <= 0 {
		return nil, 0, formatErr(name, "COMM chunk declares %d channels", channels)
	}
	if codec.bits != 0 {
		// A fixed-size codec: COMM's sample size is informational (µ-law
		// files often say 16); sowt must say 16.
		if codec.law == 0 && !codec.unsigned && sbits != codec.bits {
			return nil, 0, formatErr(name, "AIFF-C %q with %d-bit samples is not supported (want %d)", string(b[18:22]), sbits, codec.bits)
		}
		sbits = codec.bits
	}
	if sbits < 1 || sbits > 32 && !codec.float {
		return nil, 0, formatErr(name, "unsupported AIFF sample size: %d bits (want 1 to 32)", sbits)
	}
	container := (sbits + 7) / 8
	f := &wavFormat{
		float: codec.float, law: codec.law, channels: channels, rate: rate,
		blockAlign: channels * container, container: container,
		bigEndian: codec.be,
	}
	return f, frames, nil
}

// sampleBE converts one big-endian sample of len(b) bytes (8-bit signed, as
// AIFF's 8-bit samples are).
func sampleBE(b []byte, float bool) float32 {
	be := binary.BigEndian
	if float {
		if len(b) == 4 {
			return math.Float32frombits(be.Uint32(b))
		}
		return float32(math.Float64frombits(be.Uint64(b)))
	}
	switch len(b) {
	case 1:
		return float32(int8(b[0])) / 128
	case 2:
		return float32(int16(be.Uint16(b))) / 32768
	case 3:
		v := int32(uint32(b[2])<<8|uint32(b[1])<<16|uint32(b[0])<<24) >> 8
		return float32(v) / (1 << 23)
	default:
		return float32(int32(be.Uint32(b))) / (1 << 31)
	}
}

// decodeAIFFAny decodes an AIFF or AIFF-C file, handing an AIFF-C codec
// this package does not decode (ima4, MACE, …) to ffmpeg.
func decodeAIFFAny(r io.ReaderAt, size int64, name string, o decodeOpts) (*Clip, error) {
	c, err := decodeAIFF(r, size, name, o)
	if e, ok := err.(*aiffCompressedError); ok {
		return decodeFFmpeg(r, size, name, "AIFF-C "+e.codec, o)
	}
	return c, err
}

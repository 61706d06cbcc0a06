package audio

// IMA ADPCM (WAVE_FORMAT_IMA_ADPCM, 0x0011) and Microsoft ADPCM
// (WAVE_FORMAT_ADPCM, 0x0002) in WAV.
//
// Both are small integer algorithms with no library worth a dependency; the
// decoders below follow the format definitions (Microsoft's "Multimedia
// Standards Update" 1994, the IMA's "Recommended Practices for Enhancing
// Digital Audio Compatibility" 1992) and are checked bit for bit against
// ffmpeg's adpcm_ima_wav and adpcm_ms decoders on files ffmpeg encodes
// (adpcm_test.go). Where the two documents leave a choice, ffmpeg's is taken:
//   - IMA: the difference is computed as ((2·|code|+1)·step) >> 3 in one
//     multiplication (the IMA text adds step>>3, step>>2, … term by term,
//     which rounds differently in the last bit); the block header's step
//     index is read as a signed 16-bit word (the reserved byte must be 0)
//     and must be 0..88.
//   - MS: the prediction is (s1·c1 + s2·c2) / 256 truncated toward zero
//     (ffmpeg keeps the coefficients divided by 4 and divides by 64: the
//     same integers), the
//     adaptive delta is floored at 16; the seven standard coefficient pairs
//     are used (a file that declares others is refused, where ffmpeg would
//     silently ignore them).
//   - Mono and stereo only, for both: ffmpeg refuses more channels for
//     these codecs too, and the MS layout for them is not standard.
//
// Samples are 16-bit and divided by 32768. A block is blockAlign bytes and
// decodes to samplesPerBlock frames; the fmt chunk's samplesPerBlock must be
// the one its block align implies. A last, shorter block decodes to the
// frames its whole bytes hold (as ffmpeg does); one too short for its header
// is dropped. The length is checked against the caller's Limits before
// anything is allocated (the format expands every byte to two samples).

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// ADPCM format tags.
const (
	tagMSADPCM  = 0x0002
	tagIMAADPCM = 0x0011
)

var imaStep = [89]int32{
	7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45,
	50, 55, 60, 66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230,
	253, 279, 307, 337, 371, 408, 449, 494, 544, 598, 658, 724, 796, 876, 963,
	1060, 1166, 1282, 1411, 1552, 1707, 1878, 2066, 2272, 2499, 2749, 3024, 3327,
	3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845, 8630, 9493, 10442,
	11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794,
	32767,
}

var imaIndex = [16]int32{-1, -1, -1, -1, 2, 4, 6, 8, -1, -1, -1, -1, 2, 4, 6, 8}

var (
	msAdapt  = [16]int32{230, 230, 230, 230, 307, 409, 512, 614, 768, 614, 512, 409, 307, 230, 230, 230}
	msCoeff1 = [7]int32{256, 512, 0, 192, 240, 460, 392}
	msCoeff2 = [7]int32{0, -256, 0, 64, 0, -208, -232}
)

func clip16(v int32) int32 {
	return min(max(v, -32768), 32767)
}

// imaSamples is the frames a block (or a last, shorter one) of n bytes
// holds: the header's sample, then 8 per 4-byte word of each channel.
func imaSamples(n, channels int) int {
	if n < 4*channels {
		return 0
	}
	return 1 + (n-4*channels)/(4*channels)*8
}

// msSamples is the frames an MS ADPCM block of n bytes holds: the header's
// two samples, then one per nibble.
func msSamples(n, channels int) int {
	if n < 7*channels {
		return 0
	}
	return 2 + (n-7*channels)*2/channels
}

// parseADPCMFmt validates the fmt chunk of an ADPCM WAV.
func parseADPCMFmt(b []byte, tag uint16, channels, rate, blockAlign, bits int, name string) (*wavFormat, error) {
	le := binary.LittleEndian
	codec := knownTags[tag]
	if bits != 4 {
		return nil, formatErr(name, "unsupported %s sample size: %d bits (want 4)", codec, bits)
	}
	if channels > 2 {
		return nil, formatErr(name, "%s with %d channels is not supported (mono or stereo)", codec, channels)
	}
	var spb int
	switch tag {
	case tagIMAADPCM:
		if blockAlign < 8*channels || blockAlign%(4*channels) != 0 {
			return nil, formatErr(name, "%s block align %d is not a multiple of 4 bytes × %d channel(s) holding more than the header", codec, blockAlign, channels)
		}
		spb = imaSamples(blockAlign, channels)
	default:
		if blockAlign < 7*channels || (blockAlign-7*channels)*2%channels != 0 {
			return nil, formatErr(name, "%s block align %d does not fit %d channel(s)", codec, blockAlign, channels)
		}
		spb = msSamples(blockAlign, channels)
	}
	ext := 0
	if len(b) >= 18 {
		ext = min(int(le.Uint16(b[16:])), len(b)-18)
	}
	if ext >= 2 {
		if got := int(le.Uint16(b[18:])); got != spb {
			return nil, formatErr(name, "%s fmt chunk says %d samples per block; block align %d holds %d", codec, got, blockAlign, spb)
		}
	}
	if tag == tagMSADPCM && ext >= 4 {
		n := int(le.Uint16(b[20:]))
		if n < 7 || ext < 4+4*7 {
			return nil, formatErr(name, "%s fmt chunk declares %d coefficient pairs (want the 7 standard ones)", codec, n)
		}
		for i := 0; i < 7; i++ {
			c1, c2 := int32(int16(le.Uint16(b[22+4*i:]))), int32(int16(le.Uint16(b[24+4*i:])))
			if c1 != msCoeff1[i] || c2 != msCoeff2[i] {
				return nil, formatErr(name, "%s with non-standard coefficients (pair %d is %d, %d) is not supported", codec, i, c1, c2)
			}
		}
	}
	return &wavFormat{adpcm: tag, channels: channels, rate: rate, blockAlign: blockAlign, samplesPerBlock: spb}, nil
}

// decodeADPCM decodes dataSize bytes of ADPCM blocks at off into a clip;
// firstOnly keeps channel 0 alone.
func decodeADPCM(r io.ReaderAt, off, dataSize int64, f *wavFormat, name string, o decodeOpts) (*Clip, error) {
	codec := knownTags[f.adpcm]
	ba := int64(f.blockAlign)
	last := int(dataSize % ba)
	perBlock := imaSamples
	if f.adpcm == tagMSADPCM {
		perBlock = msSamples
	}
	frames := dataSize/ba*int64(f.samplesPerBlock) + int64(perBlock(last, f.channels))
	clip, err := o.newClip(name, frames, f.rate, f.channels)
	if err != nil {
		return nil, err
	}
	// A few blocks per read.
	per := max(1, (1<<16)/f.blockAlign)
	buf := make([]byte, per*f.blockAlign)
	pos := 0 // frames written
	for start := int64(0); start < dataSize; {
		n := min(int64(len(buf)), dataSize-start)
		b := buf[:n]
		if _, err := r.ReadAt(b, off+start); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, formatErr(name, "reading samples: %v", err)
		}
		for bo := start; len(b) > 0; bo += ba {
			blk := b[:min(len(b), f.blockAlign)]
			b = b[len(blk):]
			ns := perBlock(len(blk), f.channels)
			if ns == 0 {
				continue
			}
			var err error
			if f.adpcm == tagIMAADPCM {
				err = decodeIMABlock(blk, ns, clip.Channels, pos)
			} else {
				err = decodeMSBlock(blk, ns, clip.Channels, pos)
			}
			if err != nil {
				return nil, formatErr(name, "corrupt %s block at data byte %d: %v", codec, bo, err)
			}
			pos += ns
		}
		start += n
	}
	return clip, nil
}

// decodeIMABlock decodes one IMA ADPCM block of ns frames into chans from
// frame pos (nil channels are skipped).
func decodeIMABlock(blk []byte, ns int, chans [][]float32, pos int) error {
	nch := len(chans)
	le := binary.LittleEndian
	for c := 0; c < nch; c++ {
		pred := int32(int16(le.Uint16(blk[4*c:])))
		idx := int32(int16(le.Uint16(blk[4*c+2:])))
		if idx < 0 || idx > 88 {
			return errors.New("step index out of range")
		}
		out := chans[c]
		if out == nil {
			continue
		}
		out[pos] = float32(pred) / 32768
		// Channel c's words are every nch-th 4-byte word after the headers.
		for w := 0; w < (ns-1)/8; w++ {
			word := blk[4*nch+4*(w*nch+c):]
			for k := 0; k < 8; k++ {
				nib := int32(word[k/2]>>(4*(k&1))) & 0xF
				step := imaStep[idx]
				diff := ((2*(nib&7) + 1) * step) >> 3
				if nib&8 != 0 {
					pred -= diff
				} else {
					pred += diff
				}
				pred = clip16(pred)
				idx = min(max(idx+imaIndex[nib], 0), 88)
				out[pos+1+8*w+k] = float32(pred) / 32768
			}
		}
	}
	return nil
}

// msState is one channel's MS ADPCM decoder state.
type msState struct{ c1, c2, delta, s1, s2 int32 }

func (s *msState) next(nib int32) int32 {
	p := (s.s1*s.c1 + s.s2*s.c2) / 256
	signed := nib
	if nib&8 != 0 {
		signed -= 16
	}
	p += signed * s.delta
	s.s2, s.s1 = s.s1, clip16(p)
	s.delta = min(max((msAdapt[nib]*s.delta)>>8, 16), math.MaxInt32/768)
	return s.s1
}

// decodeMSBlock decodes one MS ADPCM block (mono or stereo) of ns frames.
func decodeMSBlock(blk []byte, ns int, chans [][]float32, pos int) error {
	nch := len(chans)
	le := binary.LittleEndian
	var st [2]msState
	for c := 0; c < nch; c++ {
		p := blk[c]
		if p > 6 {
			return errors.New("predictor index out of range")
		}
		st[c] = msState{
			c1:    msCoeff1[p],
			c2:    msCoeff2[p],
			delta: int32(int16(le.Uint16(blk[nch+2*c:]))),
			s1:    int32(int16(le.Uint16(blk[3*nch+2*c:]))),
			s2:    int32(int16(le.Uint16(blk[5*nch+2*c:]))),
		}
	}
	put := func(c, i int, v int32) {
		if chans[c] != nil {
			chans[c][pos+i] = float32(v) / 32768
		}
	}
	for c := 0; c < nch; c++ {
		put(c, 0, st[c].s2)
		put(c, 1, st[c].s1)
	}
	data := blk[7*nch:]
	if nch == 1 {
		for i := 0; i < (ns-2)/2; i++ {
			put(0, 2+2*i, st[0].next(int32(data[i]>>4)))
			put(0, 3+2*i, st[0].next(int32(data[i]&0xF)))
		}
	} else {
		for i := 0; i < ns-2; i++ {
			put(0, 2+i, st[0].next(int32(data[i]>>4)))
			put(1, 2+i, st[1].next(int32(data[i]&0xF)))
		}
	}
	return nil
}

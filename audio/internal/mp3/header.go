// Package mp3 decodes MPEG-1, MPEG-2 (LSF) and MPEG-2.5 audio layer III
// (ISO/IEC 11172-3 and 13818-3) to float samples in [-1, 1].
//
// The caller finds the frames (Header and FrameBytes say where each ends)
// and hands them to a Decoder one at a time, in stream order: the decoder
// keeps the bit reservoir, the IMDCT overlap and the synthesis filter bank's
// state between frames. Free-format streams (bitrate index 0) and layers I
// and II are not decoded.
package mp3

import (
	"errors"
	"fmt"
)

// Channel modes.
const (
	Stereo      = 0
	JointStereo = 1
	DualChannel = 2
	Mono        = 3
)

// Header is a layer III frame header.
type Header struct {
	Version    int // 1 (MPEG-1), 2 (MPEG-2 LSF) or 25 (MPEG-2.5)
	CRC        bool
	Kbps       int
	Rate       int // Hz
	Padding    bool
	Mode       int // Stereo, JointStereo, DualChannel, Mono
	ModeExt    int // joint stereo: bit 1 MS, bit 0 intensity
	FrameBytes int // the whole frame, header included
	Samples    int // per channel: 1152 (MPEG-1) or 576

	rateIndex int // 0 … 8 (44.1, 48, 32, 22.05, 24, 16, 11.025, 12, 8 kHz)
}

// Channels is 1 for a mono frame, else 2.
func (h Header) Channels() int {
	if h.Mode == Mono {
		return 1
	}
	return 2
}

// SideInfoBytes is the size of the frame's side information.
func (h Header) SideInfoBytes() int {
	switch {
	case h.Version == 1 && h.Mode == Mono:
		return 17
	case h.Version == 1:
		return 32
	case h.Mode == Mono:
		return 9
	}
	return 17
}

// mainDataBytes is what the frame holds after header, CRC and side info.
func (h Header) mainDataBytes() int {
	n := h.FrameBytes - 4 - h.SideInfoBytes()
	if h.CRC {
		n -= 2
	}
	return n
}

var (
	rates     = [3][3]int{{44100, 48000, 32000}, {22050, 24000, 16000}, {11025, 12000, 8000}}
	kbpsMPEG1 = [15]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	kbpsLSF   = [15]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
)

// Header errors. ErrFreeFormat and ErrNotLayer3 mark a valid MPEG audio
// header this package does not decode.
var (
	ErrNoSync     = errors.New("no frame sync")
	ErrFreeFormat = errors.New("free-format MP3 (bitrate index 0) is not supported")
	ErrNotLayer3  = errors.New("MPEG audio layer I or II, not layer III")
)

// ParseHeader reads the 4-byte frame header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return h, ErrNoSync
	}
	var vi int
	switch (b[1] >> 3) & 3 {
	case 0:
		h.Version, vi = 25, 2
	case 2:
		h.Version, vi = 2, 1
	case 3:
		h.Version, vi = 1, 0
	default:
		return h, fmt.Errorf("%w: reserved MPEG version", ErrNoSync)
	}
	switch (b[1] >> 1) & 3 {
	case 0:
		return h, fmt.Errorf("%w: reserved layer", ErrNoSync)
	case 1: // layer III
	default:
		return h, ErrNotLayer3
	}
	h.CRC = b[1]&1 == 0
	bi, ri := int(b[2]>>4), int((b[2]>>2)&3)
	if bi == 15 || ri == 3 {
		return h, fmt.Errorf("%w: reserved bitrate or sample rate", ErrNoSync)
	}
	if bi == 0 {
		return h, ErrFreeFormat
	}
	h.Rate = rates[vi][ri]
	h.rateIndex = 3*vi + ri
	h.Padding = b[2]&2 != 0
	h.Mode = int(b[3] >> 6)
	h.ModeExt = int(b[3]>>4) & 3
	pad := 0
	if h.Padding {
		pad = 1
	}
	if h.Version == 1 {
		h.Kbps = kbpsMPEG1[bi]
		h.Samples = 1152
		h.FrameBytes = 144*1000*h.Kbps/h.Rate + pad
	} else {
		h.Kbps = kbpsLSF[bi]
		h.Samples = 576
		h.FrameBytes = 72*1000*h.Kbps/h.Rate + pad
	}
	if h.mainDataBytes() < 0 {
		return h, fmt.Errorf("%w: a %d-byte frame cannot hold its side information", ErrNoSync, h.FrameBytes)
	}
	return h, nil
}

// SameStream reports whether o can belong to the stream whose frames have
// header h: the same version and sample rate (the fields a decoder keeps
// fixed when it looks for the next frame).
func (h Header) SameStream(o Header) bool {
	return h.Version == o.Version && h.Rate == o.Rate
}

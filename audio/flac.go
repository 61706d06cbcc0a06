package audio

import (
	"bytes"
	"errors"
	"io"
	"log"
	"sync"

	"github.com/mewkiz/flac"
)

// decodeFLAC decodes a native FLAC stream with github.com/mewkiz/flac (see
// decode.go for why that library). Integer samples of b bits are divided by
// 2^(b−1), as sphn (symphonia) and ffmpeg's float conversion do, so 16- and
// 24-bit FLAC decode to exactly the float32 values of the same WAV.
func decodeFLAC(r io.Reader, name string, o decodeOpts) (clip *Clip, err error) {
	quietFLACLog.Do(func() { log.SetOutput(&flacNagFilter{w: log.Writer()}) })
	defer guard(name, "FLAC", &err)
	st, err := flac.New(r)
	if err != nil {
		return nil, formatErr(name, "bad FLAC header: %s", oneLine(err.Error()))
	}
	info := st.Info
	if info.NChannels == 0 || info.SampleRate == 0 {
		return nil, formatErr(name, "bad FLAC header: %d channels at %d Hz", info.NChannels, info.SampleRate)
	}
	nch := int(info.NChannels)
	// STREAMINFO's total (0: unknown) is checked against the limit before
	// anything is decoded.
	declared := int64(min(info.NSamples, 1<<62))
	sink, err := newSink(name, "FLAC", nch, int(info.SampleRate), declared, o)
	if err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		fr, err := st.ParseNext()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, formatErr(name, "truncated FLAC stream (frame %d is cut off)", n)
			}
			return nil, formatErr(name, "corrupt FLAC frame %d: %s", n, oneLine(err.Error()))
		}
		if len(fr.Subframes) != nch {
			return nil, formatErr(name, "corrupt FLAC frame %d: %d channels, the stream has %d", n, len(fr.Subframes), nch)
		}
		if fr.SampleRate != 0 && fr.SampleRate != info.SampleRate {
			return nil, formatErr(name, "corrupt FLAC frame %d: sample rate %d Hz, the stream's is %d Hz", n, fr.SampleRate, info.SampleRate)
		}
		bps := fr.BitsPerSample
		if bps == 0 {
			bps = info.BitsPerSample
		}
		if bps < 4 || bps > 32 {
			return nil, formatErr(name, "corrupt FLAC frame %d: %d bits per sample", n, bps)
		}
		scale := 1 / float32(int64(1)<<(bps-1))
		bs := int(fr.BlockSize)
		for c, sf := range fr.Subframes {
			if len(sf.Samples) < bs {
				return nil, formatErr(name, "corrupt FLAC frame %d: channel %d has %d samples, want %d", n, c, len(sf.Samples), bs)
			}
		}
		if declared > 0 && int64(sink.frames+bs) > declared {
			return nil, formatErr(name, "corrupt FLAC stream: frame %d goes past the %d samples its header declares", n, declared)
		}
		dst, err := sink.next(bs)
		if err != nil {
			return nil, err
		}
		for c, sf := range fr.Subframes {
			if d := dst[c]; d != nil {
				for i, v := range sf.Samples[:bs] {
					d[i] = float32(v) * scale
				}
			}
		}
	}
	if declared != 0 && int64(sink.frames) < declared {
		return nil, formatErr(name, "truncated FLAC stream: header says %d samples, only %d decoded", declared, sink.frames)
	}
	return sink.clip()
}

// mewkiz/flac v1.0.14 prints, through the standard log package, a plea for
// test files on every frame at some sample rates (24 kHz among them: one line
// per FLAC frame of a PersonaPlex-rate file). Nothing else in pp-offline uses
// the standard logger; flacNagFilter drops those lines and passes every other
// one through.
var quietFLACLog sync.Once

type flacNagFilter struct{ w io.Writer }

var flacNag = []byte("The flac library test cases do not yet include")

func (f *flacNagFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, flacNag) {
		return len(p), nil
	}
	return f.w.Write(p)
}

package audio

import (
	"errors"
	"io"

	"github.com/jfreymuth/oggvorbis"
)

// decodeVorbis decodes Ogg Vorbis with github.com/jfreymuth/oggvorbis (see
// decode.go for why that library). Its float samples are taken as they are;
// the stream ends at the last page's granule position.
func decodeVorbis(r io.Reader, name string) (clip *Clip, err error) {
	defer guard(name, "Ogg Vorbis", &err)
	d, err := oggvorbis.NewReader(r)
	if err != nil {
		return nil, formatErr(name, "bad Ogg Vorbis header: %s", oneLine(err.Error()))
	}
	nch, rate := d.Channels(), d.SampleRate()
	if nch <= 0 || nch > 255 || rate <= 0 {
		return nil, formatErr(name, "bad Ogg Vorbis header: %d channels at %d Hz", nch, rate)
	}
	sink := newSink(name, "Ogg Vorbis", nch)
	buf := make([]float32, 4096*nch)
	for {
		n, rerr := d.Read(buf)
		frames := n / nch
		if err := sink.grow(frames); err != nil {
			return nil, err
		}
		for i := 0; i < frames; i++ {
			for c := 0; c < nch; c++ {
				sink.chans[c] = append(sink.chans[c], buf[i*nch+c])
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				return nil, formatErr(name, "truncated Ogg Vorbis stream (cut off after %d samples)", len(sink.chans[0]))
			}
			return nil, formatErr(name, "corrupt Ogg Vorbis data after %d samples: %s", len(sink.chans[0]), oneLine(rerr.Error()))
		}
	}
	return sink.clip(rate)
}

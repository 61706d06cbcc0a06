package audio

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// EncodePCM16 writes samples as a mono 16-bit PCM WAV exactly as sphn's
// write_wav does: a 44-byte header (RIFF <36+2n> WAVE, fmt chunk of 16 bytes:
// format 1, 1 channel, rate, byte rate 2·rate, block align 2, 16 bits; data
// <2n>) and each sample as int16(trunc(clamp(x, −1, 1)·32767)) computed in
// float32 (truncation toward zero, not rounding). NaN becomes 0, as Rust's
// saturating float-to-int cast makes it.
func EncodePCM16(w io.Writer, samples []float32, rate int) error {
	n := int64(len(samples))
	if err := checkHeader(n*2, 36, rate, 2); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var h [44]byte
	putHeader(h[:0], uint32(36+2*n), 1, 16, rate, 2, nil)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(2*n))
	if _, err := bw.Write(h[:]); err != nil {
		return err
	}
	var b [2]byte
	for _, x := range samples {
		binary.LittleEndian.PutUint16(b[:], uint16(pcm16(x)))
		if _, err := bw.Write(b[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// pcm16 is sphn's float → int16 conversion.
func pcm16(x float32) int16 {
	if x != x {
		return 0
	}
	if x > 1 {
		x = 1
	} else if x < -1 {
		x = -1
	}
	return int16(float32(x * 32767)) // |x·32767| ≤ 32767: the conversion truncates toward zero
}

// EncodeFloat32 writes samples losslessly as a mono 32-bit IEEE-float WAV
// (format 3, fmt chunk of 18 bytes with cbSize 0, a fact chunk with the frame
// count, then the data).
func EncodeFloat32(w io.Writer, samples []float32, rate int) error {
	n := int64(len(samples))
	// RIFF size: WAVE(4) + fmt(8+18) + fact(8+4) + data(8+4n).
	if err := checkHeader(n*4, 4+26+12+8, rate, 4); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	h := make([]byte, 0, 58)
	h = putHeader(h, uint32(4+26+12+8+4*n), 3, 32, rate, 4, []byte{0, 0})
	h = append(h, "fact"...)
	h = binary.LittleEndian.AppendUint32(h, 4)
	h = binary.LittleEndian.AppendUint32(h, uint32(n))
	h = append(h, "data"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(4*n))
	if _, err := bw.Write(h); err != nil {
		return err
	}
	var b [4]byte
	for _, x := range samples {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		if _, err := bw.Write(b[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func checkHeader(dataBytes, overhead int64, rate, bytesPerSample int) error {
	if rate <= 0 || int64(rate)*int64(bytesPerSample) > math.MaxUint32 {
		return fmt.Errorf("wav: invalid sample rate %d", rate)
	}
	if dataBytes+overhead > math.MaxUint32 {
		return fmt.Errorf("wav: %d bytes of samples do not fit in a WAV file (4 GiB limit)", dataBytes)
	}
	return nil
}

// putHeader appends RIFF <riffSize> WAVE and a mono fmt chunk (with ext
// appended to its 16 standard bytes) to h.
func putHeader(h []byte, riffSize uint32, tag uint16, bits int, rate, bytesPerSample int, ext []byte) []byte {
	le := binary.LittleEndian
	h = append(h, "RIFF"...)
	h = le.AppendUint32(h, riffSize)
	h = append(h, "WAVEfmt "...)
	h = le.AppendUint32(h, uint32(16+len(ext)))
	h = le.AppendUint16(h, tag)
	h = le.AppendUint16(h, 1)
	h = le.AppendUint32(h, uint32(rate))
	h = le.AppendUint32(h, uint32(rate*bytesPerSample))
	h = le.AppendUint16(h, uint16(bytesPerSample))
	h = le.AppendUint16(h, uint16(bits))
	return append(h, ext...)
}

// EncodeMix writes a conversation as a stereo 16-bit PCM WAV with a 44-byte
// header: user on the left, agent on the right (the same length). The
// agent's samples are converted as EncodePCM16 converts them (so the right
// channel equals the agent's WAV); the user's are rounded from x·32768, so
// that samples read from a 16-bit input come back exactly.
func EncodeMix(w io.Writer, user, agent []float32, rate int) error {
	if len(user) != len(agent) {
		return fmt.Errorf("wav: channels of different lengths (%d and %d)", len(user), len(agent))
	}
	n := int64(len(user))
	if err := checkHeader(n*4, 36, rate, 4); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	h := putHeader(make([]byte, 0, 44), uint32(36+4*n), 1, 16, rate, 4, nil)
	binary.LittleEndian.PutUint16(h[22:], 2) // channels
	h = append(h, "data"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(4*n))
	if _, err := bw.Write(h); err != nil {
		return err
	}
	var b [4]byte
	for i := range user {
		binary.LittleEndian.PutUint16(b[:], uint16(pcm16Round(user[i])))
		binary.LittleEndian.PutUint16(b[2:], uint16(pcm16(agent[i])))
		if _, err := bw.Write(b[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// pcm16Round is x·32768 rounded to the nearest int16 (clamped; NaN as 0):
// the inverse of reading a 16-bit sample as v/32768.
func pcm16Round(x float32) int16 {
	if x != x {
		return 0
	}
	v := math.Round(float64(x) * 32768)
	return int16(max(-32768, min(32767, v)))
}

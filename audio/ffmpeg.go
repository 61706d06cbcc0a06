package audio

// Formats with no well-kept pure-Go decoder go through ffmpeg, when it is on
// PATH.
//
// The reference reads its inputs through symphonia with every feature on,
// so it takes AAC and ALAC in MP4/M4A/MOV, MPEG layer I/II, Matroska/WebM
// and more. Pure-Go decoders for those are missing or not fit to rely on
// (no AAC-LC decoder with a release history; Opus: pion/opus is SILK only),
// so pp-offline recognises them by content (sniff) and decodes them by
// running
//
//	ffmpeg -nostdin -v error -i FILE -map 0:a:0 -vn -sn -dn -c:a pcm_f32le -f wav -
//
// and reading the 32-bit float WAV it writes to stdout. The original sample
// rate and channels are kept (no -ar / -ac), so ffmpeg only decodes: the
// channel choice and resampling are this package's own, as for the native
// formats, and a WAV or FLAC forced through this path gives the same samples
// as the native decoder (tested). The process is bounded:
//   - in time: it is killed (its whole process group, on Unix) past
//     ffmpegTimeout;
//   - in memory: stdout is read in blocks into the caller's sample store,
//     which refuses more than the Limits allow; past that ffmpeg is killed;
//     its stderr is kept to its first 4 KiB and reduced to one line for the
//     error;
//   - the input is the file itself (a descriptor handed to the child, so a
//     name starting with "-" or a file replaced meanwhile cannot confuse
//     it), or, for audio held in memory, stdin.
//
// Without ffmpeg on PATH such a file fails in one line naming the format and
// the command that converts it. The decoded samples are ffmpeg's, so they
// can change with ffmpeg's version (AAC and Opus decoders are float code);
// native formats never go through ffmpeg.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"time"
)

// ffmpegTimeout bounds one ffmpeg run (a variable so tests can lower it).
// Decoding runs at hundreds of times real time, so an hour of AAC takes
// seconds; five minutes is for a slow disk or a loaded machine.
var ffmpegTimeout = 5 * time.Minute

// ffmpegStderrMax is how much of ffmpeg's stderr is kept.
const ffmpegStderrMax = 4096

// kindFormat names a format that goes through ffmpeg, for messages.
func kindFormat(k kind) string {
	switch k {
	case kindOpus:
		return "Ogg Opus"
	case kindOggFLAC:
		return "Ogg FLAC"
	case kindOggOther:
		return "Ogg (no Vorbis stream)"
	case kindMPEGOther:
		return "MPEG audio layer I/II (MP1/MP2)"
	case kindMP4:
		return "MP4/M4A/MOV (AAC, ALAC)"
	case kindMatroska:
		return "Matroska/WebM"
	case kindADTS:
		return "AAC (ADTS)"
	case kindCAF:
		return "Core Audio Format (CAF)"
	case kindAU:
		return "Sun/NeXT .au"
	case kindASF:
		return "ASF/WMA"
	}
	return "this format"
}

// decodeFFmpegKind decodes a file of a kind sniff recognised that has no
// native decoder.
func decodeFFmpegKind(r io.ReaderAt, size int64, name string, k kind, o decodeOpts) (*Clip, error) {
	return decodeFFmpeg(r, size, name, kindFormat(k), o)
}

// decodeFFmpeg decodes the file through ffmpeg; format names it in errors.
func decodeFFmpeg(r io.ReaderAt, size int64, name, format string, o decodeOpts) (clip *Clip, err error) {
	bin, lerr := exec.LookPath("ffmpeg")
	if lerr != nil {
		return nil, formatErr(name, "%s is not read natively and ffmpeg is not on PATH: install ffmpeg (pp-offline uses it for this format), or convert the file: ffmpeg -i %s -c:a pcm_f32le out.wav", format, shellQuote(name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ffmpegTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	input := ffmpegInput(cmd, r, size)
	cmd.Args = append(cmd.Args, "-nostdin", "-v", "error", "-i", input,
		"-map", "0:a:0", "-vn", "-sn", "-dn", "-c:a", "pcm_f32le",
		"-fflags", "+bitexact", "-flags:a", "+bitexact", "-f", "wav", "-")
	killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	stderr := &capped{max: ffmpegStderrMax}
	cmd.Stderr = stderr
	out, perr := cmd.StdoutPipe()
	if perr != nil {
		return nil, formatErr(name, "running ffmpeg: %v", perr)
	}
	if err := cmd.Start(); err != nil {
		return nil, formatErr(name, "running ffmpeg (%s): %v", bin, err)
	}
	sink, rerr := readFFmpegWAV(bufio.NewReaderSize(out, 1<<16), name, format, o)
	if rerr != nil {
		cancel() // kills ffmpeg (and its group) if it still runs
	}
	werr := cmd.Wait()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, formatErr(name, "ffmpeg did not finish decoding %s within %v (killed)", format, ffmpegTimeout)
	case rerr != nil && isLimitErr(rerr):
		return nil, rerr
	case werr != nil || rerr != nil:
		// ffmpeg's own reason first: bad output follows from it.
		if msg := ffmpegLine(stderr.String(), input, name); msg != "" {
			return nil, formatErr(name, "ffmpeg could not decode it as %s: %s", format, msg)
		}
		if rerr != nil {
			return nil, rerr
		}
		return nil, formatErr(name, "ffmpeg could not decode it as %s: %s", format, oneLine(werr.Error()))
	}
	return sink.clip()
}

// ffmpegLimitErr marks errors found while reading ffmpeg's output that are the
// file's, not ffmpeg's (the size limit).
type ffmpegLimitErr struct{ err error }

func (e *ffmpegLimitErr) Error() string { return e.err.Error() }

func isLimitErr(err error) bool {
	var le *ffmpegLimitErr
	return errors.As(err, &le)
}

// readFFmpegWAV reads the streamed float WAV ffmpeg writes: RIFF header,
// chunks up to "data" (whose size a pipe leaves unset), then interleaved
// float32 samples to the end.
func readFFmpegWAV(in *bufio.Reader, name, format string, o decodeOpts) (*sampleSink, error) {
	bad := func(what string, args ...any) error {
		return formatErr(name, "unexpected output of ffmpeg decoding %s: %s", format, fmt.Sprintf(what, args...))
	}
	var hdr [12]byte
	if _, err := io.ReadFull(in, hdr[:]); err != nil {
		return nil, bad("no WAV header")
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil, bad("not a WAV stream")
	}
	var f *wavFormat
	for {
		var ch [8]byte
		if _, err := io.ReadFull(in, ch[:]); err != nil {
			return nil, bad("no data chunk")
		}
		id, n := string(ch[0:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		if id == "data" {
			break
		}
		if n > 1<<20 {
			return nil, bad("chunk %s of %d bytes", printableID(ch[0:4]), n)
		}
		b := make([]byte, n+n&1)
		if _, err := io.ReadFull(in, b); err != nil {
			return nil, bad("cut off in chunk %s", printableID(ch[0:4]))
		}
		if id == "fmt " {
			wf, err := parseFmt(b[:n], name)
			if err != nil {
				return nil, bad("%s", err.(*FormatError).Msg)
			}
			f = wf
		}
	}
	if f == nil || !f.float || f.container != 4 {
		return nil, bad("not 32-bit float samples")
	}
	if f.rate < 1 || f.rate > math.MaxInt32 {
		return nil, bad("sample rate %d", f.rate)
	}
	sink, err := newSink(name, format, f.channels, f.rate, 0, o)
	if err != nil {
		return nil, &ffmpegLimitErr{err}
	}
	frameBytes := 4 * f.channels
	buf := make([]byte, max(1, (1<<16)/frameBytes)*frameBytes)
	for {
		n, rerr := io.ReadFull(in, buf)
		frames := n / frameBytes
		if frames > 0 {
			dst, err := sink.next(frames)
			if err != nil {
				return nil, &ffmpegLimitErr{err}
			}
			for c, d := range dst {
				if d == nil {
					continue
				}
				for i := range d {
					d[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i*frameBytes+4*c:]))
				}
			}
		}
		if rerr != nil {
			break // EOF: the end; a read error shows in ffmpeg's status
		}
	}
	return sink, nil
}

// ffmpegLine reduces ffmpeg's stderr to its first meaningful line, with the
// input's internal name replaced by the file's.
func ffmpegLine(s, input, name string) string {
	for _, l := range strings.Split(s, "\n") {
		l = oneLine(strings.ReplaceAll(l, input, name))
		if l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return ""
}

// capped is a writer that keeps the first max bytes written to it.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }

// shellQuote quotes a file name for a command line in a message.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./+,:@%", r)) {
			safe = false
			break
		}
	}
	if safe && !strings.HasPrefix(s, "-") {
		return s
	}
	if strings.HasPrefix(s, "-") {
		s = "./" + s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ffmpegStdin sets the child's stdin to the whole of r and returns ffmpeg's
// name for it.
func ffmpegStdin(cmd *exec.Cmd, r io.ReaderAt, size int64) string {
	cmd.Stdin = io.NewSectionReader(r, 0, size)
	return "pipe:0"
}

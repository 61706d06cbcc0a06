package batchjob

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Complete reports whether an item's outputs are both there and whole: the
// WAV's header parses and its data chunk is all present, the JSON parses.
// (Outputs are renamed into place whole, so a killed run leaves either a
// complete file, or none, or only the WAV; why not is said for the log.)
func Complete(it *Item) (bool, string) {
	if err := audioComplete(it.OutputWAV); err != nil {
		return false, err.Error()
	}
	if it.OutputMix != "" {
		if _, err := WAVSeconds(it.OutputMix, true); err != nil {
			return false, err.Error()
		}
	}
	const maxJSON = 256 << 20
	st, err := os.Stat(it.OutputText)
	if err != nil {
		return false, fmt.Sprintf("%s: %v", it.OutputText, pathErr(err))
	}
	if st.Size() > maxJSON || !st.Mode().IsRegular() {
		return false, fmt.Sprintf("%s: not a transcript this tool writes", it.OutputText)
	}
	data, err := os.ReadFile(it.OutputText)
	if err != nil {
		return false, fmt.Sprintf("%s: %v", it.OutputText, pathErr(err))
	}
	if !json.Valid(data) {
		return false, fmt.Sprintf("%s: not valid JSON", it.OutputText)
	}
	return true, ""
}

// maxFLACOutput bounds the FLAC output read back by audioComplete (an
// hour of 16-bit 24 kHz audio is under 200 MB).
const maxFLACOutput = 1 << 30

// audioComplete checks the agent's audio: a WAV by its header (WAVSeconds,
// exact); a FLAC (told by its "fLaC" start, whatever the output format is
// now: a format changed since is the fingerprint's to tell) decoded whole
// by the audio reader, whose every frame CRC and the STREAMINFO total must
// hold, so a cut-off file is not complete.
func audioComplete(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %v", path, pathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %v", path, pathErr(err))
	}
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || string(magic[:]) != "fLaC" {
		_, err := WAVSeconds(path, true)
		return err
	}
	if !st.Mode().IsRegular() || st.Size() > maxFLACOutput {
		return fmt.Errorf("%s: not an output this tool writes", path)
	}
	if _, err := audio.DecodeReaderAt(f, st.Size(), path); err != nil {
		return err
	}
	return nil
}

// WAVSeconds reads a WAV file's header and returns its duration. With
// exact, the file must end where its RIFF and data chunks say (as every
// file this tool writes does); otherwise a data chunk running past the end
// is an error but trailing chunks are fine.
func WAVSeconds(path string, exact bool) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, pathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, pathErr(err))
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	bad := func(msg string) (float64, error) { return 0, fmt.Errorf("%s: %s", path, msg) }
	var hdr [12]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[:4]) != "RIFF" || string(hdr[8:]) != "WAVE" {
		return bad("not a WAV file (no RIFF/WAVE header)")
	}
	le := binary.LittleEndian
	if exact && int64(le.Uint32(hdr[4:]))+8 != size {
		return bad(fmt.Sprintf("RIFF size %d does not match the file's %d bytes (truncated?)", le.Uint32(hdr[4:]), size))
	}
	var rate, blockAlign int64
	for off := int64(12); off+8 <= size; {
		var ch [8]byte
		if _, err := f.ReadAt(ch[:], off); err != nil {
			return bad(fmt.Sprintf("reading a chunk header at %d: %v", off, err))
		}
		n := int64(le.Uint32(ch[4:]))
		body := off + 8
		switch string(ch[:4]) {
		case "fmt ":
			if n < 16 || body+n > size {
				return bad("bad fmt chunk")
			}
			var fm [16]byte
			if _, err := f.ReadAt(fm[:], body); err != nil {
				return bad("reading the fmt chunk: " + err.Error())
			}
			rate, blockAlign = int64(le.Uint32(fm[4:])), int64(le.Uint16(fm[12:]))
		case "data":
			if rate <= 0 || blockAlign <= 0 {
				return bad("data chunk before a valid fmt chunk")
			}
			if body+n > size {
				return bad(fmt.Sprintf("truncated data chunk: header says %d bytes, file has %d", n, size-body))
			}
			if exact && body+n+n%2 < size {
				return bad("bytes after the data chunk")
			}
			return float64(n/blockAlign) / float64(rate), nil
		}
		off = body + n + n%2
	}
	return bad("no data chunk")
}

// CleanStale removes the temporary files a killed run left for the items'
// outputs (fileio.SweepTemps: only files in fileio's temporary folder,
// named as its temporaries, no input of the run, not locked by a living
// process; a user's file merely named like one is kept). Only the given
// items' are touched (shards running at the same time hold their own); it
// returns what it removed.
func CleanStale(items []*Item) ([]string, error) {
	var removed []string
	for _, it := range items {
		for _, o := range itemOutputs(it) {
			removed = append(removed, fileio.SweepTemps(o.p)...)
		}
	}
	return removed, nil
}

package batchjob

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Complete reports whether an item's outputs are both there and whole: the
// WAV's header parses and its data chunk is all present, the JSON parses.
// (Outputs are renamed into place whole, so a killed run leaves either a
// complete file, or none, or only the WAV; why not is said for the log.)
func Complete(it *Item) (bool, string) {
	if _, err := WAVSeconds(it.OutputWAV, true); err != nil {
		return false, err.Error()
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
		for _, p := range []string{it.OutputWAV, it.OutputText, FingerprintPath(it.OutputWAV)} {
			removed = append(removed, fileio.SweepTemps(p)...)
		}
	}
	return removed, nil
}

package voices

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// bombEntry is one entry of a generated archive: data, then pad zero bytes
// (streamed, never held), deflated; raw, when set, overrides the directory
// sizes (a lying header).
type bombEntry struct {
	name      string
	data      []byte
	pad       int64
	raw       bool
	rawUnsize uint64 // the uncompressed size the directory declares (raw)
}

// buildZip writes the entries as a zip archive, deflated.
func buildZip(t testing.TB, entries []bombEntry) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	zeros := make([]byte, 1<<20)
	stream := func(w io.Writer, e bombEntry) {
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
		for left := e.pad; left > 0; left -= int64(len(zeros)) {
			if _, err := w.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range entries {
		if !e.raw {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate})
			if err != nil {
				t.Fatal(err)
			}
			stream(w, e)
			continue
		}
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestSpeed)
		crc := crc32.NewIEEE()
		stream(io.MultiWriter(fw, crc), e)
		fw.Close()
		w, err := zw.CreateRaw(&zip.FileHeader{Name: e.name, Method: zip.Deflate, CRC32: crc.Sum32(),
			CompressedSize64: uint64(comp.Len()), UncompressedSize64: e.rawUnsize})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// tinyEntries returns TINYF0.pt's entries (names and bytes).
func tinyEntries(t testing.TB) []bombEntry {
	src := readFile(t, tinyPT)
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out []bombEntry
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bombEntry{name: f.Name, data: b})
	}
	return out
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A storage entry that inflates to 1 GiB (≈ 1.3 MB in the file) while the
// views need 6 KB: only those bytes are inflated and allocated; the prompt
// is the file's.
func TestStorageBomb(t *testing.T) {
	want, err := LoadPT(tinyPT)
	if err != nil {
		t.Fatal(err)
	}
	entries := tinyEntries(t)
	found := false
	for i := range entries {
		if strings.HasSuffix(entries[i].name, "/data/0") {
			entries[i].pad = 1 << 30
			found = true
		}
	}
	if !found {
		t.Fatal("no data/0 entry")
	}
	file := buildZip(t, entries)
	if len(file) > 4<<20 {
		t.Fatalf("bomb of %d bytes", len(file))
	}
	var got *Prompt
	n := allocated(func() { got, err = DecodePT(file, "bomb.pt") })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the bomb's prompt differs from TINYF0.pt's")
	}
	// The archive directory, the pickle, 6 KB of storage, the prompt and
	// the inflaters' windows: well under 4 MiB (reading the entry whole
	// took 1 GiB).
	if n > 4<<20 {
		t.Errorf("loading allocated %d bytes", n)
	}
}

// Hostile archives are refused with one line naming the file, without
// inflating what they declare.
func TestHostileZips(t *testing.T) {
	defer func(p, s int64) { maxPickleBytes, maxStorageBytes = p, s }(maxPickleBytes, maxStorageBytes)
	base := tinyEntries(t)
	edit := func(suffix string, fn func(e *bombEntry)) []bombEntry {
		out := append([]bombEntry(nil), base...)
		for i := range out {
			if strings.HasSuffix(out[i].name, suffix) {
				fn(&out[i])
			}
		}
		return out
	}
	pklLen := uint64(0)
	for _, e := range base {
		if strings.HasSuffix(e.name, "/data.pkl") {
			pklLen = uint64(len(e.data))
		}
	}
	for _, tc := range []struct {
		name     string
		entries  []bombEntry
		pickle   int64 // maxPickleBytes for the case; 0: the default
		storage  int64 // maxStorageBytes; 0: the default
		want     string
		maxAlloc uint64
	}{
		{"pickle bomb", edit("/data.pkl", func(e *bombEntry) { e.pad = 64 << 20 }), 1 << 20, 0,
			"TINYF0/data.pkl: 67109", 2 << 20},
		// The directory says the pickle's size, the stream goes on with
		// 64 MiB of zeros: reading stops one byte past the declared size.
		{"pickle longer than declared", edit("/data.pkl", func(e *bombEntry) { e.pad, e.raw, e.rawUnsize = 64<<20, true, pklLen }), 0, 0,
			"TINYF0/data.pkl: holds more than the", 2 << 20},
		{"declared beyond deflate", edit("/data/0", func(e *bombEntry) { e.raw, e.rawUnsize = true, 1<<40 }), 0, 0,
			"cannot inflate to the 1099511627776 the zip directory declares", 1 << 20},
		{"storage over the cap", edit("/data/0", func(e *bombEntry) {}), 0, 1024,
			"TINYF0/data/0: a tensor needs 6144 bytes of it, more than the 1024 allowed", 1 << 20},
		// Declared longer than it is: the bytes the views need are there,
		// the rest is never read.
		{"storage declared longer", edit("/data/0", func(e *bombEntry) { e.raw, e.rawUnsize = true, uint64(len(e.data))*2 }), 0, 0,
			"", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxPickleBytes, maxStorageBytes = 16<<20, 1<<30
			if tc.pickle > 0 {
				maxPickleBytes = tc.pickle
			}
			if tc.storage > 0 {
				maxStorageBytes = tc.storage
			}
			file := buildZip(t, tc.entries)
			var err error
			n := allocated(func() { _, err = DecodePT(file, "bad.pt") })
			if err == nil {
				if tc.want == "" {
					return // extra declared bytes the views do not need are never read
				}
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad.pt: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want one line with %q", msg, tc.want)
			}
			if n > tc.maxAlloc {
				t.Errorf("allocated %d bytes", n)
			}
		})
	}
}

// Directory sizes that cannot be true of the file are refused before
// reading: compressed data past the end, a stored entry whose sizes differ.
func TestEntrySizesAgainstFile(t *testing.T) {
	src := readFile(t, tinyPT) // torch's layout: stored entries
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	f := zr.File[len(zr.File)-1]
	fake := *f
	fake.CompressedSize64 = uint64(len(src))
	fake.UncompressedSize64 = fake.CompressedSize64
	if err := checkEntrySizes(&fake, int64(len(src))); err == nil || !strings.Contains(err.Error(), "past the end of the file") {
		t.Errorf("past the end: %v", err)
	}
	fake = *f
	fake.UncompressedSize64++
	if err := checkEntrySizes(&fake, int64(len(src))); err == nil || !strings.Contains(err.Error(), "stored entry of") {
		t.Errorf("stored sizes: %v", err)
	}
	for _, f := range zr.File {
		if err := checkEntrySizes(f, int64(len(src))); err != nil {
			t.Errorf("a true entry refused: %v", err)
		}
	}
}

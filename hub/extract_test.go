package hub

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type entry struct {
	hdr  tar.Header
	data []byte
}

func file(name, content string) entry {
	return entry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, []byte(content)}
}

func writeTGZ(t *testing.T, path string, entries ...entry) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if e.data != nil {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A header claiming more data than follows is left unfinished on
	// purpose (the "huge entry" case): no tw.Close then.
	if last := entries[len(entries)-1]; last.data != nil || last.hdr.Size == 0 {
		tw.Close()
	}
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listTree lists every path under dir.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// voices.tgz unpacks once into voices/ beside it; a folder left half done by
// a killed run (the temporary one) is not taken for the result.
func TestExtractVoicesOnce(t *testing.T) {
	dir := t.TempDir()
	arc := filepath.Join(dir, "voices.tgz")
	writeTGZ(t, arc,
		entry{tar.Header{Name: "voices/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		file("voices/NATF0.pt", "pt0"), file("voices/sub/NATM1.wav", "wav1"),
		entry{tar.Header{Name: "voices/alias.pt", Typeflag: tar.TypeSymlink, Linkname: "NATF0.pt"}, nil},
		entry{tar.Header{Name: "voices/hard.pt", Typeflag: tar.TypeLink, Linkname: "voices/NATF0.pt"}, nil})
	// What a killed extraction leaves.
	os.MkdirAll(filepath.Join(dir, ".voices.extract-123", "voices"), 0o755)
	dest := filepath.Join(dir, "voices")
	done, err := ExtractOnce(arc, dest, DefaultLimits)
	if err != nil || !done {
		t.Fatalf("%v, %v", done, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "alias.pt")); string(got) != "pt0" {
		t.Fatalf("alias %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "sub", "NATM1.wav")); string(got) != "wav1" {
		t.Fatalf("sub file %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "hard.pt")); string(got) != "pt0" {
		t.Fatalf("hard link %q", got)
	}
	if done, err := ExtractOnce(arc, dest, DefaultLimits); done || err != nil {
		t.Fatalf("second extraction: %v, %v", done, err)
	}
	// A flat archive gives its entries as the folder's content.
	flat := filepath.Join(dir, "flat.tgz")
	writeTGZ(t, flat, file("./A.pt", "a"), file("B.wav", "b"))
	if _, err := ExtractOnce(flat, filepath.Join(dir, "flatvoices"), DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if got := listTree(t, filepath.Join(dir, "flatvoices")); strings.Join(got, ",") != "A.pt,B.wav" {
		t.Fatalf("flat: %q", got)
	}
}

// Malicious archives are refused, and nothing is written outside (nor a
// voices/ folder that would look done).
func TestExtractRefusesMaliciousArchives(t *testing.T) {
	small := Limits{MaxEntries: 4, MaxFileSize: 1000, MaxTotal: 1500}
	for _, c := range []struct {
		name    string
		entries []entry
		lim     Limits
		want    string
	}{
		{"dotdot", []entry{file("voices/ok.pt", "x"), file("voices/../../evil.pt", "evil")}, DefaultLimits, "(..)"},
		{"absolute", []entry{file("/tmp/evil.pt", "evil")}, DefaultLimits, "absolute path"},
		{"symlink out", []entry{{tar.Header{Name: "voices/x.pt", Typeflag: tar.TypeSymlink, Linkname: "../../../etc/passwd"}, nil}}, DefaultLimits, "points out"},
		{"symlink absolute", []entry{{tar.Header{Name: "voices/x.pt", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, nil}}, DefaultLimits, "absolute"},
		{"write through symlink", []entry{
			{tar.Header{Name: "voices/d", Typeflag: tar.TypeSymlink, Linkname: ".."}, nil}, file("voices/d/evil.pt", "evil")}, DefaultLimits, "points out"},
		{"hard link out", []entry{{tar.Header{Name: "voices/x.pt", Typeflag: tar.TypeLink, Linkname: "../outside"}, nil}}, DefaultLimits, "hard link"},
		{"device", []entry{{tar.Header{Name: "voices/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, nil}}, DefaultLimits, "not accepted"},
		{"fifo", []entry{{tar.Header{Name: "voices/p", Typeflag: tar.TypeFifo}, nil}}, DefaultLimits, "not accepted"},
		{"huge entry", []entry{{tar.Header{Name: "voices/huge.pt", Typeflag: tar.TypeReg, Size: 1 << 40}, nil}}, DefaultLimits, "more than the"},
		{"too many", []entry{file("a", "1"), file("b", "1"), file("c", "1"), file("d", "1"), file("e", "1")}, small, "more than 4 entries"},
		{"total", []entry{file("a", strings.Repeat("x", 900)), file("b", strings.Repeat("x", 900))}, small, "in all"},
	} {
		t.Run(c.name, func(t *testing.T) {
			outer := t.TempDir()
			dir := filepath.Join(outer, "snapshot")
			os.Mkdir(dir, 0o755)
			arc := filepath.Join(dir, "voices.tgz")
			writeTGZ(t, arc, c.entries...)
			_, err := ExtractOnce(arc, filepath.Join(dir, "voices"), c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), arc+": ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if got := listTree(t, outer); strings.Join(got, ",") != "snapshot,snapshot/voices.tgz" {
				t.Fatalf("left %q", got)
			}
		})
	}
	// Not a gzip file.
	dir := t.TempDir()
	arc := filepath.Join(dir, "voices.tgz")
	os.WriteFile(arc, []byte("not gzip"), 0o644)
	if _, err := ExtractOnce(arc, filepath.Join(dir, "voices"), DefaultLimits); err == nil || !strings.Contains(err.Error(), "not a gzip") {
		t.Fatalf("error %v", err)
	}
}

package voices

import (
	"strings"
	"testing"
)

func checkFuzzResult(t *testing.T, p *Prompt, err error) {
	if err != nil {
		if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.pt: ") {
			t.Fatalf("error %q does not name the file", msg)
		}
		return
	}
	if len(p.Embeddings) == 0 || len(p.Cache) != NumStreams {
		t.Fatalf("accepted %d rows, %d cache rows", len(p.Embeddings), len(p.Cache))
	}
	for _, r := range p.Embeddings {
		if len(r) != len(p.Embeddings[0]) || len(r) == 0 {
			t.Fatal("ragged embeddings")
		}
	}
	for _, r := range p.Cache {
		if len(r) != len(p.Cache[0]) || len(r) == 0 {
			t.Fatal("ragged cache")
		}
	}
}

// FuzzDecodePT feeds arbitrary bytes to DecodePT, LoadPT's byte-level entry
// point: no panic, and either a well-formed prompt or an error naming the
// file.
func FuzzDecodePT(f *testing.F) {
	f.Add(readFile(f, tinyPT))
	f.Add(readFile(f, tinyBF16PT))
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte("\x80\x02}."))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePT(data, "fuzz.pt")
		checkFuzzResult(t, p, err)
	})
}

// FuzzPickle mutates data.pkl inside an otherwise valid archive, so that the
// fuzzer explores the pickle scanner and unpickler rather than zip CRCs.
func FuzzPickle(f *testing.F) {
	src := readFile(f, tinyPT)
	var pkl []byte
	rezip(f, src, func(name string, data []byte) (string, []byte, bool) {
		if strings.HasSuffix(name, "/data.pkl") {
			pkl = data
		}
		return name, data, true
	})
	f.Add(pkl)
	f.Add([]byte("\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R."))
	f.Add([]byte("\x80\x04\x95\x0d\x00\x00\x00\x00\x00\x00\x00\x8c\x01a\x94\x8c\x01b\x94\x93."))
	f.Add([]byte("(K\x01d."))
	f.Fuzz(func(t *testing.T, p []byte) {
		file := rezip(t, src, func(name string, data []byte) (string, []byte, bool) {
			if strings.HasSuffix(name, "/data.pkl") {
				data = p
			}
			return name, data, true
		})
		pr, err := DecodePT(file, "fuzz.pt")
		checkFuzzResult(t, pr, err)
	})
}

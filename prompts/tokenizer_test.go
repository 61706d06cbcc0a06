package prompts

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	tinyModel = "../testdata/tiny/tokenizer.model"
	fixtures  = "../testdata/tokenizers"
)

type tokCase struct {
	Text    string   `json:"text"`
	TextB64 string   `json:"text_b64"`
	IDs     []int    `json:"ids"`
	Pieces  []string `json:"pieces"`
	Decoded *string  `json:"decoded"`
}

func (c *tokCase) input(t testing.TB) string {
	if c.TextB64 == "" {
		return c.Text
	}
	b, err := base64.StdEncoding.DecodeString(c.TextB64)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type decCase struct {
	IDs     []int  `json:"ids"`
	Decoded string `json:"decoded"`
}

type caseFile struct {
	Encode []tokCase `json:"encode"`
	Decode []decCase `json:"decode"`
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadTok(t testing.TB, path string) *Tokenizer {
	t.Helper()
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// checkEncode compares Encode/EncodePieces (and Decode when the case has
// it) with the reference.
func checkEncode(t *testing.T, tok *Tokenizer, c tokCase) {
	t.Helper()
	in := c.input(t)
	ids := tok.Encode(in)
	pieces := tok.EncodePieces(in)
	if len(ids) != 0 || len(c.IDs) != 0 {
		if !reflect.DeepEqual(ids, c.IDs) || !reflect.DeepEqual(pieces, c.Pieces) {
			t.Errorf("Encode(%q)\n got %v %q\nwant %v %q\nnormalized %q", in, ids, pieces, c.IDs, c.Pieces, tok.Normalize(in))
		}
	}
	if c.Decoded != nil {
		if got := tok.Decode(c.IDs); got != *c.Decoded {
			t.Errorf("Decode(%v) (text %q) = %q, want %q", c.IDs, in, got, *c.Decoded)
		}
	}
}

// TestTinyCases: the 91 reference cases of the PersonaPlex-like unigram
// nmt_nfkc model.
func TestTinyCases(t *testing.T) {
	tok := loadTok(t, tinyModel)
	var cases []tokCase
	readJSON(t, "../testdata/tiny/tokenizer_cases.json", &cases)
	if len(cases) != 91 {
		t.Errorf("got %d cases, want 91", len(cases))
	}
	for _, c := range cases {
		checkEncode(t, tok, c)
	}
}

// TestFixtureModels: every model of testdata/tokenizers against the
// reference encode/decode made by scripts/make_tokenizer_fixtures.py.
func TestFixtureModels(t *testing.T) {
	models, err := filepath.Glob(filepath.Join(fixtures, "*.model"))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]string{filepath.Join(fixtures, "tiny_extra_cases.json"): tinyModel}
	for _, m := range models {
		runs[strings.TrimSuffix(m, ".model")+"_cases.json"] = m
	}
	if len(runs) < 8 {
		t.Fatalf("found %d fixture models, want 7 + tiny", len(runs))
	}
	for casesPath, model := range runs {
		t.Run(filepath.Base(casesPath), func(t *testing.T) {
			tok := loadTok(t, model)
			var cf caseFile
			readJSON(t, casesPath, &cf)
			if len(cf.Encode) < 100 {
				t.Errorf("only %d encode cases", len(cf.Encode))
			}
			for _, c := range cf.Encode {
				checkEncode(t, tok, c)
			}
			for _, c := range cf.Decode {
				if got := tok.Decode(c.IDs); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
				}
			}
		})
	}
}

// A tokenizer path that is a device or too large is refused before it is
// read whole (/dev/zero once took 24 GB), naming the file.
func TestLoadBounded(t *testing.T) {
	big := t.TempDir() + "/big.model"
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxModelBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]string{"/dev/zero": "is a device", big: "more than the"} {
		if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s): %v, want %q", path, err, want)
		}
	}
}

package prompts

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pb builds protobuf wire format for hand-made test models.
type pb []byte

func (b pb) varint(v uint64) pb {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func (b pb) tag(num, wire int) pb { return b.varint(uint64(num)<<3 | uint64(wire)) }

func (b pb) bytes(num int, v []byte) pb { return append(b.tag(num, 2).varint(uint64(len(v))), v...) }

func (b pb) str(num int, v string) pb { return b.bytes(num, []byte(v)) }

func (b pb) uint(num int, v uint64) pb { return b.tag(num, 0).varint(v) }

func (b pb) float(num int, v float32) pb {
	return binary.LittleEndian.AppendUint32(b.tag(num, 5), math.Float32bits(v))
}

// piece encodes one ModelProto.pieces entry.
func piece(p string, score float32, typ int) pb {
	return pb(nil).str(1, p).float(2, score).uint(3, uint64(typ))
}

// model assembles a ModelProto from pieces, a trainer spec and a normalizer
// spec (nil: absent).
func model(pieces []pb, trainer, norm pb) []byte {
	var m pb
	for _, p := range pieces {
		m = m.bytes(1, p)
	}
	if trainer != nil {
		m = m.bytes(2, trainer)
	}
	if norm != nil {
		m = m.bytes(3, norm)
	}
	return m
}

// basicPieces is a small valid unigram vocabulary.
func basicPieces() []pb {
	return []pb{
		piece("<unk>", 0, typeUnknown),
		piece("<s>", 0, typeControl),
		piece("</s>", 0, typeControl),
		piece("\u2581", -1, typeNormal),
		piece("a", -2, typeNormal),
		piece("b", -2, typeNormal),
		piece("\u2581ab", -1.5, typeNormal),
		piece("ab", -1.2, typeNormal),
	}
}

func bytePieces() []pb {
	var ps []pb
	for i := 0; i < 256; i++ {
		ps = append(ps, piece("<0x"+strings.ToUpper(hex2(i))+">", 0, typeByte))
	}
	return ps
}

func hex2(i int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[i>>4], digits[i&15]})
}

func TestHandMadeModels(t *testing.T) {
	// A valid minimal unigram model, no normalizer spec (defaults).
	tok, err := Parse(model(basicPieces(), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.EncodePieces("ab  ab b"); strings.Join(got, " ") != "\u2581ab \u2581ab \u2581 b" {
		t.Errorf("EncodePieces = %q", got)
	}
	if got := tok.Decode(tok.Encode(" ab  xab ")); got != "ab  \u2047 ab" {
		t.Errorf("Decode = %q", got)
	}
	if tok.VocabSize() != 8 || tok.UnkID() != 0 || tok.PieceToID("ab") != 7 || tok.PieceToID("zz") != 0 {
		t.Errorf("VocabSize/UnkID/PieceToID: %d %d %d %d", tok.VocabSize(), tok.UnkID(), tok.PieceToID("ab"), tok.PieceToID("zz"))
	}
	// Byte fallback: unknown characters become their UTF-8 bytes.
	ps := append(basicPieces(), bytePieces()...)
	tok, err = Parse(model(ps, pb(nil).uint(35, 1), nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tok.EncodePieces("a\u00e9"), " "); got != "\u2581 a <0xC3> <0xA9>" {
		t.Errorf("byte fallback pieces = %q", got)
	}
	if got := tok.Decode(tok.Encode("ab\u00e9 b")); got != "ab\u00e9 b" {
		t.Errorf("byte fallback round trip = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	tiny, err := os.ReadFile(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	dup := append(basicPieces(), piece("ab", -3, typeNormal))
	noUnk := basicPieces()[1:]
	twoUnk := append(basicPieces(), piece("<unk2>", 0, typeUnknown))
	emptyPiece := append(basicPieces(), piece("", 0, typeNormal))
	bytesNoFallback := append(basicPieces(), piece("<0x41>", 0, typeByte))
	fewBytes := append(basicPieces(), bytePieces()[:255]...)
	badByte := append(basicPieces(), piece("<0xZZ>", 0, typeByte))
	onlyReserved := []pb{piece("<unk>", 0, typeUnknown), piece("<s>", 0, typeControl)}
	cases := []struct {
		name string
		data []byte
		want string // substring of the error
	}{
		{"empty", nil, "not a SentencePiece model (empty file)"},
		{"text", []byte("hello world, this is not a model\n"), "not a SentencePiece model (bad protobuf at byte"},
		{"json", []byte(`{"pieces": ["a", "b"]}`), "not a SentencePiece model (bad protobuf"},
		{"wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), "not a SentencePiece model (bad protobuf"},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "not a SentencePiece model (bad protobuf"},
		{"zeros", make([]byte, 64), "bad protobuf at byte 0: invalid tag 0"},
		{"wire type 7", []byte{0x0f}, "invalid wire type 7"},
		{"overlong varint", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "overlong varint"},
		{"truncated fixed32", []byte{0x0a, 0x03, 0x15, 0x00, 0x00}, "truncated fixed32"},
		{"unterminated group", []byte{0x0b, 0x08, 0x01}, "unterminated group"},
		{"stray end group", []byte{0x0c}, "unexpected end-group tag"},
		{"tiny truncated by 1", tiny[:len(tiny)-1], "bad protobuf at byte"},
		{"tiny truncated to half", tiny[:len(tiny)/2], "bad protobuf at byte"},
		{"tiny first 100 bytes", tiny[:100], "bad protobuf at byte"},
		{"no pieces", model(nil, pb(nil).uint(3, 1), nil), "no pieces"},
		{"no unk", model(noUnk, nil, nil), "unk is not defined"},
		{"two unk", model(twoUnk, nil, nil), "unk is already defined"},
		{"duplicate", model(dup, nil, nil), `piece "ab" (id 8) is already defined`},
		{"empty piece", model(emptyPiece, nil, nil), "piece 8 is empty"},
		{"byte without fallback", model(bytesNoFallback, nil, nil), "byte_fallback is false"},
		{"missing byte pieces", model(fewBytes, pb(nil).uint(35, 1), nil), "no byte piece <0xFF>"},
		{"bad byte piece", model(badByte, pb(nil).uint(35, 1), nil), `byte piece "<0xZZ>" is invalid`},
		{"only reserved pieces", model(onlyReserved, nil, nil), "no pieces are loaded"},
		{"charsmap too short", model(basicPieces(), nil, pb(nil).bytes(2, []byte{1, 0, 0})), "precompiled charsmap is broken"},
		{"charsmap trie too big", model(basicPieces(), nil, pb(nil).bytes(2, []byte{9, 0, 0, 0, 1, 2, 3})), "trie size exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := Parse(c.data)
			if err == nil {
				t.Fatalf("Parse succeeded (%v), want error containing %q", tok, c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, c.want)
			}
		})
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/tokenizer.model"
	if err := os.WriteFile(path, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var e *Error
	if !errors.As(err, &e) || e.Path != path || !strings.HasPrefix(err.Error(), path+": not a SentencePiece model (bad protobuf at byte ") {
		t.Errorf("Load error = %v", err)
	}
	if _, err := Load(dir + "/missing.model"); err == nil || !strings.Contains(err.Error(), "missing.model") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// FuzzParse: no input may panic Parse, and a model that parses must encode
// and decode without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte{})
	f.Add(model(basicPieces(), nil, nil))
	f.Add(model(append(basicPieces(), bytePieces()[:3]...), pb(nil).uint(35, 1).uint(3, 2), pb(nil).uint(3, 0).uint(4, 0)))
	f.Add(model(basicPieces(), pb(nil).uint(3, 2), pb(nil).bytes(2, []byte{8, 0, 0, 0, 0, 4, 0, 0, 0x61, 0x01, 0, 0x80, 'x', 0})))
	for _, p := range []string{fixtures + "/char.model", fixtures + "/bpe_bytes_rules.model"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			if tok != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error result: %v %v", tok, err)
			}
			return
		}
		for _, s := range []string{"", " ab  a\u00e9 \u2581x", "\xff\xfe<system>", "ABC 123 \U0001F600 x"} {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d out of range", s, id)
				}
			}
			_ = tok.Decode(ids)
			_ = tok.EncodePieces(s)
		}
		_ = tok.Decode([]int{0, 1, 2, 3, -1, 1 << 30})
	})
}

// FuzzEncode: arbitrary text (invalid UTF-8 included) through every fixture
// model: no panic, ids in range, and Decode accepts the result.
func FuzzEncode(f *testing.F) {
	paths, _ := filepath.Glob(fixtures + "/*.model")
	paths = append(paths, tinyModel)
	var toks []*Tokenizer
	for _, p := range paths {
		toks = append(toks, loadTok(f, p))
	}
	for _, s := range []string{"", " ", "<system> Hello, world! <system>", "a\xffb\xc3", "日本語 😀 ﬁ Å \u200b\u00ad", "PersonaPlexPersonaPlex AB ABC 123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("%v: Encode(%q) gave id %d", tok, s, id)
				}
			}
			_ = tok.Decode(ids)
		}
	})
}

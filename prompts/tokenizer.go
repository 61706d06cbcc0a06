// Package prompts turns PersonaPlex role prompts into text tokens.
//
// It holds an exact, dependency-free port of the parts of SentencePiece
// (google/sentencepiece 0.1.97, the version that made the fixtures) that
// PersonaPlex uses: loading a .model file (ModelProto, decoded from the
// protobuf wire format by hand), the model's own normalizer (precompiled
// charsmap, whitespace escaping, dummy prefix, extra-whitespace removal,
// user-defined symbols), unigram (Viterbi), BPE, word and char encoding,
// unknown-run merging and byte fallback, and decoding. On top of it sit the
// two bits of offline.py that touch text: wrap_with_system_tags
// (WrapWithSystemTags) and the rendering of generated text tokens
// (RenderToken).
package prompts

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// defaultUnkSurface is what Decode writes for <unk> unless the model sets
// trainer_spec.unk_surface: U+2047 DOUBLE QUESTION MARK between spaces.
const defaultUnkSurface = " \u2047 "

// Tokenizer is a loaded SentencePiece model. It is safe for concurrent use.
type Tokenizer struct {
	pieces       []protoPiece
	modelType    int32
	byteFallback bool
	unkID        int32
	unkSurface   string

	pieceIDs map[string]int32 // NORMAL, USER_DEFINED and UNUSED pieces
	reserved map[string]int32 // CONTROL, UNKNOWN and BYTE pieces
	byteIDs  [256]int32       // id of <0xXX>, when byteFallback

	trie    *pieceTrie // pieceIDs as a trie (unigram)
	matcher *pieceTrie // user-defined symbols; nil if none

	norm   *normalizer
	denorm *normalizer // nil if the model has none

	// Decode's leading-space handling follows the normalizer spec.
	addDummyPrefix bool
	removeExtraWS  bool

	minScore, maxScore float32 // over NORMAL pieces (unigram)

	scratch sync.Pool // *encodeScratch
}

// Error is a load error: the file (if known) and what is wrong with it.
type Error struct {
	Path string // file name, empty for Parse
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// MaxModelBytes bounds a tokenizer model file (a 32k-piece SentencePiece
// model is about 0.5 MB).
const MaxModelBytes = 64 << 20

// Load reads (at most MaxModelBytes) and parses the SentencePiece model
// file at path.
func Load(path string) (*Tokenizer, error) {
	data, err := fileio.ReadFileLimit(path, MaxModelBytes)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Path = path
			return nil, e
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse parses a serialized SentencePiece ModelProto. A corrupt or
// non-SentencePiece input gives an *Error, never a panic.
func Parse(data []byte) (*Tokenizer, error) {
	if len(data) == 0 {
		return nil, &Error{Msg: "not a SentencePiece model (empty file)"}
	}
	m, err := parseModelProto(data)
	if err != nil {
		return nil, &Error{Msg: "not a SentencePiece model (" + err.Error() + ")"}
	}
	if len(m.pieces) == 0 {
		return nil, &Error{Msg: "not a SentencePiece model (no pieces)"}
	}
	t, err := newTokenizer(m)
	if err != nil {
		return nil, &Error{Msg: "invalid SentencePiece model: " + err.Error()}
	}
	return t, nil
}

func newTokenizer(m *protoModel) (*Tokenizer, error) {
	t := &Tokenizer{
		pieces:         m.pieces,
		modelType:      m.trainer.modelType,
		byteFallback:   m.trainer.byteFallback,
		unkID:          -1,
		unkSurface:     defaultUnkSurface,
		pieceIDs:       make(map[string]int32, len(m.pieces)),
		reserved:       make(map[string]int32),
		addDummyPrefix: m.normalizer.addDummyPrefix,
		removeExtraWS:  m.normalizer.removeExtraWhitespaces,
	}
	if m.trainer.hasUnkSurface {
		t.unkSurface = m.trainer.unkSurface
	}
	for i := range t.byteIDs {
		t.byteIDs[i] = -1
	}
	// ModelInterface::InitializePieces.
	var userKeys []string
	var userVals []int32
	for i, p := range m.pieces {
		if p.piece == "" {
			return nil, fmt.Errorf("piece %d is empty", i)
		}
		normal := p.typ == typeNormal || p.typ == typeUserDefined || p.typ == typeUnused
		dst := t.reserved
		if normal {
			dst = t.pieceIDs
		}
		if _, dup := dst[p.piece]; dup {
			return nil, fmt.Errorf("piece %q (id %d) is already defined", p.piece, i)
		}
		dst[p.piece] = int32(i)
		switch p.typ {
		case typeUserDefined:
			userKeys = append(userKeys, p.piece)
			userVals = append(userVals, int32(i))
		case typeUnknown:
			if t.unkID >= 0 {
				return nil, fmt.Errorf("unk is already defined (ids %d and %d)", t.unkID, i)
			}
			t.unkID = int32(i)
		case typeByte:
			if !t.byteFallback {
				return nil, fmt.Errorf("byte piece %q is found although byte_fallback is false", p.piece)
			}
			b := pieceToByte(p.piece)
			if b < 0 {
				return nil, fmt.Errorf("byte piece %q is invalid", p.piece)
			}
			t.byteIDs[b] = int32(i)
		}
	}
	if t.unkID < 0 {
		return nil, fmt.Errorf("unk is not defined")
	}
	if t.byteFallback {
		for b, id := range t.byteIDs {
			if id < 0 {
				return nil, fmt.Errorf("byte_fallback is true but there is no byte piece <0x%02X>", b)
			}
		}
	}
	if len(userKeys) > 0 {
		t.matcher = newPieceTrie(userKeys, userVals)
	}

	if t.modelType == modelUnigram {
		if len(t.pieceIDs) == 0 {
			return nil, fmt.Errorf("no pieces are loaded")
		}
		t.minScore = maxFloat32
		t.maxScore = minPositiveNormalFloat32 // FLT_MIN, as sentencepiece starts it
		for _, p := range m.pieces {
			if p.typ == typeNormal {
				t.minScore = min(t.minScore, p.score)
				t.maxScore = max(t.maxScore, p.score)
			}
		}
		keys := make([]string, 0, len(t.pieceIDs))
		vals := make([]int32, 0, len(t.pieceIDs))
		for k, v := range t.pieceIDs {
			keys = append(keys, k)
			vals = append(vals, v)
		}
		t.trie = newPieceTrie(keys, vals)
	}

	var err error
	t.norm, err = newNormalizer(&m.normalizer, m.trainer.treatWhitespaceAsSuffix)
	if err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	t.norm.matcher = t.matcher
	if m.denormalizer.present && len(m.denormalizer.precompiledCharsmap) > 0 {
		t.denorm, err = newNormalizer(&m.denormalizer, false)
		if err != nil {
			return nil, fmt.Errorf("denormalizer: %v", err)
		}
	}
	return t, nil
}

const (
	maxFloat32               = 3.40282346638528859811704183484516925440e+38
	minPositiveNormalFloat32 = 1.17549435082228750796873653722224568e-38
)

// pieceToByte parses "<0xXX>" (upper-case hex, as sentencepiece writes it).
func pieceToByte(p string) int {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return -1
	}
	v := 0
	for _, c := range []byte(p[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}

// VocabSize returns the number of pieces (ids are 0..VocabSize()-1).
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// IDToPiece returns the piece of id as stored in the model ("▁hello",
// "<unk>", "<0x41>"), or "" if id is out of range.
func (t *Tokenizer) IDToPiece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id].piece
}

// PieceToID returns the id of piece, or the <unk> id if it is not in the
// vocabulary.
func (t *Tokenizer) PieceToID(piece string) int { return int(t.pieceToID(piece)) }

func (t *Tokenizer) pieceToID(piece string) int32 {
	if id, ok := t.reserved[piece]; ok {
		return id
	}
	if id, ok := t.pieceIDs[piece]; ok {
		return id
	}
	return t.unkID
}

// UnkID returns the id of the unknown piece.
func (t *Tokenizer) UnkID() int { return int(t.unkID) }

// Normalize returns text as the model's normalizer turns it into the string
// the encoder segments (spaces escaped to "▁" when the model says so).
func (t *Tokenizer) Normalize(text string) string {
	return string(t.norm.normalize(text, nil))
}

// Encode tokenizes text as SentencePieceProcessor.encode(text) does (no BOS,
// EOS or sampling).
func (t *Tokenizer) Encode(text string) []int {
	s := t.getScratch()
	defer t.scratch.Put(s)
	t.encode(text, s)
	ids := make([]int, len(s.out))
	for i, id := range s.out {
		ids[i] = int(id)
	}
	return ids
}

// EncodePieces tokenizes text and returns the piece of each id, i.e.
// IDToPiece over Encode(text): a run of unknown characters gives one "<unk>"
// (sentencepiece's encode(out_type=str) would give the unknown text itself).
func (t *Tokenizer) EncodePieces(text string) []string {
	ids := t.Encode(text)
	pieces := make([]string, len(ids))
	for i, id := range ids {
		pieces[i] = t.pieces[id].piece
	}
	return pieces
}

// Decode turns ids back into text as SentencePieceProcessor.decode does:
// "▁" becomes a space, the leading space of the first piece is dropped,
// control pieces vanish, <unk> becomes " ⁇ " (or the model's unk_surface),
// and runs of byte pieces are read as UTF-8 (each invalid byte giving
// U+FFFD). Ids out of range are skipped (sentencepiece rejects them).
func (t *Tokenizer) Decode(ids []int) string {
	var text []byte
	isBosWS := true
	bosWSSeen := false
	var bytes []byte
	flush := func() {
		for len(bytes) > 0 {
			r, n := decodeRune(bytes)
			if r < 0 {
				text = append(text, replacementChar...)
			} else {
				text = append(text, bytes[:n]...)
			}
			bytes = bytes[n:]
		}
		bytes = bytes[:0]
	}
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) {
			continue
		}
		piece := t.pieces[id].piece
		pid := t.pieceToID(piece)
		typ := t.pieces[pid].typ
		if typ == typeByte {
			bytes = append(bytes, byte(pieceToByte(piece)))
			continue
		}
		flush()
		if bosWSSeen || len(text) > 0 {
			isBosWS = false
		}
		bosWSSeen = false
		switch typ {
		case typeControl:
			// invisible
		case typeUnknown:
			text = append(text, t.unkSurface...)
		default:
			if isBosWS && (t.addDummyPrefix || t.removeExtraWS) {
				if strings.HasPrefix(piece, spaceSymbol) {
					piece = piece[len(spaceSymbol):]
					bosWSSeen = !t.removeExtraWS
				}
			}
			text = append(text, strings.ReplaceAll(piece, spaceSymbol, " ")...)
		}
	}
	flush()
	if t.denorm != nil {
		return string(t.denorm.normalize(string(text), nil))
	}
	return string(text)
}

// decodeRune decodes the first UTF-8 sequence of b the way sentencepiece's
// IsValidDecodeUTF8 does; r < 0 means one malformed byte.
func decodeRune(b []byte) (r rune, n int) {
	c := b[0]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c&0xe0 == 0xc0 && len(b) >= 2 && isTrail(b[1]):
		r = rune(c&0x1f)<<6 | rune(b[1]&0x3f)
		if r >= 0x80 {
			return r, 2
		}
	case c&0xf0 == 0xe0 && len(b) >= 3 && isTrail(b[1]) && isTrail(b[2]):
		r = rune(c&0x0f)<<12 | rune(b[1]&0x3f)<<6 | rune(b[2]&0x3f)
		if r >= 0x800 && (r < 0xd800 || r > 0xdfff) {
			return r, 3
		}
	case c&0xf8 == 0xf0 && len(b) >= 4 && isTrail(b[1]) && isTrail(b[2]) && isTrail(b[3]):
		r = rune(c&0x07)<<18 | rune(b[1]&0x3f)<<12 | rune(b[2]&0x3f)<<6 | rune(b[3]&0x3f)
		if r >= 0x10000 && r <= 0x10ffff {
			return r, 4
		}
	}
	return -1, 1
}

func isTrail(c byte) bool { return c&0xc0 == 0x80 }

// String describes the model in one line.
func (t *Tokenizer) String() string {
	kind := map[int32]string{modelUnigram: "unigram", modelBPE: "bpe", modelWord: "word", modelChar: "char"}[t.modelType]
	s := "sentencepiece " + kind + " model, " + strconv.Itoa(len(t.pieces)) + " pieces"
	if t.byteFallback {
		s += ", byte fallback"
	}
	return s
}

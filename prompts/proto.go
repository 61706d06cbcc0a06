package prompts

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file decodes the protobuf wire format of sentencepiece's ModelProto
// (sentencepiece_model.proto, proto2) by hand. Only the fields the encoder and
// decoder need are kept; every other field is skipped after its wire format has
// been checked, as the C++ protobuf parser does with unknown fields.

// Piece types (ModelProto.SentencePiece.Type).
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Model types (TrainerSpec.ModelType).
const (
	modelUnigram = 1
	modelBPE     = 2
	modelWord    = 3
	modelChar    = 4
)

type protoPiece struct {
	piece string
	score float32
	typ   int32
}

type protoTrainerSpec struct {
	modelType               int32
	treatWhitespaceAsSuffix bool
	byteFallback            bool
	unkSurface              string
	hasUnkSurface           bool
}

type protoNormalizerSpec struct {
	present                bool
	name                   string
	precompiledCharsmap    []byte
	addDummyPrefix         bool
	removeExtraWhitespaces bool
	escapeWhitespaces      bool
}

type protoSample struct{ input, expected string }

type protoModel struct {
	pieces       []protoPiece
	trainer      protoTrainerSpec
	normalizer   protoNormalizerSpec
	denormalizer protoNormalizerSpec
	selfTest     []protoSample
}

// protoError is a wire-format error at an absolute byte offset of the file.
type protoError struct {
	off int
	msg string
}

func (e *protoError) Error() string {
	return fmt.Sprintf("bad protobuf at byte %d: %s", e.off, e.msg)
}

// Wire types.
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wireStart  = 3
	wireEnd    = 4
	wire32     = 5
)

// field is one decoded field of a message.
type field struct {
	num  int32
	wire int
	u    uint64 // varint / fixed32 / fixed64 value
	b    []byte // length-delimited payload
	boff int    // absolute offset of b
}

// walk calls fn for every field of the message in data (at absolute offset
// base). Groups are skipped whole; a stray end-group tag is an error.
func walk(data []byte, base int, fn func(f *field) error) error {
	i := 0
	for i < len(data) {
		start := i
		tag, n := varint(data[i:])
		if n <= 0 {
			return &protoError{base + start, "truncated or overlong tag"}
		}
		i += n
		if tag>>3 == 0 || tag > math.MaxUint32 {
			return &protoError{base + start, fmt.Sprintf("invalid tag %d", tag)}
		}
		f := field{num: int32(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case wireVarint:
			v, n := varint(data[i:])
			if n <= 0 {
				return &protoError{base + i, "truncated or overlong varint"}
			}
			f.u = v
			i += n
		case wire64:
			if len(data)-i < 8 {
				return &protoError{base + i, "truncated fixed64"}
			}
			f.u = binary.LittleEndian.Uint64(data[i:])
			i += 8
		case wire32:
			if len(data)-i < 4 {
				return &protoError{base + i, "truncated fixed32"}
			}
			f.u = uint64(binary.LittleEndian.Uint32(data[i:]))
			i += 4
		case wireBytes:
			l, n := varint(data[i:])
			if n <= 0 {
				return &protoError{base + i, "truncated or overlong length"}
			}
			i += n
			if l > uint64(len(data)-i) {
				return &protoError{base + i, fmt.Sprintf("length %d exceeds the %d bytes left", l, len(data)-i)}
			}
			f.b = data[i : i+int(l)]
			f.boff = base + i
			i += int(l)
		case wireStart:
			n, err := skipGroup(data[i:], base+i, f.num, 1)
			if err != nil {
				return err
			}
			i += n
			continue // groups carry nothing we use
		case wireEnd:
			return &protoError{base + start, "unexpected end-group tag"}
		default:
			return &protoError{base + start, fmt.Sprintf("invalid wire type %d", f.wire)}
		}
		if err := fn(&f); err != nil {
			return err
		}
	}
	return nil
}

// skipGroup skips the body of a group whose start tag has been read; it returns
// the number of bytes consumed including the end tag.
func skipGroup(data []byte, base int, num int32, depth int) (int, error) {
	if depth > 64 {
		return 0, &protoError{base, "groups nested too deeply"}
	}
	i := 0
	for {
		if i >= len(data) {
			return 0, &protoError{base + i, "unterminated group"}
		}
		start := i
		tag, n := varint(data[i:])
		if n <= 0 {
			return 0, &protoError{base + start, "truncated or overlong tag"}
		}
		i += n
		fnum, wire := tag>>3, tag&7
		if fnum == 0 || tag > math.MaxUint32 {
			return 0, &protoError{base + start, fmt.Sprintf("invalid tag %d", tag)}
		}
		switch wire {
		case wireVarint:
			_, n := varint(data[i:])
			if n <= 0 {
				return 0, &protoError{base + i, "truncated or overlong varint"}
			}
			i += n
		case wire64:
			if len(data)-i < 8 {
				return 0, &protoError{base + i, "truncated fixed64"}
			}
			i += 8
		case wire32:
			if len(data)-i < 4 {
				return 0, &protoError{base + i, "truncated fixed32"}
			}
			i += 4
		case wireBytes:
			l, n := varint(data[i:])
			if n <= 0 {
				return 0, &protoError{base + i, "truncated or overlong length"}
			}
			i += n
			if l > uint64(len(data)-i) {
				return 0, &protoError{base + i, fmt.Sprintf("length %d exceeds the %d bytes left", l, len(data)-i)}
			}
			i += int(l)
		case wireStart:
			m, err := skipGroup(data[i:], base+i, int32(fnum), depth+1)
			if err != nil {
				return 0, err
			}
			i += m
		case wireEnd:
			if int32(fnum) != num {
				return 0, &protoError{base + start, "mismatched end-group tag"}
			}
			return i, nil
		default:
			return 0, &protoError{base + start, fmt.Sprintf("invalid wire type %d", wire)}
		}
	}
}

// varint decodes a base-128 varint of at most 10 bytes; n <= 0 means
// truncated or too long.
func varint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}

// parseModelProto decodes a serialized ModelProto.
func parseModelProto(data []byte) (*protoModel, error) {
	m := &protoModel{}
	m.trainer.modelType = modelUnigram
	m.normalizer = defaultNormalizerSpec()
	m.denormalizer = defaultNormalizerSpec()
	// One copy of the file as a string: the piece strings are substrings of
	// it (one allocation instead of one per piece).
	src := string(data)
	err := walk(data, 0, func(f *field) error {
		switch {
		case f.num == 1 && f.wire == wireBytes:
			p := protoPiece{typ: typeNormal}
			if err := parsePiece(src, f.b, f.boff, &p); err != nil {
				return err
			}
			m.pieces = append(m.pieces, p)
		case f.num == 2 && f.wire == wireBytes:
			return parseTrainerSpec(f.b, f.boff, &m.trainer)
		case f.num == 3 && f.wire == wireBytes:
			m.normalizer.present = true
			return parseNormalizerSpec(f.b, f.boff, &m.normalizer)
		case f.num == 4 && f.wire == wireBytes:
			return parseSelfTest(f.b, f.boff, &m.selfTest)
		case f.num == 5 && f.wire == wireBytes:
			m.denormalizer.present = true
			return parseNormalizerSpec(f.b, f.boff, &m.denormalizer)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func defaultNormalizerSpec() protoNormalizerSpec {
	return protoNormalizerSpec{addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true}
}

func parsePiece(src string, data []byte, base int, p *protoPiece) error {
	return walk(data, base, func(f *field) error {
		switch {
		case f.num == 1 && f.wire == wireBytes:
			p.piece = src[f.boff : f.boff+len(f.b)]
		case f.num == 2 && f.wire == wire32:
			p.score = math.Float32frombits(uint32(f.u))
		case f.num == 3 && f.wire == wireVarint:
			// proto2: an enum value outside the enum is kept as an unknown
			// field and the field keeps its previous value.
			if t := int32(f.u); t >= typeNormal && t <= typeByte {
				p.typ = t
			}
		}
		return nil
	})
}

func parseTrainerSpec(data []byte, base int, t *protoTrainerSpec) error {
	return walk(data, base, func(f *field) error {
		switch {
		case f.num == 3 && f.wire == wireVarint:
			if v := int32(f.u); v >= modelUnigram && v <= modelChar {
				t.modelType = v
			}
		case f.num == 24 && f.wire == wireVarint:
			t.treatWhitespaceAsSuffix = f.u != 0
		case f.num == 35 && f.wire == wireVarint:
			t.byteFallback = f.u != 0
		case f.num == 44 && f.wire == wireBytes:
			t.unkSurface = string(f.b)
			t.hasUnkSurface = true
		}
		return nil
	})
}

func parseNormalizerSpec(data []byte, base int, n *protoNormalizerSpec) error {
	return walk(data, base, func(f *field) error {
		switch {
		case f.num == 1 && f.wire == wireBytes:
			n.name = string(f.b)
		case f.num == 2 && f.wire == wireBytes:
			n.precompiledCharsmap = f.b
		case f.num == 3 && f.wire == wireVarint:
			n.addDummyPrefix = f.u != 0
		case f.num == 4 && f.wire == wireVarint:
			n.removeExtraWhitespaces = f.u != 0
		case f.num == 5 && f.wire == wireVarint:
			n.escapeWhitespaces = f.u != 0
		}
		return nil
	})
}

func parseSelfTest(data []byte, base int, out *[]protoSample) error {
	return walk(data, base, func(f *field) error {
		if f.num != 1 || f.wire != wireBytes {
			return nil
		}
		var s protoSample
		err := walk(f.b, f.boff, func(g *field) error {
			switch {
			case g.num == 1 && g.wire == wireBytes:
				s.input = string(g.b)
			case g.num == 2 && g.wire == wireBytes:
				s.expected = string(g.b)
			}
			return nil
		})
		if err != nil {
			return err
		}
		*out = append(*out, s)
		return nil
	})
}

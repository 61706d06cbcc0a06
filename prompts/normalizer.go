package prompts

import (
	"encoding/binary"
	"errors"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is U+2581 LOWER ONE EIGHTH BLOCK, sentencepiece's escaped space.
const spaceSymbol = "\u2581"

// replacementChar is U+FFFD, what the normalizer emits for one malformed byte.
const replacementChar = "\ufffd"

// maxCharsmapResults mirrors Normalizer::kMaxTrieResultsSize: only the first
// (shortest) 32 prefix matches of the charsmap are considered.
const maxCharsmapResults = 32

// dartsTrie is a darts-clone double array as stored in a precompiled
// charsmap: little-endian 32-bit units.
type dartsTrie struct {
	units []uint32
}

func dartsHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func dartsValue(u uint32) uint32  { return u & (1<<31 - 1) }
func dartsLabel(u uint32) uint32  { return u & (1<<31 | 0xff) }
func dartsOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// longestPrefix returns the longest key among the first maxCharsmapResults
// keys that are prefixes of s (darts-clone commonPrefixSearch), and its value.
// length 0 means no match. Out-of-range units end the search (a valid array
// never has them).
func (d *dartsTrie) longestPrefix(s string) (length int, value uint32) {
	units := d.units
	if len(units) == 0 {
		return 0, 0
	}
	pos := dartsOffset(units[0])
	found := 0
	for i := 0; i < len(s); i++ {
		c := uint32(s[i])
		pos ^= c
		if uint64(pos) >= uint64(len(units)) {
			return
		}
		u := units[pos]
		if dartsLabel(u) != c {
			return
		}
		pos ^= dartsOffset(u)
		if dartsHasLeaf(u) {
			if uint64(pos) >= uint64(len(units)) {
				return
			}
			if found < maxCharsmapResults {
				length, value = i+1, dartsValue(units[pos])
			}
			found++
		}
	}
	return
}

// normalizer is sentencepiece's Normalizer for one NormalizerSpec.
type normalizer struct {
	addDummyPrefix  bool
	removeExtraWS   bool
	escapeWS        bool
	treatWSAsSuffix bool
	trie            *dartsTrie // nil: no charsmap
	normalized      string     // NUL-separated replacement strings
	matcher         *pieceTrie // user-defined symbols, copied verbatim; nil if none
}

func newNormalizer(spec *protoNormalizerSpec, treatWSAsSuffix bool) (*normalizer, error) {
	n := &normalizer{
		addDummyPrefix:  spec.addDummyPrefix,
		removeExtraWS:   spec.removeExtraWhitespaces,
		escapeWS:        spec.escapeWhitespaces,
		treatWSAsSuffix: treatWSAsSuffix,
	}
	if blob := spec.precompiledCharsmap; len(blob) > 0 {
		// <trie size (uint32 LE)><double array><normalized strings>
		if len(blob) <= 4 {
			return nil, errors.New("precompiled charsmap is broken (too short)")
		}
		size := binary.LittleEndian.Uint32(blob)
		if uint64(size) > uint64(len(blob)-4) {
			return nil, errors.New("precompiled charsmap is broken (trie size exceeds the blob)")
		}
		trieBlob := blob[4 : 4+size]
		units := make([]uint32, len(trieBlob)/4)
		for i := range units {
			units[i] = binary.LittleEndian.Uint32(trieBlob[4*i:])
		}
		n.trie = &dartsTrie{units: units}
		n.normalized = string(blob[4+size:])
	}
	return n, nil
}

// normalizePrefix normalizes the longest prefix of s that a rule covers and
// returns the replacement and the number of input bytes consumed (> 0 when s
// is not empty).
func (n *normalizer) normalizePrefix(s string) (string, int) {
	if s == "" {
		return "", 0
	}
	if n.matcher != nil {
		if l := n.matcher.longestPrefix(s); l > 0 {
			return s[:l], l
		}
	}
	if n.trie != nil {
		if l, v := n.trie.longestPrefix(s); l > 0 {
			// The replacement runs from v to the next NUL of the blob.
			if uint64(v) >= uint64(len(n.normalized)) {
				return "", l
			}
			r := n.normalized[v:]
			if k := strings.IndexByte(r, 0); k >= 0 {
				r = r[:k]
			}
			return r, l
		}
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 {
		// A malformed byte becomes U+FFFD, one byte consumed.
		return replacementChar, 1
	}
	return s[:size], size
}

// normalize returns the normalized form of s (Normalizer::Normalize), with
// spaces escaped to U+2581 when the spec says so. buf is reused if large
// enough.
func (n *normalizer) normalize(s string, buf []byte) []byte {
	out := buf[:0]
	if s == "" {
		return out
	}
	if n.removeExtraWS {
		// Ignores leading spaces.
		for s != "" {
			r, l := n.normalizePrefix(s)
			if r != " " {
				break
			}
			s = s[l:]
		}
	}
	if s == "" {
		return out
	}
	if cap(out) < 3*len(s)+6 {
		out = make([]byte, 0, 3*len(s)+6)
	}
	space := " "
	if n.escapeWS {
		space = spaceSymbol
	}
	if !n.treatWSAsSuffix && n.addDummyPrefix {
		out = append(out, space...)
	}
	prevSpace := n.removeExtraWS
	for s != "" {
		r, l := n.normalizePrefix(s)
		if prevSpace {
			for strings.HasPrefix(r, " ") {
				r = r[1:]
			}
		}
		if r != "" {
			if n.escapeWS {
				for i := 0; i < len(r); i++ {
					if r[i] == ' ' {
						out = append(out, spaceSymbol...)
					} else {
						out = append(out, r[i])
					}
				}
			} else {
				out = append(out, r...)
			}
			prevSpace = r[len(r)-1] == ' '
		}
		s = s[l:]
		if !n.removeExtraWS {
			prevSpace = false
		}
	}
	if n.removeExtraWS {
		// Ignores trailing spaces.
		for len(out) >= len(space) && string(out[len(out)-len(space):]) == space {
			out = out[:len(out)-len(space)]
		}
	}
	if n.treatWSAsSuffix && n.addDummyPrefix {
		out = append(out, space...)
	}
	return out
}

package prompts

import (
	"strings"
	"unicode/utf8"
)

// systemTag is the marker PersonaPlex puts around the role prompt.
const systemTag = "<system>"

// WrapWithSystemTags is offline.py's wrap_with_system_tags: the text is
// stripped of leading and trailing whitespace (Python's str.strip()), and
// returned as is if it already starts and ends with "<system>", else as
// "<system> " + stripped + " <system>".
func WrapWithSystemTags(text string) string {
	cleaned := PyStrip(text)
	if strings.HasPrefix(cleaned, systemTag) && strings.HasSuffix(cleaned, systemTag) {
		return cleaned
	}
	return systemTag + " " + cleaned + " " + systemTag
}

// EncodePrompt returns the text-prompt tokens offline.py feeds the model:
// Encode(WrapWithSystemTags(text)), or nil when text is empty (the reference
// then has no text prompt at all; note that a whitespace-only text is not
// empty and is wrapped).
func (t *Tokenizer) EncodePrompt(text string) []int {
	if text == "" {
		return nil
	}
	return t.Encode(WrapWithSystemTags(text))
}

// PyStrip removes leading and trailing whitespace as Python's str.strip()
// with no argument does (the characters for which str.isspace() is true).
// Bytes that are not valid UTF-8 are not whitespace.
func PyStrip(s string) string {
	for s != "" {
		r, n := utf8.DecodeRuneInString(s)
		if !pyIsSpace(r) || (r == utf8.RuneError && n == 1) {
			break
		}
		s = s[n:]
	}
	for s != "" {
		r, n := utf8.DecodeLastRuneInString(s)
		if !pyIsSpace(r) || (r == utf8.RuneError && n == 1) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

// pyIsSpace reports whether Python's str.isspace() is true for r: the
// characters of bidirectional class WS, B or S, or of category Zs.
func pyIsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ',
		0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Text tokens that offline.py renders by name.
const (
	EPADID = 0 // "EPAD" (end of padding)
	PADID  = 3 // "PAD"
)

// RenderToken renders a generated text token as offline.py writes it to the
// output JSON: id 0 is "EPAD", id 3 is "PAD", any other id is its piece with
// every "▁" replaced by a space (so 1 and 2 give the raw "<s>" and "</s>").
// An id out of range gives "".
func (t *Tokenizer) RenderToken(id int) string {
	switch id {
	case EPADID:
		return "EPAD"
	case PADID:
		return "PAD"
	}
	return strings.ReplaceAll(t.IDToPiece(id), spaceSymbol, " ")
}

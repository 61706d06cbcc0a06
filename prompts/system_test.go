package prompts

import (
	"reflect"
	"strings"
	"testing"
)

func TestWrapWithSystemTags(t *testing.T) {
	cases := []struct{ in, want string }{
		{"You enjoy having a good conversation.", "<system> You enjoy having a good conversation. <system>"},
		{"  \t\nHi there \r\n", "<system> Hi there <system>"},
		{"", "<system>  <system>"},
		{"   ", "<system>  <system>"},
		// Python's str.strip() whitespace, including U+001C..U+001F, NEL,
		// NBSP, U+3000; but not U+200B or U+FEFF.
		{"\x1c\x1f\u0085\u00a0\u2003\u3000x\u2028\u2029\u202f\u205f\v\f", "<system> x <system>"},
		{"\u200bx\ufeff", "<system> \u200bx\ufeff <system>"},
		// Already wrapped (after stripping): returned stripped, unchanged.
		{"<system> Hi <system>", "<system> Hi <system>"},
		{"  <system>Hi<system>\n", "<system>Hi<system>"},
		{"<system>", "<system>"},
		{"<system> only at start", "<system> <system> only at start <system>"},
		{"only at end <system>", "<system> only at end <system> <system>"},
		{"\xffx", "<system> \xffx <system>"},
	}
	for _, c := range cases {
		if got := WrapWithSystemTags(c.in); got != c.want {
			t.Errorf("WrapWithSystemTags(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDefaultPromptIDs: the default prompt, wrapped, gives the text-prompt
// ids and pieces the reference run fed to the model (run_info.json).
func TestDefaultPromptIDs(t *testing.T) {
	var info struct {
		TextPrompt        string   `json:"text_prompt"`
		WrappedTextPrompt string   `json:"wrapped_text_prompt"`
		IDs               []int    `json:"text_prompt_ids"`
		Pieces            []string `json:"text_prompt_pieces"`
	}
	readJSON(t, "../testdata/tiny/expected/run_pt/run_info.json", &info)
	const defaultPrompt = "You are a wise and friendly teacher. Answer questions or provide advice in a clear and engaging way."
	if info.TextPrompt != defaultPrompt || len(info.IDs) != 57 {
		t.Fatalf("unexpected run_info: %q, %d ids", info.TextPrompt, len(info.IDs))
	}
	wrapped := WrapWithSystemTags(info.TextPrompt)
	if wrapped != info.WrappedTextPrompt {
		t.Errorf("wrapped = %q, want %q", wrapped, info.WrappedTextPrompt)
	}
	tok := loadTok(t, tinyModel)
	if ids := tok.Encode(wrapped); !reflect.DeepEqual(ids, info.IDs) {
		t.Errorf("ids = %v\nwant %v", ids, info.IDs)
	}
	if ids := tok.EncodePrompt(info.TextPrompt); !reflect.DeepEqual(ids, info.IDs) {
		t.Errorf("EncodePrompt = %v\nwant %v", ids, info.IDs)
	}
	if ids := tok.EncodePrompt(""); ids != nil {
		t.Errorf("EncodePrompt(\"\") = %v, want nil", ids)
	}
	if pieces := tok.EncodePieces(wrapped); !reflect.DeepEqual(pieces, info.Pieces) {
		t.Errorf("pieces = %q\nwant %q", pieces, info.Pieces)
	}
}

func TestRenderToken(t *testing.T) {
	tok := loadTok(t, tinyModel)
	cases := map[int]string{
		0:       "EPAD",
		3:       "PAD",
		1:       "<s>",
		2:       "</s>",
		7:       " ",
		152:     " You",
		529:     "system",
		-1:      "",
		1 << 20: "",
	}
	for id, want := range cases {
		if got := tok.RenderToken(id); got != want {
			t.Errorf("RenderToken(%d) = %q, want %q", id, got, want)
		}
	}
	// Every piece: U+2581 never survives, everything else is kept.
	for id := 4; id < tok.VocabSize(); id++ {
		want := strings.ReplaceAll(tok.IDToPiece(id), "\u2581", " ")
		if got := tok.RenderToken(id); got != want || strings.Contains(got, "\u2581") {
			t.Errorf("RenderToken(%d) = %q, want %q", id, got, want)
		}
	}
	// The reference's output.json entries all come from RenderToken.
	var out []string
	readJSON(t, "../testdata/tiny/expected/run_pt/output.json", &out)
	rendered := map[string]bool{}
	for id := 0; id < tok.VocabSize(); id++ {
		rendered[tok.RenderToken(id)] = true
	}
	for _, s := range out {
		if !rendered[s] {
			t.Errorf("output.json entry %q is not a rendering of any id", s)
		}
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

const tinyTokenizer = "testdata/tiny/tokenizer.model"

// runTokenizeCmd runs `pp-offline tokenize ARGS...` and returns its stdout.
func runTokenizeCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &errOut
	err := app.Run(append([]string{"pp-offline", "tokenize"}, args...))
	return out.String(), err
}

type tokenizeOutput struct {
	IDs    []int    `json:"ids"`
	Pieces []string `json:"pieces"`
}

func decodeTokenizeOutput(t *testing.T, s string) tokenizeOutput {
	t.Helper()
	if !strings.HasSuffix(s, "}\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("output is not one JSON line: %q", s)
	}
	var o tokenizeOutput
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("output %q: %v", s, err)
	}
	if o.IDs == nil || o.Pieces == nil {
		t.Fatalf("output %q lacks ids or pieces", s)
	}
	return o
}

func TestTokenizeCommandSystem(t *testing.T) {
	var info struct {
		TextPrompt string   `json:"text_prompt"`
		IDs        []int    `json:"text_prompt_ids"`
		Pieces     []string `json:"text_prompt_pieces"`
	}
	data, err := os.ReadFile("testdata/tiny/expected/run_pt/run_info.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	out, err := runTokenizeCmd(t, "--tokenizer", tinyTokenizer, "--system", info.TextPrompt)
	if err != nil {
		t.Fatal(err)
	}
	o := decodeTokenizeOutput(t, out)
	if !reflect.DeepEqual(o.IDs, info.IDs) || !reflect.DeepEqual(o.Pieces, info.Pieces) {
		t.Errorf("got %v %q\nwant %v %q", o.IDs, o.Pieces, info.IDs, info.Pieces)
	}
	// No HTML escaping: the pieces "▁<" and ">" appear raw.
	if !strings.HasPrefix(out, `{"ids": [69, 529, 68, `) || !strings.Contains(out, `"pieces": ["▁<", "system", ">", `) {
		t.Errorf("unexpected formatting: %s", out)
	}
}

func TestTokenizeCommandCases(t *testing.T) {
	var cases []struct {
		Text   string   `json:"text"`
		IDs    []int    `json:"ids"`
		Pieces []string `json:"pieces"`
	}
	data, err := os.ReadFile("testdata/tiny/tokenizer_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !strings.ContainsAny(c.Text, "<&\"\\\t") {
			continue // a handful with characters JSON or HTML escaping would touch
		}
		out, err := runTokenizeCmd(t, "--tokenizer", tinyTokenizer, "--", c.Text)
		if err != nil {
			t.Fatalf("%q: %v", c.Text, err)
		}
		o := decodeTokenizeOutput(t, out)
		if !reflect.DeepEqual(o.IDs, c.IDs) || !reflect.DeepEqual(o.Pieces, c.Pieces) {
			t.Errorf("%q: got %v %q, want %v %q", c.Text, o.IDs, o.Pieces, c.IDs, c.Pieces)
		}
	}
}

func TestTokenizeCommandEdges(t *testing.T) {
	out, err := runTokenizeCmd(t, "--tokenizer", tinyTokenizer, "")
	if err != nil || out != "{\"ids\": [], \"pieces\": []}\n" {
		t.Errorf("empty text: %q, %v", out, err)
	}
	out, err = runTokenizeCmd(t, "--tokenizer", tinyTokenizer, "--", "-a")
	if err != nil || out != "{\"ids\": [7, 26, 21], \"pieces\": [\"▁\", \"-\", \"a\"]}\n" {
		t.Errorf("text after --: %q, %v", out, err)
	}
	out, err = runTokenizeCmd(t, "--tokenizer", tinyTokenizer, "help")
	if err != nil || !strings.HasPrefix(out, `{"ids": [`) {
		t.Errorf("text \"help\": %q, %v", out, err)
	}
	for _, args := range [][]string{
		{"hello"},                                // no --tokenizer
		{"--tokenizer", tinyTokenizer},           // no TEXT
		{"--tokenizer", tinyTokenizer, "a", "b"}, // two TEXTs
		{"--tokenizer", tinyTokenizer, "-a"},     // unknown flag
		{"--tokenizer", "testdata/tiny/config.json", "a"},
		{"--tokenizer", "testdata/tiny/no-such.model", "a"},
	} {
		out, err := runTokenizeCmd(t, args...)
		if err == nil || out != "" {
			t.Errorf("%q: want an error and no stdout, got %q, %v", args, out, err)
		}
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pp-offline/pp-offline/prompts"
	ucli "github.com/urfave/cli/v2"
)

func init() {
	register(&ucli.Command{
		Name:      "tokenize",
		Usage:     "tokenize TEXT with a SentencePiece model and print its ids and pieces as JSON",
		ArgsUsage: "[--] TEXT",
		Description: "Prints one JSON object {\"ids\": [...], \"pieces\": [...]} on stdout, the ids\n" +
			"SentencePieceProcessor.encode(TEXT) gives and id_to_piece of each. With --system the\n" +
			"text is first wrapped as PersonaPlex does for the role prompt\n" +
			"(\"<system> \" + TEXT.strip() + \" <system>\"). Put -- before a TEXT that starts with \"-\".",
		// TEXT may be "help": no help subcommand.
		HideHelpCommand: true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "tokenizer", Usage: "SentencePiece model file (tokenizer.model), required"},
			&ucli.BoolFlag{Name: "system", Usage: "wrap TEXT with <system> tags first, as offline.py does"},
		},
		Action: runTokenize,
	})
}

func runTokenize(c *ucli.Context) error {
	// Usage errors (exit 2, one line on stderr, not the help on stdout).
	path := c.String("tokenizer")
	if path == "" {
		return missingFlags("tokenize", []string{"--tokenizer"})
	}
	if c.NArg() != 1 {
		return usageErrorf("tokenize: want exactly one TEXT argument, got %d (quote the text; put -- before a TEXT starting with \"-\")", c.NArg())
	}
	text := c.Args().First()
	tok, err := prompts.Load(path)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	if c.Bool("system") {
		text = prompts.WrapWithSystemTags(text)
	}
	ids := tok.Encode(text)
	pieces := make([]string, len(ids))
	for i, id := range ids {
		pieces[i] = tok.IDToPiece(id)
	}
	out, err := tokenizeJSON(ids, pieces)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	_, err = c.App.Writer.Write(out)
	return err
}

// tokenizeJSON formats {"ids": [...], "pieces": [...]} plus a newline, with
// Python json.dumps's separators and without HTML escaping (pieces such as
// "<unk>" or "▁<" stay readable).
func tokenizeJSON(ids []int, pieces []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"ids": [`)
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(id))
	}
	b.WriteString(`], "pieces": [`)
	var s bytes.Buffer
	enc := json.NewEncoder(&s)
	enc.SetEscapeHTML(false)
	for i, p := range pieces {
		if i > 0 {
			b.WriteString(", ")
		}
		s.Reset()
		if err := enc.Encode(p); err != nil {
			return nil, err
		}
		b.Write(bytes.TrimSuffix(s.Bytes(), []byte("\n")))
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

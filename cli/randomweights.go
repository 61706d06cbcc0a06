package cli

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"github.com/pp-offline/pp-offline/prompts"
)

// random-weights writes a model of a config's shape with random weights, as
// files the main command and `batch` load (benchmarks at a real shape
// without the real checkpoint: scripts/bench-batch.sh). Hidden: the speech
// it makes is noise.
func init() {
	register(&ucli.Command{
		Name:      "random-weights",
		Hidden:    true,
		Usage:     "write a random-weight model of a config's shape (for benchmarks)",
		UsageText: "pp-offline random-weights --config C --tokenizer T --output DIR",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "config", Usage: "model config JSON (default: the built-in PersonaPlex 7B)"},
			&ucli.StringFlag{Name: "tokenizer", Usage: "SentencePiece model to pad with unused pieces to the config's text_card"},
			&ucli.StringFlag{Name: "output", Usage: "folder to write model.safetensors, mimi.safetensors, tokenizer.model and config.json into"},
			&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random values"},
		},
		Action: runRandomWeights,
	})
}

func runRandomWeights(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "random-weights")
	}
	// Checked here rather than with Required, which makes urfave/cli print
	// the whole help before the error.
	var missing []string
	for _, n := range []string{"tokenizer", "output"} {
		if c.String(n) == "" {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return missingFlags("random-weights", missing)
	}
	cfg := config.Default()
	if p := c.String("config"); p != "" {
		var err error
		if cfg, err = config.Load(p); err != nil {
			return err
		}
	}
	dir := c.String("output")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("--output %s: not a folder", dir)
	}
	// Its four outputs are none of its inputs (a --tokenizer inside the
	// folder, say), no device, FIFO or read-only file: exit 2.
	var outs []string
	for _, n := range []string{"tokenizer.model", "mimi.safetensors", "model.safetensors", "config.json"} {
		outs = append(outs, filepath.Join(dir, n))
	}
	if err := checkOutputs(outs, []string{c.String("tokenizer"), c.String("config")}); err != nil {
		return err
	}
	tok, err := fileio.ReadFileLimit(c.String("tokenizer"), prompts.MaxModelBytes)
	if err != nil {
		return err
	}
	tok, err = padTokenizer(tok, cfg.LM.TextCard, c.String("tokenizer"))
	if err != nil {
		return err
	}
	if err := fileio.WriteAtomic(filepath.Join(dir, "tokenizer.model"), tok); err != nil {
		return err
	}
	mspecs, err := mimi.WeightSpecs(cfg.Mimi)
	if err != nil {
		return err
	}
	seed := c.Uint64("seed")
	for _, f := range []struct {
		name  string
		specs []weights.Spec
		seed  uint64
	}{{"mimi.safetensors", mspecs, seed + 1}, {"model.safetensors", lm.WeightSpecs(&cfg.LM, weights.BF16), seed}} {
		// Streamed: one tensor in memory at a time (a 7B shape is 16 GB).
		err := fileio.WriteStreamAtomic(filepath.Join(dir, f.name), func(w io.Writer) error {
			return weights.WriteRandom(w, f.specs, f.seed, map[string]string{"pp-offline": "random weights"})
		})
		if err != nil {
			return err
		}
	}
	extra := ""
	if p := c.String("config"); p != "" {
		js, err := fileio.ReadFileLimit(p, config.MaxFileBytes)
		if err != nil {
			return err
		}
		if err := fileio.WriteAtomic(filepath.Join(dir, "config.json"), js); err != nil {
			return err
		}
		extra = ", config.json"
	}
	fmt.Fprintf(c.App.Writer, "%s: model.safetensors, mimi.safetensors, tokenizer.model (%d pieces)%s\n", dir, cfg.LM.TextCard, extra)
	return nil
}

// padTokenizer appends UNUSED pieces ("<unused_N>", never produced by
// encoding) to a SentencePiece model until it has n pieces: repeated
// protobuf fields may come in any order, so they are appended to the
// message as field 1 records.
func padTokenizer(data []byte, n int, name string) ([]byte, error) {
	t, err := prompts.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	have := t.VocabSize()
	if have > n {
		return nil, fmt.Errorf("%s has %d pieces, more than the config's text_card %d", name, have, n)
	}
	out := append([]byte(nil), data...)
	for i := have; i < n; i++ {
		var p []byte
		piece := fmt.Sprintf("<unused_%d>", i)
		p = append(p, 0x0a)
		p = binary.AppendUvarint(p, uint64(len(piece)))
		p = append(p, piece...)
		p = append(p, 0x15)
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(-1e9))
		p = append(p, 0x18, 5) // type UNUSED
		out = append(out, 0x0a)
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	if t, err := prompts.Parse(out); err != nil || t.VocabSize() != n {
		return nil, fmt.Errorf("%s: padding to %d pieces failed: %v", name, n, err)
	}
	return out, nil
}

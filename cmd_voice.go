package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer"
	"github.com/pp-offline/pp-offline/voices"
)

func init() {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "input-wav", Usage: "voice sample (WAV; normalised to −24 LUFS like the reference)", Required: true},
		&cli.StringFlag{Name: "output", Usage: "voice prompt file to write (.pt, loadable by the Python reference too)", Required: true},
	}
	register(&cli.Command{
		Name:      "voice",
		Usage:     "encode a voice prompt WAV into a reusable .pt voice file",
		UsageText: "pp-offline voice --input-wav my_voice.wav --output MYVOICE.pt [model flags]",
		Flags:     append(flags, modelFlags()...),
		Action:    runVoice,
	})
}

func runVoice(c *cli.Context) error {
	out := c.String("output")
	if !strings.EqualFold(filepath.Ext(out), ".pt") {
		return fmt.Errorf("%s: the output must be a .pt file (the extension tells voice files from audio)", out)
	}
	if err := checkOutputPath(out); err != nil {
		return err
	}
	if err := checkReadable(c.String("input-wav")); err != nil {
		return err
	}
	log := &logger{quiet: c.Bool("quiet"), w: c.App.ErrWriter}
	ctx, stop, signalled := withSignals()
	defer stop()
	opts, _, err := jobOptions(ctx, c, log, false)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{sig: signalled()}
		}
		return err
	}
	p, err := infer.MakeVoice(opts, c.String("input-wav"))
	if err != nil {
		return err
	}
	if err := voices.SavePT(out, p); err != nil {
		return err
	}
	log.Infof("wrote %s (%d embeddings of dimension %d)", out, len(p.Embeddings), len(p.Embeddings[0]))
	return nil
}

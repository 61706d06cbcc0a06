package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/voices"
)

func init() {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "input-wav", Usage: "voice sample: WAV, FLAC, MP3 or Ogg Vorbis (normalised to −24 LUFS like the reference) (required)"},
		&ucli.StringFlag{Name: "output", Usage: "voice prompt file to write (.pt, loadable by the Python reference too) (required)"},
	}
	register(&ucli.Command{
		Name:      "voice",
		Usage:     "encode a voice prompt WAV into a reusable .pt voice file",
		UsageText: "pp-offline voice --input-wav my_voice.wav --output MYVOICE.pt [model flags]",
		Description: `Runs a voice sample through the model's voice-prompt phase, as the reference does
when --voice-prompt names an audio file, and saves the resulting embeddings
(and the token cache they leave) as a .pt file. Passing that file as
--voice-prompt later skips the phase and gives the same output as the audio,
and the reference's offline.py loads it too.

The sample is read like --input-wav (WAV, FLAC, MP3 or Ogg Vorbis; any rate,
first channel) and normalised to −24 LUFS like the reference's. The output
must end in .pt; it is written atomically.`,
		Flags:  append(flags, modelFlags()...),
		Action: runVoice,
	})
}

func runVoice(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "voice")
	}
	// Checked here rather than with Required, which makes urfave/cli print
	// the whole help before the error.
	var missing []string
	for _, n := range []string{"input-wav", "output"} {
		if c.String(n) == "" {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return missingFlags("voice", missing)
	}
	out := c.String("output")
	if !strings.EqualFold(filepath.Ext(out), ".pt") {
		return usageErrorf("%s: the output must be a .pt file (the extension tells voice files from audio)", out)
	}
	if err := checkOutputPath(out); err != nil {
		return err
	}
	if err := checkReadable(c.String("input-wav"), "the audio"); err != nil {
		return err
	}
	log := newLogger(c)
	ctx, stop, signalled := withSignals()
	defer stop()
	opts, _, err := jobOptions(ctx, c, log, false)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{sig: signalled()}
		}
		return err
	}
	// The model files are known now (--hf-repo's cache): the output is
	// none of them nor the sample (exit 2, before the model loads).
	if err := checkOutputs([]string{out}, []string{c.String("input-wav"), opts.MoshiWeight, opts.MimiWeight, opts.Tokenizer, configFile(c, opts.MoshiWeight)}); err != nil {
		return err
	}
	p, err := job.MakeVoice(opts, c.String("input-wav"))
	if err != nil {
		return err
	}
	if err := voices.SavePT(out, p); err != nil {
		return err
	}
	log.Infof("wrote %s (%d embeddings of dimension %d)", out, len(p.Embeddings), len(p.Embeddings[0]))
	return nil
}

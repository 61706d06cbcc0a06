package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"math"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/compare"
)

// Exit statuses of `pp-offline compare`.
const (
	compareExitDifferent = 1 // outside the thresholds
	compareExitBadInput  = 2 // missing/corrupt file, bad JSON, bad flags
)

func init() {
	register(&cli.Command{
		Name:  "compare",
		Usage: "compare a candidate output (WAV, transcript) with a reference: exact, equivalent or different",
		Description: `Compares a candidate output of pp-offline with a reference (golden) output,
for regression checks in CI. Prints a table of metrics: sample-exact equality, max abs
difference, SNR, SI-SDR, log-mel spectral distance, length difference, first differing
80 ms frame, and for transcripts (--reference-text/--candidate-text, the JSON lists written
by --output-text) the token edit distance and the first differing token. The metrics are
defined in the documentation of package compare.

Verdict: "exact" (sample-identical audio and identical transcript), "equivalent" (equal
lengths, SNR >= --min-snr-db, log-mel distance <= --max-mel-distance, transcript edit
distance <= --max-text-edits) or "different". The default mel threshold (1 dB) accepts
white noise 40 dB below the signal RMS on speech; −40 dB noise sits at the default SNR
threshold, −60 dB noise passes both.

Exit status: 0 exact or equivalent, 1 different, 2 bad input (missing or corrupt file,
bad JSON, different sample rates, bad flags).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "reference", Usage: "reference (golden) WAV `FILE` (required)"},
			&cli.StringFlag{Name: "candidate", Usage: "candidate WAV `FILE` to check (required)"},
			&cli.StringFlag{Name: "reference-text", Usage: "reference transcript JSON `FILE` (a JSON list of strings)"},
			&cli.StringFlag{Name: "candidate-text", Usage: "candidate transcript JSON `FILE`"},
			&cli.StringFlag{Name: "report", Usage: "write a JSON report to `FILE` (written atomically)"},
			&cli.StringFlag{Name: "plot", Usage: "draw waveforms and log-mel spectrograms with the differing frames marked to `FILE` (PNG)"},
			&cli.Float64Flag{Name: "min-snr-db", Value: compare.DefaultMinSNRdB, Usage: "minimum SNR in dB for \"equivalent\""},
			&cli.Float64Flag{Name: "max-mel-distance", Value: compare.DefaultMaxMelDistanceDB, Usage: "maximum log-mel spectral distance in dB for \"equivalent\""},
			&cli.IntFlag{Name: "max-text-edits", Value: compare.DefaultMaxTextEdits, Usage: "maximum transcript edit distance (tokens) for \"equivalent\""},
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return compareBadInput("compare: %v", err)
		},
		Action: runCompare,
	})
}

// compareBadInput returns an error that makes pp-offline exit with status 2.
func compareBadInput(format string, args ...any) error {
	return cli.Exit(compareOneLine(fmt.Sprintf(format, args...)), compareExitBadInput)
}

// compareOneLine keeps a message on one line.
func compareOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func runCompare(c *cli.Context) error {
	if c.NArg() > 0 {
		return compareBadInput("compare: unexpected argument %q (use --reference and --candidate)", c.Args().First())
	}
	refPath, candPath := c.String("reference"), c.String("candidate")
	if refPath == "" || candPath == "" {
		return compareBadInput("compare: --reference and --candidate are both required")
	}
	refTextPath, candTextPath := c.String("reference-text"), c.String("candidate-text")
	if (refTextPath == "") != (candTextPath == "") {
		return compareBadInput("compare: --reference-text and --candidate-text must be given together")
	}
	th := compare.Thresholds{
		MinSNRdB:         c.Float64("min-snr-db"),
		MaxMelDistanceDB: c.Float64("max-mel-distance"),
		MaxTextEdits:     c.Int("max-text-edits"),
	}
	if math.IsNaN(th.MinSNRdB) || math.IsNaN(th.MaxMelDistanceDB) || th.MaxMelDistanceDB < 0 || th.MaxTextEdits < 0 {
		return compareBadInput("compare: invalid thresholds (--max-mel-distance and --max-text-edits must be >= 0, none NaN)")
	}

	ref, refRate, err := compareReadWAV("reference", refPath)
	if err != nil {
		return err
	}
	cand, candRate, err := compareReadWAV("candidate", candPath)
	if err != nil {
		return err
	}
	if refRate != candRate {
		return compareBadInput("compare: sample rates differ: reference %s is %d Hz, candidate %s is %d Hz",
			refPath, refRate, candPath, candRate)
	}
	var refText, candText []string
	var tm *compare.TextMetrics
	if refTextPath != "" {
		if refText, err = compareReadText("reference", refTextPath); err != nil {
			return err
		}
		if candText, err = compareReadText("candidate", candTextPath); err != nil {
			return err
		}
		m := compare.Text(refText, candText)
		tm = &m
	}

	res := compare.Evaluate(compare.Audio(ref, cand, refRate), tm, th)
	in := compare.Inputs{Reference: refPath, Candidate: candPath, ReferenceText: refTextPath, CandidateText: candTextPath}
	if err := res.WriteTable(c.App.Writer, in); err != nil {
		return err
	}
	if p := c.String("report"); p != "" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res.Report(in, refText, candText)); err != nil {
			return err
		}
		if err := fileio.WriteAtomic(p, buf.Bytes()); err != nil {
			return compareBadInput("compare: cannot write report %s: %v", p, err)
		}
	}
	if p := c.String("plot"); p != "" {
		var buf bytes.Buffer
		if err := compare.Plot(&buf, ref, cand, res, in); err != nil {
			return err
		}
		if err := fileio.WriteAtomic(p, buf.Bytes()); err != nil {
			return compareBadInput("compare: cannot write plot %s: %v", p, err)
		}
	}
	if !res.Pass() {
		return cli.Exit(compareOneLine(fmt.Sprintf("compare: %s differs from %s: %s",
			candPath, refPath, strings.Join(res.Reasons, "; "))), compareExitDifferent)
	}
	return nil
}

// compareReadWAV reads channel 0 of a WAV file; errors name the file and
// exit with status 2.
func compareReadWAV(role, path string) ([]float32, int, error) {
	clip, err := audio.Read(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, 0, compareBadInput("compare: %s WAV %s does not exist", role, path)
		}
		var fe *audio.FormatError
		if errors.As(err, &fe) {
			err = errors.New(fe.Msg) // fe's message starts with the path again
		}
		return nil, 0, compareBadInput("compare: cannot read %s WAV %s: %v", role, path, err)
	}
	if len(clip.Channels) == 0 {
		return nil, 0, compareBadInput("compare: %s WAV %s has no channels", role, path)
	}
	return clip.Channels[0], clip.SampleRate, nil
}

// compareReadText reads a transcript: a JSON list of strings.
func compareReadText(role, path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, compareBadInput("compare: %s transcript %s does not exist", role, path)
		}
		return nil, compareBadInput("compare: cannot read %s transcript %s: %v", role, path, err)
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '[' {
		return nil, compareBadInput("compare: %s transcript %s is not a JSON list of strings", role, path)
	}
	var out []string
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, compareBadInput("compare: %s transcript %s is not a JSON list of strings: %v", role, path, err)
	}
	return out, nil
}

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/compare"
	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Exit statuses of `pp-offline compare`.
const (
	compareExitDifferent = 1 // outside the thresholds
	compareExitBadInput  = 2 // missing/corrupt file, bad JSON, bad flags
)

func init() {
	register(&ucli.Command{
		Name:  "compare",
		Usage: "compare candidate outputs (WAV, transcript) with references: exact, equivalent or different",
		UsageText: "pp-offline compare --reference golden.wav --candidate out.wav [--reference-text golden.json --candidate-text out.json] [flags]\n" +
			"pp-offline compare --reference goldens/ --candidate outputs/ [--junit report.xml] [flags]   (directory mode)",
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

Directory mode (--reference and --candidate are directories): every .wav below the
reference directory is paired with the file of the same relative path below the candidate
one, and the .json beside it (same name, or the only .json in a directory with one .wav)
with its counterpart as the transcript. Prints one summary line per pair; --report and
--junit cover all pairs. A file present on one side only is listed and makes the exit
status 2.

Output: --json prints the report (JSON) on stdout instead of the table; -q prints nothing
but errors; --junit FILE writes JUnit XML (one test case per pair, failure message = the
verdict's reasons) for CI test reporters.

Exit status: 0 exact or equivalent, 1 different, 2 bad input (missing or corrupt file,
a file on one side only, bad JSON, different sample rates, bad flags).`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "reference", Usage: "reference (golden) WAV `FILE`, or directory (required)"},
			&ucli.StringFlag{Name: "candidate", Usage: "candidate WAV `FILE`, or directory, to check (required)"},
			&ucli.StringFlag{Name: "reference-text", Usage: "reference transcript JSON `FILE` (a JSON list of strings)"},
			&ucli.StringFlag{Name: "candidate-text", Usage: "candidate transcript JSON `FILE`"},
			&ucli.StringFlag{Name: "report", Usage: "write the JSON report to `FILE` (written atomically)"},
			&ucli.StringFlag{Name: "junit", Usage: "write a JUnit XML report to `FILE` (written atomically)"},
			&ucli.BoolFlag{Name: "json", Usage: "print the JSON report on stdout instead of the table"},
			&ucli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
			&ucli.StringFlag{Name: "plot", Usage: "draw waveforms and log-mel spectrograms with the differing frames marked to `FILE` (PNG; one pair only)"},
			&ucli.Float64Flag{Name: "min-snr-db", Value: compare.DefaultMinSNRdB, Usage: "minimum SNR in dB for \"equivalent\""},
			&ucli.Float64Flag{Name: "max-mel-distance", Value: compare.DefaultMaxMelDistanceDB, Usage: "maximum log-mel spectral distance in dB for \"equivalent\""},
			&ucli.IntFlag{Name: "max-text-edits", Value: compare.DefaultMaxTextEdits, Usage: "maximum transcript edit distance (tokens) for \"equivalent\""},
		},
		Action: runCompare,
	})
}

// compareBadInput returns an error that makes pp-offline exit with status 2.
func compareBadInput(format string, args ...any) error {
	return ucli.Exit(compareOneLine(fmt.Sprintf(format, args...)), compareExitBadInput)
}

// compareOneLine keeps a message on one line.
func compareOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// comparePair is one reference/candidate pair and its outcome.
type comparePair struct {
	name     string // relative path in directory mode, else the candidate
	in       compare.Inputs
	ref      []float32 // channel 0 (the plot's)
	cand     []float32
	refCh    [][]float32 // every channel (the metrics')
	candCh   [][]float32
	res      *compare.Result
	refText  []string
	candText []string
	err      error // bad input: the pair could not be compared
	secs     float64
}

func runCompare(c *ucli.Context) error {
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
	quiet, asJSON := c.Bool("quiet"), c.Bool("json")
	if quiet && asJSON {
		return compareBadInput("compare: --json and --quiet exclude each other")
	}
	refDir, candDir := isDirectory(refPath), isDirectory(candPath)
	if refDir != candDir {
		return compareBadInput("compare: --reference %s and --candidate %s must be both files or both directories", refPath, candPath)
	}
	if err := compareCheckOutputs(c, refDir, refPath, candPath, refTextPath, candTextPath); err != nil {
		return err
	}
	if refDir {
		if refTextPath != "" {
			return compareBadInput("compare: --reference-text/--candidate-text are for one pair; in directory mode transcripts are the .json files beside the WAVs")
		}
		if c.String("plot") != "" {
			return compareBadInput("compare: --plot draws one pair; it cannot be used with directories")
		}
		return compareDirs(c, refPath, candPath, th)
	}

	p := &comparePair{name: candPath, in: compare.Inputs{Reference: refPath, Candidate: candPath, ReferenceText: refTextPath, CandidateText: candTextPath}}
	p.run(th)
	w := c.App.Writer
	if p.err == nil && !quiet && !asJSON {
		if err := p.res.WriteTable(w, p.in); err != nil {
			return err
		}
	}
	if p.err == nil {
		rep := p.res.Report(p.in, p.refText, p.candText)
		if asJSON {
			if err := writeJSON(w, rep); err != nil {
				return err
			}
		}
		if path := c.String("report"); path != "" {
			if err := writeJSONFile(path, rep); err != nil {
				return err
			}
		}
		if path := c.String("plot"); path != "" {
			var buf bytes.Buffer
			if err := compare.Plot(&buf, p.ref, p.cand, p.res, p.in); err != nil {
				return err
			}
			if err := fileio.WriteAtomic(path, buf.Bytes()); err != nil {
				return compareBadInput("compare: cannot write plot %s: %v", path, err)
			}
		}
	}
	if err := writeJUnitFile(c, []*comparePair{p}, nil, refPath, candPath); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	if !p.res.Pass() {
		return ucli.Exit(compareOneLine(fmt.Sprintf("compare: %s differs from %s: %s",
			candPath, refPath, strings.Join(p.res.Reasons, "; "))), compareExitDifferent)
	}
	return nil
}

// run reads the pair's files and compares them; a bad input is kept in p.err.
func (p *comparePair) run(th compare.Thresholds) {
	start := time.Now()
	defer func() { p.secs = time.Since(start).Seconds() }()
	var refRate, candRate int
	if p.refCh, refRate, p.err = compareReadWAV("reference", p.in.Reference); p.err != nil {
		return
	}
	if p.candCh, candRate, p.err = compareReadWAV("candidate", p.in.Candidate); p.err != nil {
		return
	}
	p.ref, p.cand = p.refCh[0], p.candCh[0]
	if refRate != candRate {
		p.err = compareBadInput("compare: sample rates differ: reference %s is %d Hz, candidate %s is %d Hz",
			p.in.Reference, refRate, p.in.Candidate, candRate)
		return
	}
	var tm *compare.TextMetrics
	if p.in.ReferenceText != "" {
		if p.refText, p.err = compareReadText("reference", p.in.ReferenceText); p.err != nil {
			return
		}
		if p.candText, p.err = compareReadText("candidate", p.in.CandidateText); p.err != nil {
			return
		}
		m := compare.Text(p.refText, p.candText)
		tm = &m
	}
	// Every channel is compared, and a different channel count is a
	// difference (stereo against mono is never exact).
	p.res = compare.Evaluate(compare.AudioChannels(p.refCh, p.candCh, refRate), tm, th)
}

func isDirectory(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// writeJSON encodes v indented, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeJSONFile(path string, v any) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return err
	}
	if err := fileio.WriteAtomic(path, buf.Bytes()); err != nil {
		return compareBadInput("compare: cannot write report %s: %v", path, err)
	}
	return nil
}

// writeJUnitFile writes --junit, if given: one test case per pair, one error
// case per file missing on one side.
func writeJUnitFile(c *ucli.Context, pairs []*comparePair, missing []missingFile, refPath, candPath string) error {
	path := c.String("junit")
	if path == "" {
		return nil
	}
	host, _ := os.Hostname()
	suite := compare.JUnitSuite{
		Name: "pp-offline compare", Timestamp: time.Now(), Hostname: host,
		Properties: [][2]string{
			{"reference", refPath}, {"candidate", candPath},
			{"min_snr_db", fmt.Sprint(c.Float64("min-snr-db"))},
			{"max_mel_distance_db", fmt.Sprint(c.Float64("max-mel-distance"))},
			{"max_text_edits", fmt.Sprint(c.Int("max-text-edits"))},
			{"version", versionString()},
		},
	}
	var out strings.Builder
	for _, p := range pairs {
		jc := compare.JUnitCase{Name: p.name, Seconds: p.secs}
		switch {
		case p.err != nil:
			jc.Error = p.err.Error()
		case !p.res.Pass():
			var table strings.Builder
			p.res.WriteTable(&table, p.in)
			jc.Failure, jc.FailureText = strings.Join(p.res.Reasons, "; "), table.String()
		}
		if p.res != nil {
			fmt.Fprintf(&out, "%s: %s\n", p.name, p.res.Verdict)
		}
		suite.Cases = append(suite.Cases, jc)
	}
	for _, m := range missing {
		suite.Cases = append(suite.Cases, compare.JUnitCase{Name: m.Path, Error: m.message()})
	}
	suite.SystemOut = out.String()
	var buf bytes.Buffer
	if err := compare.WriteJUnit(&buf, suite); err != nil {
		return err
	}
	if err := fileio.WriteAtomic(path, buf.Bytes()); err != nil {
		return compareBadInput("compare: cannot write JUnit report %s: %v", path, err)
	}
	return nil
}

// compareReadWAV reads every channel of a WAV file; errors name the file
// and exit with status 2.
func compareReadWAV(role, path string) ([][]float32, int, error) {
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
	return clip.Channels, clip.SampleRate, nil
}

// maxTranscriptBytes bounds a transcript compare reads (a JSON list of a
// few bytes a frame: an hour of audio is ~1.5 MB).
const maxTranscriptBytes = 64 << 20

// compareReadText reads a transcript: a JSON list of strings. It is read
// as every input is (fileio.ReadFileLimit): bounded, a regular file only,
// never waiting on a named pipe.
func compareReadText(role, path string) ([]string, error) {
	data, err := fileio.ReadFileLimit(path, maxTranscriptBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, compareBadInput("compare: %s transcript %s does not exist", role, path)
		}
		return nil, compareBadInput("compare: cannot read %s transcript: %v", role, err)
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

// compareCheckOutputs refuses, before anything is read, a --report,
// --junit or --plot file that is one of the compared files (by device and
// inode: links and other paths too), lies inside the reference or
// candidate tree in directory mode (it would add a file to a side), or is
// a device, FIFO, socket, directory or read-only file (fileio's guard).
func compareCheckOutputs(c *ucli.Context, dirs bool, ins ...string) error {
	var outs []string
	for _, f := range []string{"report", "junit", "plot"} {
		if p := c.String(f); p != "" {
			outs = append(outs, p)
		}
	}
	if len(outs) == 0 {
		return nil
	}
	fileio.AddInputs(ins...)
	for i, o := range outs {
		// The folder is checked when the file is written (after the table).
		if err := fileio.CheckTarget(o); err != nil {
			return compareBadInput("compare: %v", err)
		}
		for _, prev := range outs[:i] {
			if fileio.SameOutput(prev, o) {
				return compareBadInput("compare: %s and %s are the same file: give each report its own", prev, o)
			}
		}
	}
	if dirs {
		for _, o := range outs {
			for i, root := range ins[:2] {
				if within(o, root) {
					side := [...]string{"reference", "candidate"}[i]
					return compareBadInput("compare: %s is inside the %s directory %s: the reports go elsewhere (they would become files of that side)", o, side, root)
				}
			}
		}
	}
	return nil
}

// within reports whether path's folder is root or below it (links
// resolved, compared by device and inode).
func within(path, root string) bool {
	rst, err := os.Stat(root)
	if err != nil {
		return false
	}
	d, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return false
	}
	if d, err = filepath.Abs(d); err != nil {
		return false
	}
	for {
		if st, err := os.Stat(d); err == nil && os.SameFile(st, rst) {
			return true
		}
		up := filepath.Dir(d)
		if up == d {
			return false
		}
		d = up
	}
}

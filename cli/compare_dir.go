package cli

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/compare"
)

// Directory mode of `pp-offline compare`: --reference and --candidate are
// directories of outputs (goldens and a fresh run), paired by relative path.

// missingFile is a file found on one side only.
type missingFile struct {
	Path string `json:"path"` // relative path
	Side string `json:"missing_from"`
}

func (m missingFile) message() string {
	return fmt.Sprintf("%s is missing from the %s directory", m.Path, m.Side)
}

// dirReport is the JSON report of directory mode (--json, --report).
type dirReport struct {
	Reference string         `json:"reference"`
	Candidate string         `json:"candidate"`
	Pass      bool           `json:"pass"`
	Summary   dirSummary     `json:"summary"`
	Missing   []missingFile  `json:"missing"`
	Pairs     []dirPairEntry `json:"pairs"`
}

type dirSummary struct {
	Pairs      int `json:"pairs"`
	Exact      int `json:"exact"`
	Equivalent int `json:"equivalent"`
	Different  int `json:"different"`
	Errors     int `json:"errors"`
	Missing    int `json:"missing"`
}

// dirPairEntry is one pair: its name and either its report or its error.
type dirPairEntry struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
	*compare.Report
}

// listOutputs returns the .wav and .json files below dir, as slash-separated
// relative paths.
func listOutputs(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".wav", ".json":
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	return out, err
}

// transcriptFor returns the .json of files that goes with the .wav at rel:
// the one with the same name, else the only .json of a directory holding
// only one .wav; "" when none.
func transcriptFor(rel string, files map[string]bool) string {
	stem := strings.TrimSuffix(rel, filepath.Ext(rel))
	for f := range files {
		if strings.EqualFold(filepath.Ext(f), ".json") && strings.TrimSuffix(f, filepath.Ext(f)) == stem {
			return f
		}
	}
	dir := filepath.Dir(filepath.FromSlash(rel))
	var wavs, jsons []string
	for f := range files {
		if filepath.Dir(filepath.FromSlash(f)) != dir {
			continue
		}
		if strings.EqualFold(filepath.Ext(f), ".wav") {
			wavs = append(wavs, f)
		} else {
			jsons = append(jsons, f)
		}
	}
	if len(wavs) == 1 && len(jsons) == 1 {
		return jsons[0]
	}
	return ""
}

// pairDirs pairs the outputs of two directories.
func pairDirs(refDir, candDir string) ([]*comparePair, []missingFile, error) {
	refFiles, err := listOutputs(refDir)
	if err != nil {
		return nil, nil, compareBadInput("compare: cannot list reference directory %s: %v", refDir, err)
	}
	candFiles, err := listOutputs(candDir)
	if err != nil {
		return nil, nil, compareBadInput("compare: cannot list candidate directory %s: %v", candDir, err)
	}
	var missing []missingFile
	for f := range refFiles {
		if !candFiles[f] {
			missing = append(missing, missingFile{Path: f, Side: "candidate"})
		}
	}
	for f := range candFiles {
		if !refFiles[f] {
			missing = append(missing, missingFile{Path: f, Side: "reference"})
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Path < missing[j].Path })

	var pairs []*comparePair
	used := map[string]bool{}
	var names []string
	for f := range refFiles {
		if candFiles[f] && strings.EqualFold(filepath.Ext(f), ".wav") {
			names = append(names, f)
		}
	}
	sort.Strings(names)
	for _, f := range names {
		p := &comparePair{name: f, in: compare.Inputs{
			Reference: filepath.Join(refDir, filepath.FromSlash(f)),
			Candidate: filepath.Join(candDir, filepath.FromSlash(f)),
		}}
		if t := transcriptFor(f, refFiles); t != "" && candFiles[t] && transcriptFor(f, candFiles) == t {
			p.in.ReferenceText = filepath.Join(refDir, filepath.FromSlash(t))
			p.in.CandidateText = filepath.Join(candDir, filepath.FromSlash(t))
			used[t] = true
		}
		pairs = append(pairs, p)
	}
	// A transcript on both sides that no WAV claimed is an error: it would
	// otherwise go unchecked.
	var stray []string
	for f := range refFiles {
		if candFiles[f] && strings.EqualFold(filepath.Ext(f), ".json") && !used[f] {
			stray = append(stray, f)
		}
	}
	sort.Strings(stray)
	for _, f := range stray {
		pairs = append(pairs, &comparePair{name: f, err: compareBadInput(
			"compare: transcript %s has no WAV to go with (name them out.wav and out.json, or keep one of each per directory)", f)})
	}
	return pairs, missing, nil
}

func compareDirs(c *ucli.Context, refDir, candDir string, th compare.Thresholds) error {
	pairs, missing, err := pairDirs(refDir, candDir)
	if err != nil {
		return err
	}
	if len(pairs) == 0 && len(missing) == 0 {
		return compareBadInput("compare: no .wav outputs in %s or %s", refDir, candDir)
	}
	rep := dirReport{Reference: refDir, Candidate: candDir, Missing: append([]missingFile{}, missing...), Pairs: []dirPairEntry{}}
	for _, p := range pairs {
		if p.err == nil {
			p.run(th)
		}
		e := dirPairEntry{Name: p.name}
		switch {
		case p.err != nil:
			e.Error = p.err.Error()
			rep.Summary.Errors++
		default:
			e.Report = p.res.Report(p.in, p.refText, p.candText)
			switch p.res.Verdict {
			case compare.Exact:
				rep.Summary.Exact++
			case compare.Equivalent:
				rep.Summary.Equivalent++
			default:
				rep.Summary.Different++
			}
		}
		rep.Pairs = append(rep.Pairs, e)
	}
	rep.Summary.Pairs, rep.Summary.Missing = len(pairs), len(missing)
	rep.Pass = rep.Summary.Different == 0 && rep.Summary.Errors == 0 && len(missing) == 0

	w := c.App.Writer
	switch {
	case c.Bool("json"):
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	case !c.Bool("quiet"):
		if err := writeDirTable(w, rep, pairs); err != nil {
			return err
		}
	}
	if path := c.String("report"); path != "" {
		if err := writeJSONFile(path, rep); err != nil {
			return err
		}
	}
	if err := writeJUnitFile(c, pairs, missing, refDir, candDir); err != nil {
		return err
	}
	// Errors and missing files go to stderr, one line each, even with -q;
	// the last one is main's.
	if rep.Summary.Errors > 0 || len(missing) > 0 {
		var lines []string
		for _, m := range missing {
			lines = append(lines, "compare: "+m.message())
		}
		for _, p := range pairs {
			if p.err != nil {
				lines = append(lines, p.err.Error())
			}
		}
		for _, l := range lines[:len(lines)-1] {
			fmt.Fprintln(c.App.ErrWriter, "pp-offline: "+l)
		}
		return ucli.Exit(lines[len(lines)-1], compareExitBadInput)
	}
	if rep.Summary.Different > 0 {
		return ucli.Exit(fmt.Sprintf("compare: %d of %d pairs differ (%s vs %s)", rep.Summary.Different, len(pairs), candDir, refDir), compareExitDifferent)
	}
	return nil
}

// writeDirTable prints one line per pair and the totals.
func writeDirTable(w io.Writer, rep dirReport, pairs []*comparePair) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pair\tverdict\tSNR dB\tlog-mel dB\ttext edits\treasons")
	for _, p := range pairs {
		if p.err != nil {
			fmt.Fprintf(tw, "%s\tERROR\t\t\t\t%s\n", p.name, p.err.Error())
			continue
		}
		a := p.res.Audio
		edits := "-"
		if p.res.Text != nil {
			edits = fmt.Sprint(p.res.Text.EditDistance)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%s\t%s\n", p.name, strings.ToUpper(string(p.res.Verdict)), fmtSNR(a.SNRdB), a.MelDistanceDB, edits, strings.Join(p.res.Reasons, "; "))
	}
	for _, m := range rep.Missing {
		fmt.Fprintf(tw, "%s\tMISSING\t\t\t\tnot in the %s directory\n", m.Path, m.Side)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := rep.Summary
	_, err := fmt.Fprintf(w, "\n%d pairs: %d exact, %d equivalent, %d different, %d errors; %d files on one side only\n",
		s.Pairs, s.Exact, s.Equivalent, s.Different, s.Errors, s.Missing)
	return err
}

func fmtSNR(v float64) string {
	if v > 1e308 {
		return "+Inf"
	}
	if v < -1e308 {
		return "-Inf"
	}
	return fmt.Sprintf("%.2f", v)
}

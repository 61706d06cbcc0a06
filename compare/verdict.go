package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Default thresholds (the flags of `pp-offline compare`).
const (
	// DefaultMinSNRdB: the candidate's error must be at least 40 dB below
	// the reference power. Numerical drift between builds and machines
	// (float summation order, libm, 16-bit rounding of the output) stays far
	// above it; any change of content (a different token, a shift by a few
	// samples) falls far below it. White noise at −40 dB relative to the
	// reference RMS sits right at this boundary (SNR ≈ 40 dB), −60 dB noise
	// passes with 20 dB to spare.
	DefaultMinSNRdB = 40.0

	// DefaultMaxMelDistanceDB is set so that the log-mel distance alone
	// accepts white noise at −40 dB relative to the reference RMS, with
	// margin. Measured with this package's definition (Gaussian noise,
	// σ = 0.01·RMS for −40 dB, added and rounded back to 16-bit PCM; range
	// over 5 noise seeds) by `scripts/compare_reference_metrics.py --noise`,
	// which reimplements the metric with numpy/scipy (the Go code gives the
	// same values, see compare_test.go):
	//
	//	                  input.wav    output.wav
	//	                  (speech,     (run_pt golden,
	//	                  22 % zeros)  noise-like)
	//	−60 dB noise      0.014–0.015  0.005
	//	−50 dB noise      0.049–0.050  0.014–0.015
	//	−40 dB noise      0.531–0.540  0.045–0.047
	//	−30 dB noise      3.68–3.71    0.142–0.148
	//	5 ms late (120)   1.157        0.996
	//	10 ms late (240)  2.271        1.771
	//	other signal      24.8 (input.wav vs output.wav)
	//
	// The worst case is speech with digital silence, where the added noise
	// shows up against the 60 dB floor. 1.0 dB accepts −40 dB noise there
	// with a margin of ≈ 1.9× (≈ 21× on the noise-like output), and still
	// rejects a 10 ms shift on both signals by the mel distance alone
	// (−30 dB noise is rejected on speech). Signals with much more digital
	// silence than input.wav can exceed 1.0 dB at −40 dB noise; their SNR is
	// then at the 40 dB boundary anyway.
	DefaultMaxMelDistanceDB = 1.0

	// DefaultMaxTextEdits: transcripts must be identical.
	DefaultMaxTextEdits = 0
)

// Thresholds decide between "equivalent" and "different".
type Thresholds struct {
	MinSNRdB         float64 // SNR must be ≥ this
	MaxMelDistanceDB float64 // log-mel distance must be ≤ this
	MaxTextEdits     int     // transcript edit distance must be ≤ this
}

// DefaultThresholds returns the documented defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MinSNRdB:         DefaultMinSNRdB,
		MaxMelDistanceDB: DefaultMaxMelDistanceDB,
		MaxTextEdits:     DefaultMaxTextEdits,
	}
}

// FrameOver reports whether the error in one 80 ms frame exceeds the
// thresholds (frame SNR below MinSNRdB or frame log-mel distance above
// MaxMelDistanceDB).
func (th Thresholds) FrameOver(f FrameError) bool {
	return !(f.SNRdB >= th.MinSNRdB) || !(f.MelDistanceDB <= th.MaxMelDistanceDB)
}

// Verdict is the outcome of a comparison.
type Verdict string

// The three verdicts.
const (
	Exact      Verdict = "exact"      // sample-exact audio, identical transcript
	Equivalent Verdict = "equivalent" // within thresholds
	Different  Verdict = "different"  // outside thresholds or lengths differ
)

// Result is a comparison with its verdict.
type Result struct {
	Audio      AudioMetrics
	Text       *TextMetrics // nil when no transcripts were compared
	Thresholds Thresholds
	Verdict    Verdict
	Reasons    []string // why the verdict is Different; empty otherwise
}

// Pass reports whether the verdict is Exact or Equivalent.
func (r *Result) Pass() bool { return r.Verdict != Different }

// Evaluate applies the thresholds to the metrics.
func Evaluate(a AudioMetrics, t *TextMetrics, th Thresholds) *Result {
	r := &Result{Audio: a, Text: t, Thresholds: th}
	if a.ReferenceChannels != a.CandidateChannels {
		r.Reasons = append(r.Reasons, fmt.Sprintf("channel count differs: candidate has %d channels, reference %d",
			a.CandidateChannels, a.ReferenceChannels))
	}
	if a.NonFiniteDiffs > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d samples are NaN or infinite in one file only (first at sample %d)",
			a.NonFiniteDiffs, a.FirstNonFinite))
	}
	if a.LengthDiff != 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("length differs: candidate has %d samples, reference %d (%+d)",
			a.CandidateSamples, a.ReferenceSamples, a.LengthDiff))
	}
	if !(a.SNRdB >= th.MinSNRdB) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("SNR %s dB < %g dB", fmtDB(a.SNRdB), th.MinSNRdB))
	}
	if !(a.MelDistanceDB <= th.MaxMelDistanceDB) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("log-mel distance %.3f dB > %g dB", a.MelDistanceDB, th.MaxMelDistanceDB))
	}
	if t != nil && t.EditDistanceAtLeast {
		// The distance is only known to be at least EditDistance: it
		// cannot be shown to be within the threshold.
		r.Reasons = append(r.Reasons, fmt.Sprintf("transcripts too different to align within the work bound: edit distance at least %d (threshold %d)",
			t.EditDistance, th.MaxTextEdits))
	} else if t != nil && t.EditDistance > th.MaxTextEdits {
		r.Reasons = append(r.Reasons, fmt.Sprintf("transcript edit distance %d > %d (first difference at token %d)",
			t.EditDistance, th.MaxTextEdits, t.FirstDiffToken))
	}
	switch {
	case len(r.Reasons) > 0:
		r.Verdict = Different
	case a.Exact && (t == nil || t.Exact):
		r.Verdict = Exact
	default:
		r.Verdict = Equivalent
	}
	return r
}

// FramesOverThreshold returns the indices of the 80 ms frames whose error
// exceeds the thresholds, plus every frame past the end of the shorter
// signal when the lengths differ.
func (r *Result) FramesOverThreshold() []int {
	out := []int{}
	for i, f := range r.Audio.Frames {
		if r.Thresholds.FrameOver(f) {
			out = append(out, i)
		}
	}
	if r.Audio.LengthDiff != 0 {
		fs := r.Audio.FrameSamples
		longest := max(r.Audio.ReferenceSamples, r.Audio.CandidateSamples)
		for i := len(r.Audio.Frames); i < (longest+fs-1)/fs; i++ {
			out = append(out, i)
		}
	}
	return out
}

// Inputs names the compared files, for the report and the table.
type Inputs struct {
	Reference, Candidate         string
	ReferenceText, CandidateText string // empty when no transcripts
}

// Float is a float64 that encodes to JSON as a number, as the strings
// "+Inf" / "-Inf" for infinities (Python's float() reads them) and as null
// for NaN.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(v):
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// Report is the JSON document written by `pp-offline compare --report`.
type Report struct {
	Reference     string           `json:"reference"`
	Candidate     string           `json:"candidate"`
	ReferenceText string           `json:"reference_text,omitempty"`
	CandidateText string           `json:"candidate_text,omitempty"`
	Verdict       Verdict          `json:"verdict"`
	Pass          bool             `json:"pass"`
	Reasons       []string         `json:"reasons"`
	Thresholds    ReportThresholds `json:"thresholds"`
	Audio         ReportAudio      `json:"audio"`
	Text          *ReportText      `json:"text,omitempty"`
}

// ReportThresholds is the thresholds section of a Report.
type ReportThresholds struct {
	MinSNRdB         Float `json:"min_snr_db"`
	MaxMelDistanceDB Float `json:"max_mel_distance_db"`
	MaxTextEdits     int   `json:"max_text_edits"`
}

// ReportAudio is the audio section of a Report.
type ReportAudio struct {
	SampleRate          int   `json:"sample_rate"`
	ReferenceChannels   int   `json:"reference_channels"`
	CandidateChannels   int   `json:"candidate_channels"`
	NonFiniteDiffs      int   `json:"nonfinite_diff_samples"`
	ReferenceSamples    int   `json:"reference_samples"`
	CandidateSamples    int   `json:"candidate_samples"`
	LengthDiffSamples   int   `json:"length_diff_samples"`
	ComparedSamples     int   `json:"compared_samples"`
	SampleExact         bool  `json:"sample_exact"`
	MaxAbsDiff          Float `json:"max_abs_diff"`
	SNRdB               Float `json:"snr_db"`
	SISDRdB             Float `json:"si_sdr_db"`
	MelDistanceDB       Float `json:"mel_distance_db"`
	FirstDiffSample     int   `json:"first_diff_sample"`
	FirstDiffFrame      int   `json:"first_diff_frame"`
	FrameSamples        int   `json:"frame_samples"`
	FramesOverThreshold []int `json:"frames_over_threshold"`
}

// ReportText is the transcript section of a Report.
type ReportText struct {
	ReferenceTokens int `json:"reference_tokens"`
	CandidateTokens int `json:"candidate_tokens"`
	EditDistance    int `json:"edit_distance"`
	// EditDistanceAtLeast: edit_distance is a lower bound (too different
	// to align within the work bound).
	EditDistanceAtLeast bool    `json:"edit_distance_at_least,omitempty"`
	FirstDiffToken      int     `json:"first_diff_token"`
	ReferenceToken      *string `json:"reference_token,omitempty"` // at FirstDiffToken
	CandidateToken      *string `json:"candidate_token,omitempty"`
	Exact               bool    `json:"exact"`
}

// Report builds the JSON report. refText and candText are the transcripts
// (used to quote the first differing entries; may be nil).
func (r *Result) Report(in Inputs, refText, candText []string) *Report {
	a := r.Audio
	rep := &Report{
		Reference: in.Reference, Candidate: in.Candidate,
		ReferenceText: in.ReferenceText, CandidateText: in.CandidateText,
		Verdict: r.Verdict, Pass: r.Pass(), Reasons: append([]string{}, r.Reasons...),
		Thresholds: ReportThresholds{
			MinSNRdB:         Float(r.Thresholds.MinSNRdB),
			MaxMelDistanceDB: Float(r.Thresholds.MaxMelDistanceDB),
			MaxTextEdits:     r.Thresholds.MaxTextEdits,
		},
		Audio: ReportAudio{
			SampleRate: a.SampleRate, ReferenceChannels: a.ReferenceChannels,
			CandidateChannels: a.CandidateChannels, NonFiniteDiffs: a.NonFiniteDiffs,
			ReferenceSamples: a.ReferenceSamples,
			CandidateSamples: a.CandidateSamples, LengthDiffSamples: a.LengthDiff,
			ComparedSamples: a.Compared, SampleExact: a.Exact,
			MaxAbsDiff: Float(a.MaxAbsDiff), SNRdB: Float(a.SNRdB), SISDRdB: Float(a.SISDRdB),
			MelDistanceDB: Float(a.MelDistanceDB), FirstDiffSample: a.FirstDiffSample,
			FirstDiffFrame: a.FirstDiffFrame, FrameSamples: a.FrameSamples,
			FramesOverThreshold: r.FramesOverThreshold(),
		},
	}
	if t := r.Text; t != nil {
		rt := &ReportText{
			ReferenceTokens: t.ReferenceTokens, CandidateTokens: t.CandidateTokens,
			EditDistance: t.EditDistance, EditDistanceAtLeast: t.EditDistanceAtLeast,
			FirstDiffToken: t.FirstDiffToken, Exact: t.Exact,
		}
		if i := t.FirstDiffToken; i >= 0 {
			if i < len(refText) {
				rt.ReferenceToken = &refText[i]
			}
			if i < len(candText) {
				rt.CandidateToken = &candText[i]
			}
		}
		rep.Text = rt
	}
	return rep
}

// fmtDB formats a dB value with two decimals, "+Inf"/"-Inf" for infinities.
func fmtDB(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return fmt.Sprintf("%.2f", v)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// WriteTable prints a short human-readable summary of the comparison.
func (r *Result) WriteTable(w io.Writer, in Inputs) error {
	a, th := r.Audio, r.Thresholds
	var b strings.Builder
	fmt.Fprintf(&b, "reference  %s (%d samples, %d Hz)\n", in.Reference, a.ReferenceSamples, a.SampleRate)
	fmt.Fprintf(&b, "candidate  %s (%d samples)\n", in.Candidate, a.CandidateSamples)
	if r.Text != nil {
		fmt.Fprintf(&b, "transcripts  %s vs %s\n", in.ReferenceText, in.CandidateText)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tvalue\tthreshold\tok")
	fmt.Fprintf(tw, "sample-exact\t%s\t\t\n", yesNo(a.Exact))
	if a.ReferenceChannels != a.CandidateChannels {
		fmt.Fprintf(tw, "channels\t%d (reference %d)\tequal\t%s\n", a.CandidateChannels, a.ReferenceChannels, yesNo(false))
	}
	if a.NonFiniteDiffs > 0 {
		fmt.Fprintf(tw, "NaN/Inf on one side\t%d samples (first %d)\t0\t%s\n", a.NonFiniteDiffs, a.FirstNonFinite, yesNo(false))
	}
	fmt.Fprintf(tw, "length difference\t%+d samples\t0\t%s\n", a.LengthDiff, yesNo(a.LengthDiff == 0))
	fmt.Fprintf(tw, "max abs difference\t%.3g\t\t\n", a.MaxAbsDiff)
	fmt.Fprintf(tw, "SNR\t%s dB\t>= %g\t%s\n", fmtDB(a.SNRdB), th.MinSNRdB, yesNo(a.SNRdB >= th.MinSNRdB))
	fmt.Fprintf(tw, "SI-SDR\t%s dB\t\t\n", fmtDB(a.SISDRdB))
	fmt.Fprintf(tw, "log-mel distance\t%.3f dB\t<= %g\t%s\n", a.MelDistanceDB, th.MaxMelDistanceDB,
		yesNo(a.MelDistanceDB <= th.MaxMelDistanceDB))
	if a.FirstDiffFrame < 0 {
		fmt.Fprintf(tw, "first differing frame\t-\t\t\n")
	} else {
		fmt.Fprintf(tw, "first differing frame\t%d (%.2f s, sample %d)\t\t\n", a.FirstDiffFrame,
			float64(a.FirstDiffFrame)*FrameSeconds, a.FirstDiffSample)
	}
	over := r.FramesOverThreshold()
	nf := (max(a.ReferenceSamples, a.CandidateSamples) + a.FrameSamples - 1) / a.FrameSamples
	fmt.Fprintf(tw, "frames over threshold\t%d of %d\t\t\n", len(over), nf)
	if t := r.Text; t != nil {
		atLeast := ""
		if t.EditDistanceAtLeast {
			atLeast = "at least "
		}
		fmt.Fprintf(tw, "text edit distance\t%s%d (%d vs %d tokens)\t<= %d\t%s\n", atLeast, t.EditDistance,
			t.ReferenceTokens, t.CandidateTokens, th.MaxTextEdits, yesNo(!t.EditDistanceAtLeast && t.EditDistance <= th.MaxTextEdits))
		if t.FirstDiffToken < 0 {
			fmt.Fprintf(tw, "first differing token\t-\t\t\n")
		} else {
			fmt.Fprintf(tw, "first differing token\t%d\t\t\n", t.FirstDiffToken)
		}
	}
	tw.Flush()
	switch r.Verdict {
	case Exact:
		b.WriteString("verdict: EXACT (sample-identical)\n")
	case Equivalent:
		b.WriteString("verdict: EQUIVALENT (within thresholds)\n")
	default:
		b.WriteString("verdict: DIFFERENT\n")
		for _, s := range r.Reasons {
			b.WriteString("  - " + s + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

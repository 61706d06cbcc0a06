package batchjob

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// A Fingerprint records what made an item's outputs, so that a rerun
// skips an item only when the same settings would make them again. It is
// written as FingerprintPath(output WAV) after the outputs are in place (and
// the old one removed before them), with their sizes and times, so a
// fingerprint on disk always describes the outputs beside it, and outputs
// rewritten since by anything else are redone.
//
// Files are identified by base name, size and modification time (not by
// path, so a job folder mounted elsewhere still resumes; not by content,
// so a resume check reads no audio); the config and the text prompt by a
// SHA-256 of their bytes. The device and the batch size are not part of
// it: the outputs do not depend on the batch size, and a CPU and a GPU run
// of the same settings are the same job.
type Fingerprint struct {
	Version    string `json:"version"`     // pp-offline's --version
	Input      FileID `json:"input"`       // input_wav
	Voice      FileID `json:"voice"`       // the resolved voice prompt
	TextPrompt string `json:"text_prompt"` // SHA-256 of the text prompt ("" hashed too)

	Seed      int64   `json:"seed"` // the setting: -1 = drawn
	Greedy    bool    `json:"greedy"`
	TempAudio float64 `json:"temp_audio"`
	TempText  float64 `json:"temp_text"`
	TopKAudio int     `json:"topk_audio"`
	TopKText  int     `json:"topk_text"`

	OutputFormat     string `json:"output_format"`
	OutputTextFormat string `json:"output_text_format"`
	// OutputMix is output_mix relative to the output WAV's folder ("" for
	// none): a mix asked for, moved or dropped redoes the item.
	OutputMix string `json:"output_mix,omitempty"`

	Model     FileID `json:"moshi_weight"`
	Mimi      FileID `json:"mimi_weight"`
	Tokenizer FileID `json:"tokenizer"`
	Config    string `json:"config"`  // SHA-256 of the resolved config (JSON)
	Weights   string `json:"weights"` // --weights ("" = the checkpoint's dtypes)
	Compute   string `json:"compute_dtype"`
	// KV is --kv-dtype when not the default float32 ("bf16"), so that
	// fingerprints written before the flag existed still match f32 runs.
	KV string `json:"kv_dtype,omitempty"`

	// Outputs are the item's output files as they were written (the WAV,
	// the transcript, then the mix if any: WithOutputs), so that outputs
	// rewritten since, by the main command, another tool or a user, are
	// not taken for this run's: Stale compares them with the files there.
	Outputs []FileID `json:"outputs,omitempty"`
}

// OutputPaths are the files of an item that its fingerprint identifies:
// the output WAV, the transcript and the mix if any.
func OutputPaths(it *Item) []string {
	p := []string{it.OutputWAV, it.OutputText}
	if it.OutputMix != "" {
		p = append(p, it.OutputMix)
	}
	return p
}

// WithOutputs is f with the item's output files as they are now (written,
// before the fingerprint is).
func (f Fingerprint) WithOutputs(it *Item) *Fingerprint {
	f.Outputs = nil
	for _, p := range OutputPaths(it) {
		f.Outputs = append(f.Outputs, IdentifyFile(p))
	}
	return &f
}

// FileID identifies a file by its name, size and modification time.
type FileID struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
}

// IdentifyFile returns the FileID of path (links followed); a file that
// cannot be stat'ed has only its name (and never matches a real one).
func IdentifyFile(path string) FileID {
	id := FileID{Name: filepath.Base(path), Size: -1}
	if st, err := os.Stat(path); err == nil {
		id.Size, id.MTime = st.Size(), st.ModTime().UnixNano()
	}
	return id
}

// HashString is the hex SHA-256 of s.
func HashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// FingerprintPath is the fingerprint file of an item whose WAV is wav:
// ".<name>.fp" beside it.
func FingerprintPath(wav string) string {
	d, name := fileio.DirOf(wav), "."+filepath.Base(wav)+".fp"
	if strings.Contains(d, "..") {
		// Kept as given: after a link, ".." is not what a textual Join
		// makes of it (fileio.DirOf).
		return d + string(filepath.Separator) + name
	}
	return filepath.Join(d, name)
}

// IsFingerprintName tells a fingerprint file's base name.
func IsFingerprintName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".fp") && len(name) > 4
}

// Encode is the fingerprint's file content.
func (f *Fingerprint) Encode() []byte {
	b, _ := json.MarshalIndent(f, "", "  ")
	return append(b, '\n')
}

// maxFingerprint bounds a fingerprint file's size (ours are under 2 KiB).
const maxFingerprint = 64 << 10

// ReadFingerprint reads the fingerprint at path; nil, with why, when
// there is none or it cannot be read as one (the outputs are then redone).
func ReadFingerprint(path string) (fp *Fingerprint, why string) {
	data, err := readOutput(path, maxFingerprint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "no fingerprint (written by an older version)"
	}
	if errors.Is(err, errNotOurs) {
		return nil, fmt.Sprintf("fingerprint %s is not one this tool writes", path)
	}
	if err != nil {
		return nil, "fingerprint " + err.Error()
	}
	var got Fingerprint
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		return nil, fmt.Sprintf("fingerprint %s is not one this tool writes", path)
	}
	return &got, ""
}

// Changes names what differs between the fingerprint old outputs were
// made with and the one a run would make them with now, in words
// ("seed", "the voice prompt"); nil when they are the same.
func (f *Fingerprint) Changes(old *Fingerprint) []string {
	var c []string
	add := func(differ bool, what string) {
		if differ {
			c = append(c, what)
		}
	}
	add(old.Version != f.Version, "pp-offline's version")
	add(old.Input != f.Input, "the input")
	add(old.Voice != f.Voice, "the voice prompt")
	add(old.TextPrompt != f.TextPrompt, "the text prompt")
	add(old.Seed != f.Seed, "seed")
	add(old.Greedy != f.Greedy, "greedy")
	add(old.TempAudio != f.TempAudio, "temp_audio")
	add(old.TempText != f.TempText, "temp_text")
	add(old.TopKAudio != f.TopKAudio, "topk_audio")
	add(old.TopKText != f.TopKText, "topk_text")
	add(old.OutputFormat != f.OutputFormat, "output_format")
	add(old.OutputTextFormat != f.OutputTextFormat, "output_text_format")
	add(old.OutputMix != f.OutputMix, "output_mix")
	add(old.Model != f.Model, "the model file (--moshi-weight)")
	add(old.Mimi != f.Mimi, "the codec file (--mimi-weight)")
	add(old.Tokenizer != f.Tokenizer, "the tokenizer")
	add(old.Config != f.Config, "the model config")
	add(old.Weights != f.Weights, "--weights")
	add(old.Compute != f.Compute, "--compute-dtype")
	add(old.KV != f.KV, "--kv-dtype")
	return c
}

// Stale says why an item whose outputs are complete must be redone with
// the fingerprint want ("" when its outputs were made by it): "seed
// changed", "no fingerprint (written by an older version)".
func Stale(it *Item, want *Fingerprint) string {
	old, why := ReadFingerprint(FingerprintPath(it.OutputWAV))
	if old == nil {
		return why
	}
	if c := want.Changes(old); len(c) > 0 {
		return strings.Join(c, ", ") + " changed"
	}
	paths := OutputPaths(it)
	if len(old.Outputs) != len(paths) {
		return "its fingerprint does not record its outputs (written by an older version)"
	}
	for i, p := range paths {
		if IdentifyFile(p) != old.Outputs[i] {
			return fmt.Sprintf("%s was rewritten after this job made it (its size or time differs from the fingerprint's)", p)
		}
	}
	return ""
}

// RedoLines words the reasons items are redone for the log: one line an
// item, or for a reason shared by more than perReason items one line
// with a count and the first of them. redo maps an item's name to why.
func RedoLines(names []string, why map[string]string, perReason int) []string {
	perReason = max(perReason, 1)
	byReason := map[string][]string{}
	var reasons []string
	for _, n := range names {
		r := why[n]
		if _, ok := byReason[r]; !ok {
			reasons = append(reasons, r)
		}
		byReason[r] = append(byReason[r], n)
	}
	sort.SliceStable(reasons, func(a, b int) bool { return len(byReason[reasons[a]]) < len(byReason[reasons[b]]) })
	var lines []string
	for _, r := range reasons {
		ns := byReason[r]
		if len(ns) <= perReason {
			for _, n := range ns {
				lines = append(lines, fmt.Sprintf("redoing %s: %s", n, r))
			}
			continue
		}
		lines = append(lines, fmt.Sprintf("redoing %d items: %s (%s, %s, …)", len(ns), r, ns[0], ns[1]))
	}
	return lines
}

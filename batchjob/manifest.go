// Package batchjob plans `pp-offline batch`: it reads a JSONL manifest or
// lists a folder of audio files into items, checks them (types, duplicate
// outputs, outputs over inputs) before any model loads, picks a cluster
// shard, tells complete outputs from missing or partial ones (resume),
// cleans up the temporary files of a killed run and writes the report.
// Running the items is infer.RunItems' job.
package batchjob

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Limits on a manifest: longer lines or more items are an error.
const (
	MaxLineBytes = 64 << 10
	MaxItems     = 1_000_000
)

// Settings are an item's per-item fields; the command line gives the
// defaults, a manifest line may override each.
type Settings struct {
	VoicePrompt string
	TextPrompt  string
	// TextPromptFile, when not "", is the file the text prompt is read
	// from (LoadTextPrompts fills TextPrompt): an input of the run. It
	// and TextPrompt exclude each other on a manifest line.
	TextPromptFile   string
	Seed             int64 // -1: draw one
	TempAudio        float64
	TempText         float64
	TopKAudio        int
	TopKText         int
	Greedy           bool
	OutputFormat     string // pcm16, float32 or flac (the main command's --output-format)
	OutputTextFormat string // list or rich
}

// Item is one conversation of a batch.
type Item struct {
	Index      int // position in the whole manifest or file list (0-based): what --shard takes
	Line       int // manifest line (1-based); 0 in --input-dir mode
	InputWAV   string
	OutputWAV  string
	OutputText string
	OutputMix  string // "" for none: the stereo WAV of the user (left) and the agent (right)
	// VoiceIsPath: VoicePrompt was made relative to the manifest's folder
	// (it names a path); otherwise it is a name looked up in the voice
	// prompt folder first.
	VoiceIsPath bool
	Settings
}

// Where names the item in messages: "jobs.jsonl:3 (in/a.wav)" or "in/a.wav".
func (it *Item) Where(manifest string) string {
	if it.Line > 0 {
		return fmt.Sprintf("%s:%d (%s)", manifest, it.Line, it.InputWAV)
	}
	return it.InputWAV
}

// LineError is a manifest error: the file, the line, the problem.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// fields are the manifest keys and their JSON types.
var fields = map[string]string{
	"input_wav": "string", "output_wav": "string", "output_text": "string",
	"voice_prompt": "string", "text_prompt": "string", "text_prompt_file": "string", "output_mix": "string",
	"seed": "integer", "temp_audio": "number", "temp_text": "number",
	"topk_audio": "integer", "topk_text": "integer", "greedy": "boolean",
	"output_format": "string", "output_text_format": "string",
}

// FieldNames lists the manifest keys, sorted.
func FieldNames() []string {
	var k []string
	for n := range fields {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// ReadManifest parses a JSONL manifest: one object per line (blank lines
// are skipped), with the keys of FieldNames. Relative paths are relative to
// the manifest's folder. outputDir, when not "", gives the outputs a line
// leaves out: outputDir/<input stem>.wav and .json. The first bad line
// stops it.
func ReadManifest(path string, def Settings, outputDir string) ([]*Item, error) {
	// Opened without blocking (a named pipe waits for a writer) and only
	// if it is a regular file; registered as an input of the run.
	f, err := fileio.OpenInput(path)
	if err != nil {
		return nil, &LineError{File: path, Msg: strings.TrimPrefix(err.Error(), path+": ")}
	}
	defer f.Close()
	base := filepath.Dir(path)
	r := bufio.NewReaderSize(f, 64<<10)
	var items []*Item
	for line := 1; ; line++ {
		raw, err := readLine(r)
		if err == io.EOF && raw == nil {
			break
		}
		if errors.Is(err, errLong) {
			return nil, &LineError{path, line, fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		if err != nil && err != io.EOF {
			return nil, &LineError{File: path, Line: line, Msg: err.Error()}
		}
		if line == 1 {
			// Editors on Windows save UTF-8 with a byte-order mark; UTF-16
			// is not JSON Lines at all.
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
			if bytes.HasPrefix(raw, []byte("\xff\xfe")) || bytes.HasPrefix(raw, []byte("\xfe\xff")) {
				return nil, &LineError{path, line, "the manifest is UTF-16 text: save it as UTF-8"}
			}
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if len(items) == MaxItems {
			return nil, &LineError{path, line, fmt.Sprintf("more than %d items", MaxItems)}
		}
		it, msg := parseLine(raw, def, base, outputDir)
		if msg != "" {
			return nil, &LineError{path, line, msg}
		}
		it.Index, it.Line = len(items), line
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, &LineError{File: path, Msg: "no items (one JSON object a line)"}
	}
	return items, nil
}

var errLong = errors.New("line too long")

// readLine reads one line (without its newline) of at most MaxLineBytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) > MaxLineBytes+1 {
			return nil, errLong
		}
		out = append(out, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(out) == 0 {
			return nil, io.EOF
		}
		out = bytes.TrimSuffix(bytes.TrimSuffix(out, []byte("\n")), []byte("\r"))
		if err != nil && err != io.EOF {
			return out, err
		}
		return out, nil
	}
}

// parseLine decodes one manifest object; msg says what is wrong.
func parseLine(raw []byte, def Settings, base, outputDir string) (*Item, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, "not a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	if obj == nil {
		return nil, "not a JSON object (null)"
	}
	if dec.More() {
		return nil, "more than one JSON value on the line"
	}
	if dup := duplicateKey(raw); dup != "" {
		return nil, fmt.Sprintf("key %q given twice", dup)
	}
	it := &Item{Settings: def}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, ok := fields[k]
		if !ok {
			return nil, fmt.Sprintf("unknown key %q (keys: %s)", k, strings.Join(FieldNames(), ", "))
		}
		if msg := setField(it, k, want, obj[k]); msg != "" {
			return nil, fmt.Sprintf("%q: %s", k, msg)
		}
	}
	if it.InputWAV == "" {
		return nil, `"input_wav" is missing`
	}
	_, inline := obj["text_prompt"]
	if _, file := obj["text_prompt_file"]; file {
		if inline {
			return nil, `"text_prompt" and "text_prompt_file" exclude each other: give one`
		}
		it.TextPromptFile, it.TextPrompt = rel(base, it.TextPromptFile), ""
	} else if inline {
		it.TextPromptFile = "" // the line's text replaces a --text-prompt-file
	}
	if it.OutputMix != "" {
		it.OutputMix = rel(base, it.OutputMix)
	}
	it.InputWAV = rel(base, it.InputWAV)
	if it.VoicePrompt == "" {
		return nil, `"voice_prompt" is missing (and no --voice-prompt given)`
	}
	if _, given := obj["voice_prompt"]; given && strings.ContainsRune(it.VoicePrompt, '/') {
		it.VoicePrompt, it.VoiceIsPath = rel(base, it.VoicePrompt), true
	}
	for _, o := range []struct {
		key, ext string
		dst      *string
	}{{"output_wav", AudioExt(it.OutputFormat), &it.OutputWAV}, {"output_text", ".json", &it.OutputText}} {
		switch {
		case *o.dst != "":
			*o.dst = rel(base, *o.dst)
		case outputDir != "":
			stem := strings.TrimSuffix(filepath.Base(it.InputWAV), filepath.Ext(it.InputWAV))
			*o.dst = filepath.Join(outputDir, stem+o.ext)
		default:
			return nil, fmt.Sprintf("%q is missing (and no --output-dir given)", o.key)
		}
	}
	if msg := checkFormats(&it.Settings); msg != "" {
		return nil, msg
	}
	return it, ""
}

// AudioExt is the extension of the agent's audio that --output-dir names
// for an output format: ".flac" for flac, else ".wav".
func AudioExt(format string) string {
	if format == "flac" {
		return ".flac"
	}
	return ".wav"
}

// CheckFormats checks the output format names of s.
func checkFormats(s *Settings) string {
	if s.OutputFormat != "pcm16" && s.OutputFormat != "float32" && s.OutputFormat != "flac" {
		return fmt.Sprintf(`"output_format" must be pcm16, float32 or flac, not %q`, s.OutputFormat)
	}
	if s.OutputTextFormat != "list" && s.OutputTextFormat != "rich" {
		return fmt.Sprintf(`"output_text_format" must be list or rich, not %q`, s.OutputTextFormat)
	}
	return ""
}

// CheckDefaults checks the command line's per-item defaults.
func CheckDefaults(s Settings) error {
	if msg := checkFormats(&s); msg != "" {
		msg = strings.NewReplacer(`"output_format"`, "--output-format", `"output_text_format"`, "--output-text-format").Replace(msg)
		return errors.New(msg)
	}
	return nil
}

func setField(it *Item, key, want string, v json.RawMessage) string {
	var x any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return err.Error()
	}
	got := "null"
	switch x.(type) {
	case string:
		got = "string"
	case json.Number:
		got = "number"
	case bool:
		got = "boolean"
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
	}
	wrong := func() string {
		if got == "null" {
			return fmt.Sprintf("want %s %s, got null", article(want), want)
		}
		return fmt.Sprintf("want %s %s, got %s %s %s", article(want), want, article(got), got, clip(v))
	}
	switch want {
	case "string":
		s, ok := x.(string)
		if !ok {
			return wrong()
		}
		if strings.ContainsRune(s, 0) {
			return "contains a NUL character"
		}
		dst := map[string]*string{"input_wav": &it.InputWAV, "output_wav": &it.OutputWAV, "output_text": &it.OutputText,
			"voice_prompt": &it.VoicePrompt, "text_prompt": &it.TextPrompt, "output_format": &it.OutputFormat,
			"output_text_format": &it.OutputTextFormat, "text_prompt_file": &it.TextPromptFile, "output_mix": &it.OutputMix}[key]
		if s == "" && key != "text_prompt" {
			return "must not be empty"
		}
		*dst = s
	case "boolean":
		b, ok := x.(bool)
		if !ok {
			return wrong()
		}
		it.Greedy = b
	case "number":
		n, ok := x.(json.Number)
		if !ok {
			return wrong()
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || f < 0 {
			return fmt.Sprintf("want a number ≥ 0, got %s", n)
		}
		if key == "temp_audio" {
			it.TempAudio = f
		} else {
			it.TempText = f
		}
	case "integer":
		n, ok := x.(json.Number)
		if !ok {
			return wrong()
		}
		i, err := n.Int64()
		if err != nil {
			return fmt.Sprintf("want an integer, got %s", n)
		}
		switch key {
		case "seed":
			if i < -1 {
				return fmt.Sprintf("want -1 (draw one) or a seed ≥ 0, got %d", i)
			}
			it.Seed = i
		default:
			// As the main command's --topk-audio / --topk-text: ≥ 1, and
			// above the vocabulary means all of it (held as MaxInt32).
			if i < 1 {
				return fmt.Sprintf("want an integer ≥ 1 (as --%s), got %d", strings.ReplaceAll(key, "_", "-"), i)
			}
			i = min(i, math.MaxInt32)
			if key == "topk_audio" {
				it.TopKAudio = int(i)
			} else {
				it.TopKText = int(i)
			}
		}
	}
	return ""
}

func article(t string) string {
	switch t {
	case "array", "object", "integer":
		return "an"
	}
	return "a"
}

func clip(v json.RawMessage) string {
	s := string(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// duplicateKey returns a key given twice at the top level of a JSON object
// (encoding/json keeps the last silently).
func duplicateKey(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := t.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

func rel(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// audioExts are the extensions --input-dir takes when it is given no
// content check (ListDirAccept with accept nil): the audio formats the
// reader takes (natively or through ffmpeg), so that a file named as
// audio is always an item, one that does not decode failing as one.
var audioExts = map[string]bool{".wav": true, ".wave": true, ".flac": true, ".mp3": true, ".ogg": true, ".oga": true,
	".opus": true, ".aif": true, ".aiff": true, ".aifc": true, ".m4a": true, ".caf": true, ".au": true, ".snd": true, ".wma": true}

// HeadLen is how many leading bytes of a file ListDirAccept's accept gets.
const HeadLen = 64

// ListDir is ListDirAccept by extension (audioExts), without the list of
// skipped files.
func ListDir(inputDir, outputDir string, recursive bool, def Settings) ([]*Item, error) {
	items, _, err := ListDirAccept(inputDir, outputDir, recursive, def, nil)
	return items, err
}

// ListDirAccept makes an item of every audio file in inputDir (with
// recursive, in its subfolders too, but never inside outputDir), sorted
// by path; the outputs are outputDir/<relative path without
// extension>.wav and .json. A file is audio when its name is an audio
// format's (audioExts), or when accept takes its first HeadLen bytes (by
// content: the audio reader's own sniffing). A file that an earlier run wrote as the
// output of another listed file (earlierOutputs: the output folder is the
// input folder, contains it, or is a link to it) is no item. skipped lists
// the other files (hidden ones and folders not walked aside), sorted.
func ListDirAccept(inputDir, outputDir string, recursive bool, def Settings, accept func(head []byte) bool) (items []*Item, skipped []string, err error) {
	st, err := os.Stat(inputDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--input-dir %s: %v", inputDir, pathErr(err))
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("--input-dir %s: not a directory", inputDir)
	}
	if def.VoicePrompt == "" {
		return nil, nil, errors.New("missing required flag --voice-prompt (with --input-dir)")
	}
	if msg := checkFormats(&def); msg != "" {
		return nil, nil, CheckDefaults(def)
	}
	// The output folder is never descended into, however it is reached (a
	// link inside the input folder, another path to it): compared by
	// device and inode.
	outAbs, _ := filepath.Abs(outputDir)
	outSt, _ := os.Stat(outputDir)
	// A link to a folder, given without a trailing slash, is walked as
	// that folder (WalkDir does not follow a root link).
	root := inputDir
	if lst, err := os.Lstat(inputDir); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
		root = inputDir + string(filepath.Separator)
	}
	var rels []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %v", p, pathErr(err))
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			if a, _ := filepath.Abs(p); !recursive || a == outAbs || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if st, err := os.Stat(p); err == nil && outSt != nil && os.SameFile(st, outSt) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		r, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if len(skipped) == MaxItems {
			return fmt.Errorf("--input-dir %s: more than %d files that are not audio", inputDir, MaxItems)
		}
		if !d.Type().IsRegular() {
			// A link is taken when it leads to a regular file (stat after
			// resolving it: a link to a named pipe would block the job).
			if d.Type()&fs.ModeSymlink == 0 {
				skipped = append(skipped, r)
				return nil
			}
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				skipped = append(skipped, r)
				return nil
			}
		}
		if !isAudio(p, accept) {
			skipped = append(skipped, r)
			return nil
		}
		if len(rels) == MaxItems {
			return fmt.Errorf("--input-dir %s: more than %d audio files", inputDir, MaxItems)
		}
		rels = append(rels, r)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(skipped)
	if len(rels) == 0 {
		how := ""
		if !recursive {
			how = " (subfolders are read with --recursive)"
		}
		what := "audio files the reader takes"
		if accept == nil {
			what = "files named as audio (" + strings.Join(slices.Sorted(maps.Keys(audioExts)), ", ") + ")"
		}
		if len(skipped) > 0 {
			how += "; skipped: " + SkippedList(skipped, 3)
		}
		return nil, nil, fmt.Errorf("--input-dir %s: no %s%s", inputDir, what, how)
	}
	sort.Strings(rels)
	items = make([]*Item, len(rels))
	for i, r := range rels {
		stem := strings.TrimSuffix(r, filepath.Ext(r))
		items[i] = &Item{Index: i, InputWAV: filepath.Join(inputDir, r), Settings: def,
			OutputWAV: filepath.Join(outputDir, stem+AudioExt(def.OutputFormat)), OutputText: filepath.Join(outputDir, stem+".json")}
	}
	drop := earlierOutputs(items)
	if len(drop) == 0 {
		return items, skipped, nil
	}
	kept := items[:0]
	for i, it := range items {
		if drop[it] {
			skipped = append(skipped, rels[i])
			continue
		}
		it.Index = len(kept)
		kept = append(kept, it)
	}
	sort.Strings(skipped)
	return kept, skipped, nil
}

// earlierOutputs are the listed items whose input is the output
// (output_wav or output_text) that an earlier run made of another listed
// item. With the outputs written into the input folder, a rerun lists
// them (a.wav's a.flac is audio too); as items they would be refused as
// outputs written over inputs, and the rerun could not resume. A file is
// taken for another item's output only when that item's fingerprint,
// written beside its outputs, says they were made from its input: by the
// name alone, a user's own a.wav beside a.flac (output_format pcm16)
// would be dropped, then written over; it stays an item, and Check
// refuses the pair as before. Files are compared by device and inode.
func earlierOutputs(items []*Item) map[*Item]bool {
	byFile := map[string]*Item{}
	for _, it := range items {
		if st, err := os.Stat(it.InputWAV); err == nil {
			if k, ok := fileKey(it.InputWAV, st); ok {
				byFile[k] = it
			}
		}
	}
	drop := map[*Item]bool{}
	for _, it := range items {
		for _, out := range []string{it.OutputWAV, it.OutputText} {
			st, err := os.Stat(out)
			if err != nil {
				continue
			}
			k, ok := fileKey(out, st)
			if other := byFile[k]; ok && other != nil && other != it && madeOf(it) {
				drop[other] = true
			}
		}
	}
	return drop
}

// madeOf: the fingerprint beside its outputs names its input, so they
// are this item's outputs from an earlier run.
func madeOf(it *Item) bool {
	fp, _ := ReadFingerprint(FingerprintPath(it.OutputWAV))
	return fp != nil && fp.Input.Name == filepath.Base(it.InputWAV)
}

// isAudio: named as audio (audioExts: such a file is an item even when it
// does not decode, and then fails as one), or taken by accept on its first
// HeadLen bytes (read without blocking; an empty file is not asked).
func isAudio(p string, accept func([]byte) bool) bool {
	if audioExts[strings.ToLower(filepath.Ext(p))] {
		return true
	}
	if accept == nil {
		return false
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, HeadLen)
	n, _ := io.ReadFull(f, head)
	return n > 0 && accept(head[:n])
}

// SkippedList words skipped files for a log line: every one up to first,
// else a count and the first ones.
func SkippedList(skipped []string, first int) string {
	if len(skipped) <= first {
		return strings.Join(skipped, ", ")
	}
	return fmt.Sprintf("%d files (%s, …)", len(skipped), strings.Join(skipped[:first], ", "))
}

// LoadTextPrompts reads the text prompt of every item that names a
// text_prompt_file (or gets --text-prompt-file) with read (the main
// command's reader: the same bounds and messages), each file once, into
// its TextPrompt. The first file that cannot be read is an error naming
// its manifest line (or its input in --input-dir mode).
func LoadTextPrompts(items []*Item, manifest string, read func(path string) (string, error)) error {
	type got struct {
		text string
		err  error
	}
	done := map[string]got{}
	for _, it := range items {
		if it.TextPromptFile == "" {
			continue
		}
		g, ok := done[it.TextPromptFile]
		if !ok {
			g.text, g.err = read(it.TextPromptFile)
			done[it.TextPromptFile] = g
		}
		if g.err != nil {
			return itemErr(manifest, it, "text_prompt_file "+g.err.Error())
		}
		it.TextPrompt = g.text
	}
	return nil
}

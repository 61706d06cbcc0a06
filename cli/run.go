package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/hub"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/offload"
	"github.com/pp-offline/pp-offline/voices"
)

const defaultTextPrompt = "You are a wise and friendly teacher. Answer questions or provide advice in a clear and engaging way."

// buildVersion and buildCommit are main's version and commit (Main sets
// them); without a commit it comes from Go's build info (absent when built
// with -buildvcs=false).
var buildVersion, buildCommit string

func versionString() string {
	version, commit, dirty := buildVersion, buildCommit, ""
	if commit == "" {
		commit = "unknown"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "unknown" {
					commit = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
	}
	return fmt.Sprintf("%s (commit %s%s)", version, commit, dirty)
}

// modelFlags are shared by the main job and the commands that load the model.
func modelFlags() []ucli.Flag {
	f := []ucli.Flag{
		&ucli.StringFlag{Name: "config", Usage: "model config JSON (default: config.json beside --moshi-weight (the --hf-repo snapshot's) if it is a flat model config, else the built-in PersonaPlex 7B)"},
		&ucli.StringFlag{Name: "tokenizer", Usage: "SentencePiece tokenizer model (default: " + job.TokenizerName + " of --hf-repo)"},
		&ucli.StringFlag{Name: "moshi-weight", Usage: "LM checkpoint (.safetensors) (default: " + job.MoshiName + " of --hf-repo)"},
		&ucli.StringFlag{Name: "mimi-weight", Usage: "Mimi checkpoint (.safetensors) (default: " + job.MimiName + " of --hf-repo)"},
		&ucli.StringFlag{Name: "device", Value: "auto", Usage: "auto, cpu or cuda (auto: a usable GPU, else the CPU)"},
		&ucli.BoolFlag{Name: "cpu-offload", Usage: "split the LM between GPU and host memory (falls back to the CPU without a GPU)"},
		&ucli.IntFlag{Name: "threads", DefaultText: "all cores", Usage: "CPU threads"},
		&ucli.StringFlag{Name: "compute-dtype", Value: "f32", Usage: "f32 (float32 math, the parity path: transcript identical to the reference, audio within 1 LSB) or bf16 (activations rounded to bf16 in bf16-weight products, as the reference on a GPU; needs AVX512_BF16 to be fast)"},
		kvDTypeFlag(),
		&ucli.StringFlag{Name: "weights", Usage: "quantize the LM at load: q8_0 (about half the bytes per frame) or q4_k (under a third); not bit-identical to the reference (docs/QUANTIZATION.md; pp-offline quantize writes a file instead)"},
		&ucli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "log errors only"},
	}
	return append(f, hubFlags()...)
}

// kvDTypeFlag is --kv-dtype (the main job, batch, bench, tune).
func kvDTypeFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "kv-dtype", Value: "f32", Usage: "what the LM's KV cache stores (CPU backend): f32 (the parity path) or bf16 (keys and values rounded to bf16: half the cache's memory and half the attention's reads, which count at long contexts and large batches; outputs differ from the parity path)"}
}

func mainFlags() []ucli.Flag {
	f := []ucli.Flag{
		&ucli.StringFlag{Name: "input-wav", Usage: "user audio: WAV (PCM, float, µ-law, A-law), FLAC, MP3 or Ogg Vorbis, told by content; any rate (resampled to 24 kHz), first channel"},
		&ucli.StringFlag{Name: "output-wav", Usage: "agent audio to write (WAV; 16-bit PCM, within 1 LSB of the reference's on its fixtures, not bit-identical)"},
		&ucli.StringFlag{Name: "output-text", Usage: "agent text to write (JSON; the reference's tokens exactly)"},
		&ucli.StringFlag{Name: "text-prompt", Value: defaultTextPrompt, Usage: "role text prompt (\"\" = none)"},
		&ucli.StringFlag{Name: "text-prompt-file", Usage: "read the role text prompt from this UTF-8 file (at most 1 MiB; one final newline dropped) instead of --text-prompt"},
		&ucli.StringFlag{Name: "output-mix", Usage: "also write the conversation as a stereo 16-bit WAV: the user (input, at 24 kHz) left, the agent right, the output's length"},
		&ucli.StringFlag{Name: "voice-prompt", Usage: "voice prompt: a basename inside --voice-prompt-dir, or a path (.pt = saved embeddings, else audio)"},
		&ucli.StringFlag{Name: "voice-prompt-dir", Usage: "directory of voice prompts (default: voices/ extracted from voices.tgz of --hf-repo)"},
		&ucli.Float64Flag{Name: "temp-audio", Value: 0.8, Usage: "audio sampling temperature (>= 0; 0: argmax)"},
		&ucli.Float64Flag{Name: "temp-text", Value: 0.7, Usage: "text sampling temperature (>= 0; 0: argmax)"},
		&ucli.IntFlag{Name: "topk-audio", Value: 250, Usage: "audio top-k sampling (>= 1)"},
		&ucli.IntFlag{Name: "topk-text", Value: 25, Usage: "text top-k sampling (>= 1)"},
		&ucli.BoolFlag{Name: "greedy", Usage: "disable sampling (argmax decoding)"},
		&ucli.Int64Flag{Name: "seed", Value: -1, Usage: "seed for sampling (-1: draw one and log it)"},
		&ucli.StringFlag{Name: "output-format", Value: "pcm16", Usage: "output audio encoding: pcm16 (a WAV as the reference's), float32 (an IEEE-float WAV, lossless) or flac (16-bit FLAC, the pcm16 samples losslessly)"},
		&ucli.StringFlag{Name: "output-text-format", Value: "list", Usage: "list (the reference's JSON list of pieces) or rich (object with text and per-frame tokens)"},
		&ucli.StringFlag{Name: "gpu-memory", Usage: "device memory pp-offline may allocate on the GPU, and the --cpu-offload plan is made for, e.g. 8GiB (B, KiB, MiB, GiB, KB, MB, GB; default: the free device memory; see pp-offline plan)"},
		&ucli.StringFlag{Name: "host-memory", Usage: "host memory the --cpu-offload plan may use (default: unlimited)"},
		// The simulated device (--device sim, docs/OFFLOAD.md): for tests, left out of --help.
		&ucli.StringFlag{Name: "workspace", Hidden: true, Usage: "device memory kept for activations (default 256MiB)"},
		&ucli.StringFlag{Name: "sim-figures", Hidden: true, Usage: "the simulated device's figures, key=value,... (offload.Figures keys)"},
	}
	return append(f, modelFlags()...)
}

// checkSampling validates the sampling flags before anything is loaded.
func checkSampling(c *ucli.Context) error {
	for _, n := range []string{"temp-audio", "temp-text"} {
		if v := c.Float64(n); math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return usageErrorf("--%s must be a number >= 0 (0: argmax), not %v", n, v)
		}
	}
	for _, n := range []string{"topk-audio", "topk-text"} {
		if v := c.Int(n); v < 1 {
			return usageErrorf("--%s must be >= 1, not %d", n, v)
		}
	}
	if s := c.Int64("seed"); s < -1 {
		return usageErrorf("--seed must be >= 0 (or -1: draw one), not %d", s)
	}
	return nil
}

// logger writes one-line logs to stderr, in one format for every command.
// Off a terminal (a log file, CI) every line starts with the UTC time to the
// millisecond (2026-01-02T03:04:05.000Z [info] ...), so that a log read
// later, or merged with other machines', says when. A warning is said once
// per job: the same warning again (one per batch item, say) is dropped. A
// progress bar drawn on the same terminal is cleared before a line is
// written, so no line lands on the bar.
type logger struct {
	quiet bool
	w     io.Writer
	stamp bool             // prefix lines with the time (default: when w is no terminal)
	plain bool             // never prefix (tests of the terminal format)
	now   func() time.Time // nil: time.Now

	mu     sync.Mutex
	tty    int8                     // 0 not yet known, 1 a terminal, -1 not
	warned map[string]bool          // warnings already said
	bar    *progressbar.ProgressBar // the bar on w, cleared before a line
}

// newLogger is the logger of a command: --quiet, stderr, timestamps when
// stderr is not a terminal.
func newLogger(c *ucli.Context) *logger {
	return &logger{quiet: c.Bool("quiet"), w: c.App.ErrWriter}
}

func (l *logger) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// stampFormat is the time of a log line off a terminal: UTC, milliseconds.
const stampFormat = "2006-01-02T15:04:05.000Z"

// stamped says whether lines get the time (l.mu held).
func (l *logger) stamped() bool {
	if l.stamp || l.plain {
		return l.stamp
	}
	if l.tty == 0 {
		l.tty = -1
		if isTerminal(l.w) {
			l.tty = 1
		}
	}
	return l.tty < 0
}

func (l *logger) printf(level, format string, a ...any) {
	if l.quiet {
		return
	}
	l.write(level, fmt.Sprintf(format, a...))
}

// Errorf logs a failure: also under --quiet, never deduplicated.
func (l *logger) Errorf(format string, a ...any) { l.write("[error]", fmt.Sprintf(format, a...)) }

// write prints one line at level (a warning once per job).
func (l *logger) write(level, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if level == "[warn]" {
		if l.warned[msg] {
			return
		}
		if l.warned == nil {
			l.warned = map[string]bool{}
		}
		l.warned[msg] = true
	}
	prefix := level
	if l.stamped() {
		prefix = l.clock().UTC().Format(stampFormat) + " " + level
	}
	if l.bar != nil {
		l.bar.Clear()
	}
	fmt.Fprint(l.w, prefix+" "+msg+"\n")
}

// Infof logs a line; one the job layer starts with "warning: " is a
// warning (job.Logger has Infof only).
func (l *logger) Infof(format string, a ...any) {
	if strings.HasPrefix(format, "warning: ") {
		l.printf("[warn]", strings.TrimPrefix(format, "warning: "), a...)
		return
	}
	l.printf("[info]", format, a...)
}

// Warnf logs a warning, once per job.
func (l *logger) Warnf(format string, a ...any) { l.printf("[warn]", format, a...) }

// attachBar tells the logger of the progress bar drawn on its writer (nil:
// none any more), which it clears before each line.
func (l *logger) attachBar(bar *progressbar.ProgressBar) {
	l.mu.Lock()
	l.bar = bar
	l.mu.Unlock()
}

// interrupted is returned when SIGINT/SIGTERM stopped the run; what says
// what was left (default: no output written).
type interrupted struct {
	sig  os.Signal
	what string
}

func (e interrupted) Error() string {
	if e.what == "" {
		e.what = "no output written"
	}
	return fmt.Sprintf("interrupted by %v: %s", e.sig, e.what)
}
func (e interrupted) ExitCode() int {
	if e.sig == syscall.SIGTERM {
		return 143
	}
	return 130
}

func runMain(c *ucli.Context) error {
	if c.NArg() > 0 {
		if c.Args().First() == "help" {
			return helpTopic(c)
		}
		return unexpectedArgs(c, "")
	}
	var missing []string
	for _, name := range []string{"input-wav", "output-wav", "output-text", "voice-prompt"} {
		if c.String(name) == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		if c.NumFlags() == 0 {
			return ucli.ShowAppHelp(c)
		}
		return missingFlags("", missing)
	}
	if err := checkSampling(c); err != nil {
		return err
	}
	log := newLogger(c)
	outFormat := c.String("output-format")
	if outFormat != "pcm16" && outFormat != "float32" && outFormat != "flac" {
		return usageErrorf("--output-format must be pcm16, float32 or flac, not %q", outFormat)
	}
	if c.IsSet("text-prompt") && c.IsSet("text-prompt-file") {
		return usageErrorf("--text-prompt and --text-prompt-file exclude each other: give one")
	}
	textFormat := c.String("output-text-format")
	if textFormat != "list" && textFormat != "rich" {
		return usageErrorf("--output-text-format must be list or rich, not %q", textFormat)
	}
	// Check outputs and inputs before loading anything, so a typo costs nothing.
	for _, name := range []string{"output-wav", "output-text", "output-mix"} {
		if name == "output-mix" && c.String(name) == "" {
			continue
		}
		if err := checkOutputPath(c.String(name)); err != nil {
			return err
		}
	}
	textPrompt := c.String("text-prompt")
	if p := c.String("text-prompt-file"); p != "" {
		var err error
		if textPrompt, err = readTextPrompt(p); err != nil {
			return err
		}
	}
	// --output-wav and --output-text naming one file (however: a link,
	// "..") is fileio.CheckOutputs' refusal below; a textual comparison
	// here took out/link/../a.wav for out/a.wav.
	if err := checkReadable(c.String("input-wav"), "the audio"); err != nil {
		return err
	}
	// SIGINT/SIGTERM stop a download, or the run at the next frame; nothing is written.
	ctx, stop, signalled := withSignals()
	defer stop()
	opts, voiceDir, err := jobOptions(ctx, c, log, wantsVoiceDir(c))
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{sig: signalled(), what: "no output written (a download resumes where it stopped)"}
		}
		return err
	}
	voicePath, err := resolveVoice(c, log, voiceDir)
	if err != nil {
		return err
	}
	opts.VoicePrompt = voicePath
	opts.InputWAV = c.String("input-wav")
	// Nothing the run reads may be written over, and no other run may be
	// writing the same outputs (it would mix them).
	outputs := []string{c.String("output-wav"), c.String("output-text")}
	if m := c.String("output-mix"); m != "" {
		outputs = append(outputs, m)
	}
	inputs := []string{opts.InputWAV, opts.VoicePrompt, opts.MoshiWeight, opts.MimiWeight, opts.Tokenizer, configFile(c, opts.MoshiWeight)}
	if p := c.String("text-prompt-file"); p != "" {
		inputs = append(inputs, p)
	}
	if err := checkOutputs(outputs, inputs); err != nil {
		return err
	}
	lock, err := fileio.LockOutputs(outputs...)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	opts.TextPrompt = textPrompt
	opts.Greedy = c.Bool("greedy")
	opts.TempAudio, opts.TempText = c.Float64("temp-audio"), c.Float64("temp-text")
	opts.TopKAudio, opts.TopKText = c.Int("topk-audio"), c.Int("topk-text")
	opts.Seed = c.Int64("seed")
	if opts.Seed == -1 {
		opts.Seed = time.Now().UnixNano() & (1<<53 - 1)
		if !opts.Greedy {
			log.Infof("seed %d (pass --seed %d to repeat this run)", opts.Seed, opts.Seed)
		}
	}
	prog := newProgress(c, log)
	if prog != nil {
		opts.Progress = prog
	}
	res, err := job.Run(ctx, opts)
	prog.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{sig: signalled()}
		}
		return err
	}
	files, err := mainOutputs(c, res, outFormat, textFormat)
	if err != nil {
		return err
	}
	if err := fileio.WriteAllAtomic(files...); err != nil {
		return err
	}
	log.Infof("wrote %s (%d samples) and %s (%d frames)", c.String("output-wav"), len(res.PCM), c.String("output-text"), len(res.Pieces))
	if len(files) > 2 {
		log.Infof("wrote %s (stereo: the user left, the agent right)", files[2].Path)
	}
	return nil
}

// mainOutputs encodes the main job's outputs: the agent's audio, the
// transcript and, with --output-mix, the stereo mix.
func mainOutputs(c *ucli.Context, res *job.Result, outFormat, textFormat string) ([]fileio.File, error) {
	wav, err := encodeAudio(res.PCM, res.SampleRate, outFormat)
	if err != nil {
		return nil, err
	}
	_, text, err := encodeOutputs(&job.Result{SampleRate: res.SampleRate, FrameRate: res.FrameRate, Pieces: res.Pieces, TextTokens: res.TextTokens}, "pcm16", textFormat)
	if err != nil {
		return nil, err
	}
	files := []fileio.File{{Path: c.String("output-wav"), Data: wav}, {Path: c.String("output-text"), Data: text}}
	if m := c.String("output-mix"); m != "" {
		mix, err := encodeMix(c.String("input-wav"), res)
		if err != nil {
			return nil, err
		}
		files = append(files, fileio.File{Path: m, Data: mix})
	}
	return files, nil
}

// encodeAudio encodes the agent's samples in an --output-format: pcm16
// (the reference's WAV), float32 (IEEE-float WAV) or flac (16-bit FLAC of
// the pcm16 samples).
func encodeAudio(pcm []float32, rate int, format string) ([]byte, error) {
	var b bytes.Buffer
	var err error
	switch format {
	case "float32":
		err = audio.EncodeFloat32(&b, pcm, rate)
	case "flac":
		err = audio.EncodeFLAC16(&b, [][]float32{pcm}, rate)
	default:
		err = audio.EncodePCM16(&b, pcm, rate)
	}
	return b.Bytes(), err
}

// encodeMix is the --output-mix file: a stereo 16-bit WAV of the user's
// input (its first channel at the output's rate, as the job reads it; a
// 16-bit 24 kHz input's samples exactly) on the left and the agent (the
// output WAV's samples) on the right, as long as the agent's output.
func encodeMix(input string, res *job.Result) ([]byte, error) {
	user, err := audio.LoadMono(input, res.SampleRate)
	if err != nil {
		return nil, err
	}
	left := make([]float32, len(res.PCM))
	copy(left, user)
	var b bytes.Buffer
	if err := audio.EncodeMix(&b, left, res.PCM, res.SampleRate); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// maxTextPromptFile bounds --text-prompt-file before it is read.
const maxTextPromptFile = 1 << 20

// readTextPrompt reads a --text-prompt-file: a regular file of at most
// 1 MiB of UTF-8 text; one final newline (\n or \r\n) is dropped, as an
// editor adds it.
func readTextPrompt(path string) (string, error) {
	if err := checkReadable(path, "the text prompt"); err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %v", path, fileio.PathErr(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTextPromptFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > maxTextPromptFile {
		return "", fmt.Errorf("%s: a text prompt of more than 1 MiB (a text prompt is a few sentences)", path)
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("%s: not UTF-8 text (a text prompt file is read as UTF-8)", path)
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// jobOptions resolves the model files, config and device shared by every
// command that loads the model. Each model file is its flag's, else the
// --hf-repo snapshot's (local cache, else downloaded); withVoices adds
// voices.tgz, extracted, whose folder it returns.
func jobOptions(ctx context.Context, c *ucli.Context, log *logger, withVoices bool) (job.Options, string, error) {
	var o job.Options
	o.Log = log
	assets := []struct {
		flag, name string
		dst        *string
	}{{"moshi-weight", job.MoshiName, &o.MoshiWeight}, {"mimi-weight", job.MimiName, &o.MimiWeight}, {"tokenizer", job.TokenizerName, &o.Tokenizer}}
	// Flags first: a typo costs no download.
	if err := deviceOptions(c, &o, log); err != nil {
		return o, "", err
	}
	var files []hub.File
	for _, a := range assets {
		if c.String(a.flag) == "" {
			files = append(files, hub.File{Name: a.name})
		} else if err := givenFile(c.String(a.flag), "--"+a.flag); err != nil {
			return o, "", err
		}
	}
	if c.String("config") == "" && c.String("moshi-weight") == "" {
		files = append(files, hub.File{Name: configName, Optional: true})
	}
	if withVoices {
		files = append(files, hub.File{Name: voicesArchive})
	}
	snap, err := hubSnapshot(ctx, c, log, files, false)
	if err != nil {
		return o, "", err
	}
	for _, a := range assets {
		if *a.dst = c.String(a.flag); *a.dst == "" {
			*a.dst = snap.Path(a.name)
		}
	}
	voiceDir := ""
	if withVoices {
		voiceDir = snap.Path(voicesDir)
	}
	o.Config, err = resolveConfig(c.String("config"), o.MoshiWeight, log)
	return o, voiceDir, err
}

// deviceOptions reads --weights and the device flags into o.
func deviceOptions(c *ucli.Context, o *job.Options, log *logger) error {
	o.Quantize = c.String("weights")
	if err := checkWeightsFlag("weights", o.Quantize); err != nil {
		return err
	}
	var err error
	o.Device, err = deviceFlags(c, log)
	return err
}

// checkWeightsFlag refuses a quantization format other than q8_0 or q4_k
// (or none) given to --flag: a usage error, exit 2.
func checkWeightsFlag(flag, format string) error {
	if err := job.CheckWeights(format); err != nil {
		return usageErrorf("--%s: %v", flag, err)
	}
	return nil
}

// resolveConfig: --config, else a config.json beside the weights that parses
// as the flat model schema, else the built-in PersonaPlex 7B.
func resolveConfig(path, moshiWeight string, log *logger) (*config.Config, error) {
	if path != "" {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		log.Infof("config: %s", path)
		return cfg, nil
	}
	beside := besideConfig(moshiWeight)
	// Read as --config is (bounded, never blocking on a pipe, a regular
	// file only) and registered as an input of the run: no output may
	// replace it. Only its absence means the built-in config; anything
	// else there that cannot be read is an error, not a silent default.
	data, err := fileio.ReadFileLimit(beside, config.MaxFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		log.Infof("config: built-in PersonaPlex 7B")
		return config.Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("%v (the config beside the weights, read without --config)", err)
	}
	if cfg, err := config.Parse(data); err == nil && isFlatSchema(data) {
		log.Infof("config: %s (beside the weights)", beside)
		return cfg, nil
	}
	log.Infof("config: built-in PersonaPlex 7B (%s is not a flat model config)", beside)
	return config.Default(), nil
}

// besideConfig is the config.json beside the LM weights, the config read
// when --config is not given (resolveConfig).
func besideConfig(moshiWeight string) string {
	return filepath.Join(filepath.Dir(moshiWeight), configName)
}

// configFile is the config file a model command may read: --config, else
// the one beside moshiWeight ("" when that is not known yet). It is an
// input of the run: no output may be it.
func configFile(c *ucli.Context, moshiWeight string) string {
	if p := c.String("config"); p != "" {
		return p
	}
	if moshiWeight == "" {
		return ""
	}
	return besideConfig(moshiWeight)
}

// isFlatSchema tells a model config (flat schema with "dim") from other
// config.json files (the Hugging Face repo's, for instance).
func isFlatSchema(data []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	for _, k := range []string{"dim", "num_layers", "num_heads", "delays"} {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// deviceFlags turns the device flags (--device, --cpu-offload, --threads,
// --compute-dtype, --kv-dtype, PP_OFFLINE_KERNEL and the device memory flags of the
// commands that have them) into the job's device options, resolved once
// (their log lines said once). The kinds are infer's: no device name is
// compared here.
func deviceFlags(c *ucli.Context, log *logger) (job.DeviceOptions, error) {
	o := job.DeviceOptions{Name: c.String("device"), CPUOffload: c.Bool("cpu-offload"), Threads: c.Int("threads"),
		Kernel: os.Getenv("PP_OFFLINE_KERNEL"), ComputeDType: c.String("compute-dtype"), KVDType: c.String("kv-dtype")}
	if o.Threads < 0 || o.Threads > maxThreads {
		return o, usageErrorf("--threads must be from 0 (all cores) to %d, not %d", maxThreads, o.Threads)
	}
	// A bad name or value is a usage error (exit 2) whatever the machine:
	// checked before the device is looked for.
	if err := job.CheckDeviceOptions(o); err != nil {
		return o, usageErrorf("%v", err)
	}
	has := c.IsSet // false for a flag the command does not have
	sizes := map[string]int64{}
	for _, f := range []string{"gpu-memory", "host-memory", "workspace"} {
		if !has(f) {
			continue
		}
		n, err := offload.ParseSize(c.String(f))
		if err != nil {
			return o, usageErrorf("--%s: %v", f, err)
		}
		sizes[f] = n
	}
	var fig *offload.Figures
	if has("sim-figures") {
		f := offload.DefaultFigures()
		if err := f.Set(c.String("sim-figures"), offload.FromDeclared, "--sim-figures"); err != nil {
			return o, usageErrorf("--sim-figures: %v", err)
		}
		fig = &f
	}
	o, err := o.Resolve(log)
	if err != nil {
		return o, err
	}
	size := func(f string, dst *int64) {
		if n, ok := sizes[f]; ok {
			*dst = n
		}
	}
	switch o.Kind() {
	case job.DeviceCUDA:
		size("gpu-memory", &o.Offload.Memory)
		size("host-memory", &o.Offload.HostMemory)
		for _, f := range []string{"workspace", "sim-figures"} {
			if has(f) {
				log.Infof("--%s has no effect with --device cuda (it applies to --device sim)", f)
			}
		}
	case job.DeviceSim:
		o.Offload = job.OffloadOptions{Memory: -1, Workspace: -1, Verify: true}
		size("gpu-memory", &o.Offload.Memory)
		size("host-memory", &o.Offload.HostMemory)
		size("workspace", &o.Offload.Workspace)
		o.Offload.Figures = fig
	default:
		for _, f := range []string{"gpu-memory", "host-memory", "workspace", "sim-figures"} {
			if has(f) {
				log.Infof("--%s has no effect on the CPU (it applies to --device cuda and sim)", f)
			}
		}
	}
	return o, nil
}

func resolveVoice(c *ucli.Context, log *logger, repoVoices string) (string, error) {
	dir := c.String("voice-prompt-dir")
	if dir == "" {
		dir = repoVoices
	}
	p, err := voices.Resolve(c.String("voice-prompt"), dir)
	if err != nil {
		return "", err
	}
	log.Infof("voice prompt: %s", p)
	return p, nil
}

// checkReadable refuses, before anything loads, an input that cannot be
// opened, a directory or a named pipe (its open would wait for a writer).
// what names what the file holds ("the audio", "the text prompt"), for
// the pipe's hint: a text prompt's error must not speak of audio.
func checkReadable(path, what string) error {
	// Stat first: opening a named pipe waits for a writer.
	if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		return fmt.Errorf("%s: is a pipe, not a file: write %s to a file first", path, what)
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: %v", path, pe.Err)
		}
		return err
	}
	st, err := f.Stat()
	f.Close()
	if err == nil && st.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	return nil
}

// maxThreads bounds --threads before a worker pool is sized by it.
const maxThreads = 4096

// checkOutputPath is the up-front check of an output (fileio.CheckOutput:
// its folder exists and is writable, its name fits, it is no registered
// input, no device, FIFO, socket, directory or read-only file): a usage
// error, exit 2, before anything loads.
func checkOutputPath(path string) error {
	if err := fileio.CheckOutput(path); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// checkOutputs refuses an input that exists but is not a regular file (a
// named pipe would block the load: exit 1, as bad input), then registers
// the run's inputs and checks its outputs against them and each other
// (fileio.CheckOutputs): a usage error, exit 2.
func checkOutputs(outputs, inputs []string) error {
	for _, in := range inputs {
		if _, err := os.Stat(in); err == nil {
			if err := fileio.CheckInput(in); err != nil {
				return err
			}
		}
	}
	if err := fileio.CheckOutputs(outputs, inputs); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// writeTextList writes the pieces as json.dump(list, ensure_ascii=False) does:
// separators ", ", raw UTF-8, no trailing newline.
func writeTextList(w io.Writer, pieces []string) error {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, p := range pieces {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyJSONString(p))
	}
	b.WriteByte(']')
	_, err := w.Write(b.Bytes())
	return err
}

// pyJSONString quotes s like Python's json.dumps(ensure_ascii=False).
func pyJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// richText is the --output-text-format rich schema (see README).
type richText struct {
	Text       string      `json:"text"`
	FrameRate  float64     `json:"frame_rate"`
	SampleRate int         `json:"sample_rate"`
	Frames     []richFrame `json:"frames"`
}

type richFrame struct {
	Time  float64 `json:"time"`
	Token int     `json:"token"`
	Piece string  `json:"piece"`
}

func writeRichText(w io.Writer, res *job.Result) error {
	rt := richText{FrameRate: res.FrameRate, SampleRate: res.SampleRate, Frames: make([]richFrame, len(res.Pieces))}
	var text strings.Builder
	for i, p := range res.Pieces {
		rt.Frames[i] = richFrame{Time: float64(i) / res.FrameRate, Token: res.TextTokens[i], Piece: p}
		if tok := res.TextTokens[i]; tok != 0 && tok != 3 {
			text.WriteString(p)
		}
	}
	rt.Text = strings.TrimSpace(text.String())
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(rt)
}

// progress reports the run: a bar on a terminal that ends with a kept
// summary line, a log line every few seconds otherwise (with the ETA).
type progress struct {
	bar       *progressbar.ProgressBar
	log       *logger
	tty       bool // draw a bar (stderr is a terminal)
	last      time.Time
	start     time.Time
	total     int
	done      int
	frameSecs float64
}

func newProgress(c *ucli.Context, log *logger) *progress {
	if c.Bool("quiet") {
		return nil
	}
	return &progress{log: log, tty: isTerminal(log.w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Phase implements job.Progress.
func (p *progress) Phase(name string) {
	if p == nil {
		return
	}
	p.log.Infof("%s", name)
}

// Start implements job.Progress: total frames of frameSecs seconds each.
func (p *progress) Start(total int, frameSecs float64) {
	if p == nil {
		return
	}
	now := p.log.clock()
	p.total, p.frameSecs, p.start, p.last = total, frameSecs, now, now
	if p.tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.log.w),
			progressbar.OptionSetDescription("frames"),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
		p.log.attachBar(p.bar)
	}
}

// Frame implements job.Progress: frames done so far.
func (p *progress) Frame(done int) {
	if p == nil {
		return
	}
	p.done = done
	now := p.log.clock()
	el := now.Sub(p.start).Seconds()
	rtf := p.rtf(el)
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("frames (RTF %.2f)", rtf))
		p.bar.Set(done)
		return
	}
	if now.Sub(p.last) >= 5*time.Second || done == p.total {
		p.last = now
		eta := "ETA 0 s"
		if done < p.total && done > 0 {
			eta = fmt.Sprintf("ETA %s", fmtSeconds(el/float64(done)*float64(p.total-done)))
		} else if done == 0 {
			eta = "ETA unknown"
		}
		p.log.Infof("frame %d/%d (%d%%), %s elapsed, real-time factor %.2f, %s",
			done, p.total, 100*done/max(p.total, 1), fmtSeconds(el), rtf, eta)
	}
}

// rtf is the real-time factor after el seconds: compute time over audio time.
func (p *progress) rtf(el float64) float64 {
	if p.done <= 0 || p.frameSecs <= 0 {
		return 0
	}
	return el / (float64(p.done) * p.frameSecs)
}

// fmtSeconds prints a duration for the logs: "12.3 s", "4 min 05 s".
func fmtSeconds(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.1f s", s)
	}
	m := int(s) / 60
	if m < 60 {
		return fmt.Sprintf("%d min %02d s", m, int(s)%60)
	}
	return fmt.Sprintf("%d h %02d min", m/60, m%60)
}

// Finish ends the bar and leaves a summary line in its place.
func (p *progress) Finish() {
	if p == nil || p.bar == nil {
		return
	}
	p.log.attachBar(nil)
	p.bar.Finish()
	el := p.log.clock().Sub(p.start).Seconds()
	p.log.Infof("%d/%d frames in %s, real-time factor %.2f", p.done, p.total, fmtSeconds(el), p.rtf(el))
}

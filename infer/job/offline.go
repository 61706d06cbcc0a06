// Package job is the job layer, between the command line (cli) and the
// engine (infer/lm, infer/mimi and the trees below them): the port of
// PersonaPlex's moshi/moshi/offline.py run_inference. A Device (opened once
// from the device flags) holds the backend and any offload plan; a Session
// wires the frames of a lockstep batch; RunItems runs a job of many items
// (Run: one), Bench and tune drive the same Session. Writing files is the
// caller's.
package job

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
)

// Names of the model files in the Hugging Face repo (loaders.py).
const (
	DefaultRepo   = "nvidia/personaplex-7b-v1"
	MoshiName     = "model.safetensors"
	MimiName      = "tokenizer-e351c8d8-checkpoint125.safetensors"
	TokenizerName = "tokenizer_spm_32k_3.model"
)

// Logger receives one-line progress messages.
type Logger interface {
	Infof(format string, a ...any)
}

// Progress is told about phases and frames (nil: silent).
type Progress interface {
	Phase(name string)
	Start(totalFrames int, frameSeconds float64)
	Frame(done int)
}

// Options describe one run, as offline.py's flags do.
type Options struct {
	InputWAV    string
	VoicePrompt string // resolved path: .pt = saved embeddings, else audio
	TextPrompt  string // "" = no text prompt
	Tokenizer   string
	MoshiWeight string
	MimiWeight  string
	Config      *config.Config
	// Device says where the job computes (OpenDevice): the CPU, a GPU, or
	// the CPU with the LM through an offload plan on a simulated device
	// (docs/OFFLOAD.md; the outputs are those of the CPU).
	Device DeviceOptions
	// BatchSize is the number of conversations RunItems runs in lockstep
	// (≤ 1: one at a time).
	BatchSize int

	Greedy              bool
	TempAudio, TempText float64
	TopKAudio, TopKText int
	Seed                int64

	// StepwisePrompts runs the prompt phases one step at a time, as the
	// reference does, instead of one prefill (same tokens; for tests).
	StepwisePrompts bool

	// PromptCache is the number of post-prompt states the job keeps (0:
	// DefaultPromptCache; < 0: none, every conversation runs its own prompt
	// phases): conversations with the same voice prompt and text prompt
	// start from one computed state, copied, instead of running the prompt
	// phases again (promptcache.go). Outputs are identical either way.
	PromptCache int

	// Quantize is --weights: the LM's linear weights quantized at load, ""
	// (the checkpoint's dtypes), "q8_0" or "q4_k" (lm.QuantDType; not
	// bit-identical to the reference).
	Quantize string

	Log      Logger
	Progress Progress
}

// Result is what a run produced.
type Result struct {
	PCM        []float32 // agent audio, trimmed/padded to the input length
	SampleRate int
	FrameRate  float64
	Pieces     []string // one rendered text piece per generated frame
	TextTokens []int    // the text token of each generated frame
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = nopLog{}
	}
	if o.Config == nil {
		o.Config = config.Default()
	}
	return o
}

type nopLog struct{}

func (nopLog) Infof(string, ...any) {}

// Run executes the offline job for one conversation: RunItems with the
// item of o's per-run fields. It returns ctx.Err() (context.Canceled) when
// the context is cancelled; it is checked before every frame.
func Run(ctx context.Context, o Options) (*Result, error) {
	var res ItemResult
	if err := RunItems(ctx, o, Items(ItemOf(o)), func(r ItemResult) { res = r }); err != nil {
		return nil, err
	}
	return res.Result, res.Err
}

// loadModels maps Mimi and the LM (both stay memory-mapped; Close releases
// them), the codec on the device's backend and CPU engine.
func loadModels(o Options, d *Device) (*mimi.Model, *lm.Model, error) {
	progress(o, "loading mimi")
	codec, err := mimi.Open(o.Config.Mimi, o.MimiWeight, d.CodecBackend(), d.Host())
	if err != nil {
		if !strings.Contains(err.Error(), filepath.Base(o.MimiWeight)) {
			err = fmt.Errorf("%s: %w", o.MimiWeight, err)
		}
		return nil, nil, err
	}
	progress(o, "loading moshi")
	model, err := lm.Open(&o.Config.LM, o.MoshiWeight)
	if err == nil {
		if err = quantizeAtLoad(o.Log, model, o.Quantize, d.Host()); err != nil {
			model.Close()
		}
	}
	if err != nil {
		codec.Close()
		if !strings.Contains(err.Error(), filepath.Base(o.MoshiWeight)) {
			err = fmt.Errorf("%s: %w", o.MoshiWeight, err) // a shape error: name the checkpoint
		}
		return nil, nil, err
	}
	return codec, model, nil
}

func progress(o Options, msg string) {
	if o.Progress != nil {
		o.Progress.Phase(msg)
	} else {
		o.Log.Infof("%s", msg)
	}
}

// encodeAll Mimi-encodes audio in frames (the last zero-padded), as
// lm.py's _iterate_audio(pad=True) + encode_from_sphn feed it, a chunk of
// frames a call (the codes of frame-by-frame encoding); it stops with
// ctx.Err() when ctx is cancelled.
func encodeAll(ctx context.Context, enc *mimi.Encoder, x []float32, frame int) ([][]int, error) {
	var out [][]int
	buf := make([]float32, codecRows*frame)
	for s := 0; s < len(x); s += len(buf) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := (min(len(buf), len(x)-s) + frame - 1) / frame
		chunk := buf[:n*frame]
		clear(chunk)
		copy(chunk, x[s:min(s+len(chunk), len(x))])
		codes := enc.Encode(chunk)
		nq := len(codes) / n
		for f := range n {
			out = append(out, slices.Clone(codes[f*nq:(f+1)*nq]))
		}
	}
	return out, nil
}

// LoadVoiceAudio reads a voice prompt WAV as LMGen.load_voice_prompt does:
// channel 0 at the model rate, normalised to −24 LUFS.
func LoadVoiceAudio(path string, rate int) ([]float32, error) {
	return loadVoiceAudio(context.Background(), path, rate, inputLimits(1))
}

func loadVoiceAudio(ctx context.Context, path string, rate int, lim audio.Limits) ([]float32, error) {
	x, err := audio.LoadMonoLimits(ctx, path, rate, lim)
	if err != nil {
		return nil, err
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("%s: voice prompt has no audio samples", path)
	}
	if err := FiniteAudio(path, x, rate); err != nil {
		return nil, err
	}
	return audio.NormalizeLoudness(x, rate, -24), nil
}

func checkVoiceEmbeddings(path string, p lm.SystemPrompt, c *config.LM) error {
	for _, e := range p.VoiceEmbeddings {
		if len(e) != c.Dim {
			return fmt.Errorf("%s: voice embeddings have dimension %d, the model's dim is %d", path, len(e), c.Dim)
		}
	}
	if len(p.VoiceCache) != c.NQ+1 {
		return fmt.Errorf("%s: voice cache has %d streams, the model has %d", path, len(p.VoiceCache), c.NQ+1)
	}
	for _, row := range p.VoiceCache {
		if len(row) != c.MaxDelay()+3 {
			return fmt.Errorf("%s: voice cache has %d columns, the model needs %d", path, len(row), c.MaxDelay()+3)
		}
	}
	return nil
}

// Package infer is the offline job: the port of PersonaPlex's
// moshi/moshi/offline.py run_inference. It loads Mimi, the tokenizer and the
// LM, runs the prompt phases, streams the user audio frame by frame and
// returns the agent's audio and text. Writing files is the caller's job.
package infer

import (
	"context"
	"fmt"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/prompts"
	"github.com/pp-offline/pp-offline/voices"
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
	Device      string // "cpu" (the only backend of this build), or "sim" (below)
	Threads     int
	// Offload configures Device "sim": the LM runs through an offload plan
	// on a simulated device (offload's planner for the device's memory;
	// docs/OFFLOAD.md). The outputs are those of the CPU.
	Offload lm.SimOptions

	Greedy              bool
	TempAudio, TempText float64
	TopKAudio, TopKText int
	Seed                int64

	// StepwisePrompts runs the prompt phases one step at a time, as the
	// reference does, instead of one prefill (same tokens; for tests).
	StepwisePrompts bool

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
	if o.Threads > 0 {
		ops.SetThreads(o.Threads)
	}
	return o
}

type nopLog struct{}

func (nopLog) Infof(string, ...any) {}

// Run executes the offline job. It returns ctx.Err() (context.Canceled) when
// the context is cancelled; it is checked before every frame.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	cfg := o.Config
	// Inputs first: a bad input costs nothing.
	user, err := audio.LoadMono(o.InputWAV, cfg.Mimi.SampleRate)
	if err != nil {
		return nil, err
	}
	if len(user) == 0 {
		return nil, fmt.Errorf("%s: no audio samples", o.InputWAV)
	}
	tok, err := prompts.Load(o.Tokenizer)
	if err != nil {
		return nil, err
	}
	var textIDs []int
	if o.TextPrompt != "" {
		textIDs = tok.Encode(prompts.WrapWithSystemTags(o.TextPrompt))
	}
	var sys lm.SystemPrompt
	sys.TextIDs = textIDs
	var voiceAudio []float32
	if voices.IsEmbeddings(o.VoicePrompt) {
		p, err := voices.LoadPT(o.VoicePrompt)
		if err != nil {
			return nil, err
		}
		sys.VoiceEmbeddings, sys.VoiceCache = p.Embeddings, p.Cache
	} else {
		if voiceAudio, err = LoadVoiceAudio(o.VoicePrompt, cfg.Mimi.SampleRate); err != nil {
			return nil, err
		}
	}

	codec, model, err := loadModels(o)
	if err != nil {
		return nil, err
	}
	defer codec.Close()
	if sys.VoiceEmbeddings != nil {
		if err := checkVoiceEmbeddings(o.VoicePrompt, sys, &cfg.LM); err != nil {
			return nil, err
		}
	}
	if n := tok.VocabSize(); n != cfg.TextCard {
		return nil, fmt.Errorf("%s: the tokenizer has %d pieces but the model %s has text_card %d: tokenizer and model do not match", o.Tokenizer, n, o.MoshiWeight, cfg.TextCard)
	}
	for _, id := range textIDs {
		if id >= cfg.TextCard {
			return nil, fmt.Errorf("%s: token id %d of the text prompt is outside the model's text vocabulary (%d): tokenizer and model do not match", o.Tokenizer, id, cfg.TextCard)
		}
	}

	var placed *lm.Placed
	if o.Device == "sim" {
		if placed, err = lm.NewSim(model, o.Offload); err != nil {
			return nil, err
		}
		defer placed.Close()
		for _, line := range placed.Summary() {
			o.Log.Infof("%s", line)
		}
	}
	gen := lm.NewGen(model, lm.GenOptions{
		UseSampling:     !o.Greedy,
		Temp:            float32(o.TempAudio),
		TempText:        float32(o.TempText),
		TopK:            o.TopKAudio,
		TopKText:        o.TopKText,
		Seed:            uint64(o.Seed),
		FrameRate:       cfg.Mimi.FrameRate,
		StepwisePrompts: o.StepwisePrompts,
		Weights:         weightsOf(placed),
	})
	enc := codec.NewEncoder()
	dec := codec.NewDecoder()
	frame := codec.FrameSize()

	// Prompt phases: voice prompt, silence, text prompt, silence.
	if voiceAudio != nil {
		progress(o, "encoding the voice prompt")
		sys.VoiceFrames = encodeAll(enc, voiceAudio, frame)
		enc.Reset()
	}
	progress(o, fmt.Sprintf("prompt phases (%d text tokens)", len(textIDs)))
	gen.Reset()
	if err := gen.StepSystemPrompts(sys); err != nil {
		return nil, fmt.Errorf("%s: %v", o.VoicePrompt, err)
	}
	if err := gen.Err(); err != nil {
		return nil, err
	}

	// The frame loop.
	nFrames := (len(user) + frame - 1) / frame
	if o.Progress != nil {
		o.Progress.Start(nFrames, float64(frame)/float64(cfg.Mimi.SampleRate))
	}
	res := &Result{SampleRate: cfg.Mimi.SampleRate, FrameRate: cfg.Mimi.FrameRate}
	pcm := make([]float32, 0, nFrames*frame)
	buf := make([]float32, frame)
	nq := cfg.Mimi.NumCodebooks
	for f := 0; f < nFrames; f++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		clear(buf)
		copy(buf, user[f*frame:min((f+1)*frame, len(user))])
		codes := enc.EncodeFrame(buf)
		out, ok := gen.Step(codes)
		if err := gen.Err(); err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress.Frame(f + 1)
		}
		if !ok {
			continue
		}
		pcm = append(pcm, dec.DecodeFrame(out[1:1+nq])...)
		res.TextTokens = append(res.TextTokens, out[0])
		res.Pieces = append(res.Pieces, tok.RenderToken(out[0]))
	}
	if len(res.Pieces) == 0 {
		return nil, fmt.Errorf("%s: no audio frames were generated (input too short)", o.InputWAV)
	}
	// Trim or zero-pad to the input length, as offline.py does.
	if len(pcm) > len(user) {
		pcm = pcm[:len(user)]
	}
	for len(pcm) < len(user) {
		pcm = append(pcm, 0)
	}
	res.PCM = pcm
	if placed != nil {
		line, err := placed.Finish()
		if err != nil {
			return nil, err
		}
		o.Log.Infof("%s", line)
	}
	return res, nil
}

// weightsOf is the Weights of an offload executor, nil (the model's own
// weights) without one.
func weightsOf(p *lm.Placed) lm.Weights {
	if p == nil {
		return nil
	}
	return p
}

// loadModels maps Mimi and the LM (both stay memory-mapped).
func loadModels(o Options) (*mimi.Model, *lm.Model, error) {
	progress(o, "loading mimi")
	codec, err := mimi.Load(o.Config.Mimi, o.MimiWeight)
	if err != nil {
		return nil, nil, err
	}
	progress(o, "loading moshi")
	model, err := lm.LoadFile(&o.Config.LM, o.MoshiWeight)
	if err != nil {
		codec.Close()
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
// lm.py's _iterate_audio(pad=True) + encode_from_sphn feed it.
func encodeAll(enc *mimi.Encoder, x []float32, frame int) [][]int {
	var out [][]int
	buf := make([]float32, frame)
	for s := 0; s < len(x); s += frame {
		clear(buf)
		copy(buf, x[s:min(s+frame, len(x))])
		out = append(out, append([]int(nil), enc.EncodeFrame(buf)...))
	}
	return out
}

// LoadVoiceAudio reads a voice prompt WAV as LMGen.load_voice_prompt does:
// channel 0 at the model rate, normalised to −24 LUFS.
func LoadVoiceAudio(path string, rate int) ([]float32, error) {
	x, err := audio.LoadMono(path, rate)
	if err != nil {
		return nil, err
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("%s: voice prompt has no audio samples", path)
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

// CUDAAvailable reports whether a CUDA backend and a usable GPU exist.
func CUDAAvailable() bool { return false }

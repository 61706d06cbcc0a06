package job

import (
	"context"
	"fmt"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/voices"
)

// MakeVoice encodes a voice prompt WAV into the embeddings and LMGen cache
// that the reference saves with save_voice_prompt_embeddings: the audio is
// normalised to −24 LUFS, Mimi-encoded frame by frame and stepped through
// LMGen with the sine tokens on the user side (load_voice_prompt +
// _step_voice_prompt). The result, saved with voices.SavePT, is a .pt that
// both tools load.
func MakeVoice(o Options, wavPath string) (*voices.Prompt, error) {
	o = o.withDefaults()
	cfg := o.Config
	x, err := LoadVoiceAudio(wavPath, cfg.Mimi.SampleRate)
	if err != nil {
		return nil, err
	}
	d, err := OpenDevice(o.Device, JobShape{Config: cfg, BatchSize: 1, MoshiWeight: o.MoshiWeight, MimiWeight: o.MimiWeight, Quantize: o.Quantize}, o.Log)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	codec, model, err := loadModels(o, d)
	if err != nil {
		return nil, err
	}
	defer codec.Close()
	defer model.Close()
	progress(o, "encoding the voice prompt")
	frames, err := encodeAll(context.Background(), codec.NewEncoder(), x, codec.FrameSize())
	if err != nil {
		return nil, err
	}
	// A run loads a voice file of at most RunRows steps: a longer one is
	// refused here, before its steps run, not written to fail every run.
	limit := voices.RunRows(cfg.LM.Context)
	tooLong := func(n int) error {
		return fmt.Errorf("%s: the voice prompt is %d steps (%.1f s), more than the %d a run takes (the model's context or %d steps, whichever is more): use a shorter recording",
			wavPath, n, float64(n)/cfg.Mimi.FrameRate, limit, voices.RunRowsFloor)
	}
	if len(frames) > limit+1 { // a step a frame, less at most one (the last partial frame's)
		return nil, tooLong(len(frames))
	}
	gen := lm.NewGen(model, d.Backend(), lm.GenOptions{FrameRate: cfg.Mimi.FrameRate})
	gen.Reset()
	emb, cache, err := gen.StepVoicePromptCodesSaving(frames)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", wavPath, err)
	}
	if len(emb) == 0 {
		return nil, fmt.Errorf("%s: too short: no voice-prompt step reached the model", wavPath)
	}
	if len(emb) > limit {
		return nil, tooLong(len(emb))
	}
	return &voices.Prompt{Embeddings: emb, Cache: cache}, nil
}

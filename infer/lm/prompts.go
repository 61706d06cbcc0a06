package lm

import "fmt"

// The system-prompt phases of LMGen.step_system_prompts. Every stream is
// forced in all of them, so unless GenOptions.StepwisePrompts is set their
// positions are deferred and run as one causal prefill (Flush) the first time
// the transformer state is needed; the token cache is updated step by step
// exactly as the reference leaves it.

// SystemPrompt is what step_system_prompts is given. At most one of
// VoiceEmbeddings (a .pt voice prompt) and VoiceFrames (Mimi codes of a voice
// WAV) is used, the embeddings first; TextIDs nil or empty skips the text phase.
type SystemPrompt struct {
	VoiceEmbeddings [][]float32 // [N][dim]
	VoiceCache      [][]int64   // [n_q+1][max_delay+3], restored after the embeddings
	VoiceFrames     [][]int     // [F][8] agent codes, one row per frame
	TextIDs         []int
}

// StepSystemPrompts runs the voice prompt, 0.5 s of silence, the text prompt
// and 0.5 s of silence, then the prefill of all of them.
func (g *Gen) StepSystemPrompts(p SystemPrompt) error {
	if err := g.QueueSystemPrompts(p); err != nil {
		return err
	}
	g.Flush()
	return nil
}

// QueueSystemPrompts is StepSystemPrompts without the prefill: the forced
// positions stay queued (unless StepwisePrompts) and run with the
// conversation's next step, in the same pass as the rest of its batch.
func (g *Gen) QueueSystemPrompts(p SystemPrompt) error {
	switch {
	case p.VoiceEmbeddings != nil:
		if err := g.StepVoicePromptEmbeddings(p.VoiceEmbeddings, p.VoiceCache); err != nil {
			return err
		}
	case p.VoiceFrames != nil:
		if err := g.StepVoicePromptCodes(p.VoiceFrames); err != nil {
			return err
		}
	}
	g.StepSilence()
	g.StepTextPrompt(p.TextIDs)
	g.StepSilence()
	return nil
}

// StepVoicePromptEmbeddings replays stored voice-prompt embeddings (one
// step_embeddings each) and then restores the stored token cache.
func (g *Gen) StepVoicePromptEmbeddings(embeddings [][]float32, cache [][]int64) error {
	if len(cache) != g.K {
		return fmt.Errorf("voice prompt cache has %d streams, the model has %d", len(cache), g.K)
	}
	for k, row := range cache {
		if len(row) != g.CT {
			return fmt.Errorf("voice prompt cache stream %d has %d columns, LMGen's cache has %d (max_delay + 3)", k, len(row), g.CT)
		}
	}
	for k, row := range cache {
		hi := int64(g.m.Cfg.Card) // audio: card is the initial token
		if k == 0 {
			hi = int64(g.m.Cfg.TextCard)
		}
		for c, v := range row {
			if v < -1 || v > hi {
				return fmt.Errorf("voice prompt cache stream %d column %d holds token %d, outside [-1, %d]", k, c, v, hi)
			}
		}
	}
	for i, e := range embeddings {
		if len(e) != g.m.Cfg.Dim {
			return fmt.Errorf("voice prompt embedding %d has %d values, the model dim is %d", i, len(e), g.m.Cfg.Dim)
		}
	}
	for _, e := range embeddings {
		g.StepEmbeddings(e)
	}
	for k, row := range cache {
		for c, v := range row {
			g.cache[k*g.CT+c] = int(v)
		}
	}
	return nil
}

// StepVoicePromptCodes feeds Mimi-encoded voice-prompt frames (8 agent codes
// each) with text PAD and the sine tokens on the user side.
func (g *Gen) StepVoicePromptCodes(frames [][]int) error {
	for i, f := range frames {
		if len(f) != AudioTokensPerStream {
			return fmt.Errorf("voice prompt frame %d has %d codes, %d expected", i, len(f), AudioTokensPerStream)
		}
	}
	for _, f := range frames {
		g.StepInput(Input{User: g.sine(), Agent: f, Text: TextPadToken, HasText: true})
	}
	return nil
}

// StepVoicePromptCodesSaving is StepVoicePromptCodes that also returns what
// the reference saves with save_voice_prompt_embeddings: the transformer
// input (embed_codes) of every voice-prompt step that reached the
// transformer, and the token cache after the voice prompt — the contents of
// a voice-prompt .pt file.
func (g *Gen) StepVoicePromptCodesSaving(frames [][]int) (embeddings [][]float32, cache [][]int64, err error) {
	g.recording, g.recorded = true, nil
	defer func() { g.recording, g.recorded = false, nil }()
	if err := g.StepVoicePromptCodes(frames); err != nil {
		return nil, nil, err
	}
	embeddings = g.recorded
	for k := 0; k < g.K; k++ {
		row := make([]int64, g.CT)
		for c := range row {
			row[c] = int64(g.cache[k*g.CT+c])
		}
		cache = append(cache, row)
	}
	return embeddings, cache, nil
}

// SilenceSteps is the number of steps of one silence phase, int(0.5·frame_rate).
func (g *Gen) SilenceSteps() int { return int(0.5 * g.opt.FrameRate) }

// StepSilence runs one silence phase: text PAD, silent agent frame, sine user frame.
func (g *Gen) StepSilence() {
	for i := 0; i < g.SilenceSteps(); i++ {
		g.StepInput(Input{User: g.sine(), Agent: SilenceTokens[:], Text: TextPadToken, HasText: true})
	}
}

// StepTextPrompt forces the text prompt tokens one per step (silent agent,
// sine user). nil or empty ids do nothing.
func (g *Gen) StepTextPrompt(ids []int) {
	for _, id := range ids {
		g.StepInput(Input{User: g.sine(), Agent: SilenceTokens[:], Text: id, HasText: true})
	}
}

func (g *Gen) sine() []int {
	n := g.K - 1 - AudioTokensPerStream
	if n > len(SineTokens) {
		panic(fmt.Sprintf("lm: %d user streams, the sine frame has %d tokens", n, len(SineTokens)))
	}
	return SineTokens[:n]
}

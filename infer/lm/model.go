// Package lm ports the Moshi language model of PersonaPlex (moshi/models/lm.py:
// LMModel, LMGen), the checkpoint loading of loaders.get_moshi_lm and the
// sampling of utils/sampling.py.
//
// Model holds the weights (memory-mapped, never copied) and the stateless
// forward pieces: embed_codes, the temporal transformer + out_norm,
// text_linear, and the depformer. Gen is LMGen: every bit of streaming state
// (token cache, provided flags, offset, temporal KV rings, RNG) lives in it
// explicitly. Activations and accumulation are float32; bf16 weights are
// widened exactly, which is what makes parity with the float32 reference
// fixtures possible. (The Python tool on a GPU computes in bf16, so on real
// weights the two tools are close but not bit-identical.)
package lm

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// AudioTokensPerStream is AUDIO_TOKENS_PER_STREAM: agent codebooks fed per step.
const AudioTokensPerStream = 8

// ZeroToken is the token whose embedding is an exact zero vector (zero_token_id).
const ZeroToken = -1

// UngeneratedToken marks a cache cell that was never written (ungenerated_token_id).
const UngeneratedToken = -2

// TextPadToken is LMGen.zero_text_code, the text token forced during the voice
// prompt and the silences (the tokenizer's <pad>, rendered "PAD").
const TextPadToken = 3

// SilenceTokens are the agent codes of a silent frame (SILENCE_TOKENS).
var SilenceTokens = [AudioTokensPerStream]int{948, 243, 1178, 546, 1736, 1030, 1978, 2008}

// SineTokens are the user codes given during the prompts (SINE_TOKENS).
var SineTokens = [AudioTokensPerStream]int{430, 1268, 381, 1611, 1095, 1495, 56, 472}

// Model is LMModel's weights and shape.
type Model struct {
	Cfg config.LM

	Emb         []ops.Mat // n_q × [card+1, dim]; row card = initial token
	TextEmb     ops.Mat   // [text_card+1, dim]; row text_card = initial token
	Transformer *nn.Transformer
	OutNorm     Norm
	TextLinear  ops.Mat // [text_card(+1), dim]
	Dep         *Depformer

	// Report of the checkpoint patches applied at load (get_moshi_lm's
	// "Expanding" / "Replacing" log lines).
	Expanded, Replaced []string

	file *weights.File // the checkpoint the weights are views of
	head Head          // OutNorm and TextLinear, as the host Weights hand them out
	host *hostWeights
}

// Norm is create_norm_fn(norm, dim), shared with infer/nn.
type Norm = nn.Norm

func getMat(f *weights.File, name string, shape ...int) (ops.Mat, error) {
	t, err := f.Get(name, shape...)
	if err != nil {
		return ops.Mat{}, err
	}
	return ops.NewMat(t)
}

// LoadFile opens a safetensors checkpoint and loads it (see Load). The file
// stays mapped for the life of the process.
func LoadFile(cfg *config.LM, path string) (*Model, error) {
	f, err := weights.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(cfg, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// Load binds the tensors of an LMModel checkpoint, checking every shape. As
// get_moshi_lm does, it accepts checkpoints whose depformer holds fewer steps
// than dep_q (an 8-step Moshi checkpoint for dep_q 16): "Patch 1" (the
// depformer self-attention weights concatenated with themselves) and
// "Patch 2" (missing per-step gating / linears / depformer_in /
// depformer_emb 8+i taken from i) are applied as aliases of the mapped
// tensors, never as copies.
func Load(cfg *config.LM, f *weights.File) (*Model, error) {
	c := *cfg
	c.Delays = append([]int(nil), cfg.Delays...)
	if err := validate(&c); err != nil {
		return nil, err
	}
	m := &Model{Cfg: c, file: f}
	m.host = &hostWeights{m}
	D := c.Dim
	var err error
	for i := 0; i < c.NQ; i++ {
		e, err := getMat(f, fmt.Sprintf("emb.%d.weight", i), c.Card+1, D)
		if err != nil {
			return nil, err
		}
		m.Emb = append(m.Emb, e)
	}
	if m.TextEmb, err = getMat(f, "text_emb.weight", c.TextCard+1, D); err != nil {
		return nil, err
	}
	m.Transformer, err = nn.LoadTransformer(f, "transformer", nn.TransformerConfig{
		DModel: D, NumHeads: c.NumHeads, NumLayers: c.NumLayers, DimFeedforward: c.DimFeedforward(),
		Context: c.Context, Norm: c.Norm, LayerScale: c.LayerScale != nil, Gating: c.Gating,
		PosEmb: c.PosEmb, MaxPeriod: c.MaxPeriod,
	})
	if err != nil {
		return nil, err
	}
	if m.OutNorm, err = nn.LoadNorm(f, c.Norm, "out_norm", D); err != nil {
		return nil, err
	}
	// text_card + 1 rows when the tokenizer has no padding id of its own.
	rows := c.TextCard
	if t, err := f.Get("text_linear.weight"); err == nil && len(t.Shape) == 2 && t.Shape[0] == c.TextCard+1 {
		rows = c.TextCard + 1
	}
	if m.TextLinear, err = getMat(f, "text_linear.weight", rows, D); err != nil {
		return nil, err
	}
	if m.Dep, err = loadDepformer(f, &c, m); err != nil {
		return nil, err
	}
	m.head = Head{OutNorm: m.OutNorm, TextLinear: m.TextLinear}
	return m, nil
}

func validate(c *config.LM) error {
	switch {
	case c.Dim <= 0 || c.NumHeads <= 0 || c.NumLayers <= 0:
		return fmt.Errorf("lm config: dim, num_heads and num_layers must be positive")
	case c.NQ < AudioTokensPerStream:
		return fmt.Errorf("lm config: n_q %d is smaller than the %d agent codebooks", c.NQ, AudioTokensPerStream)
	case c.DepQ <= 0 || c.DepQ > c.NQ:
		return fmt.Errorf("lm config: dep_q %d must be in 1..n_q (%d)", c.DepQ, c.NQ)
	case len(c.Delays) != c.NQ+1:
		return fmt.Errorf("lm config: %d delays for %d streams", len(c.Delays), c.NQ+1)
	case c.Context <= 0:
		return fmt.Errorf("lm config: context must be positive")
	case c.DepformerDim <= 0 || c.DepformerNumHeads <= 0 || c.DepformerDim%c.DepformerNumHeads != 0:
		return fmt.Errorf("lm config: depformer_dim %d is not divisible into %d heads", c.DepformerDim, c.DepformerNumHeads)
	case c.DepformerNumLayers <= 0:
		return fmt.Errorf("lm config: depformer_num_layers must be positive")
	}
	for _, d := range c.Delays {
		if d < 0 {
			return fmt.Errorf("lm config: negative delay")
		}
	}
	return nil
}

// NumCodebooks is n_q + 1 (the text stream and the audio streams).
func (m *Model) NumCodebooks() int { return m.Cfg.NQ + 1 }

// InitialToken is the token fed for stream k before anything was generated
// (text_card for the text stream, card for audio).
func (m *Model) InitialToken(k int) int {
	if k == 0 {
		return m.Cfg.TextCard
	}
	return m.Cfg.Card
}

// addEmbedding adds row tok of e into dst; ZeroToken (and any negative token,
// as the reference clamps then zeroes only −1) contributes an exact zero.
func addEmbedding(dst, row []float32, e ops.Mat, tok int) {
	if tok == ZeroToken {
		return
	}
	if tok < 0 || tok >= e.Rows {
		panic(fmt.Sprintf("lm: token %d out of range for an embedding of %d rows", tok, e.Rows))
	}
	e.Row(tok, row)
	ops.Add(dst, row)
}

// EmbedCodes is embed_codes for one position: the sum of the n_q audio
// embeddings (tokens[1..n_q]) and then the text embedding (tokens[0]), in the
// reference's order. row is a scratch of len dim.
func (m *Model) EmbedCodes(dst, row []float32, tokens []int) {
	clear(dst)
	for q := 0; q < m.Cfg.NQ; q++ {
		addEmbedding(dst, row, m.Emb[q], tokens[q+1])
	}
	addEmbedding(dst, row, m.TextEmb, tokens[0])
}

// NewState returns a fresh temporal transformer state.
func (m *Model) NewState() *nn.TransformerState { return m.Transformer.NewState() }

// Temporal runs one streaming step of the temporal transformer on x (in
// place) and writes out_norm(x) into h: forward_embeddings without the text head.
func (m *Model) Temporal(st *nn.TransformerState, x, h []float32) {
	m.Transformer.Forward(st, [][]float32{x})
	m.OutNorm.Apply(h, x)
}

// TextLogits is text_linear(h).
func (m *Model) TextLogits(dst, h []float32) { m.TextLinear.MatVec(dst, h) }

// TemporalBytes is the weight storage the temporal transformer reads per step.
func (m *Model) TemporalBytes() int64 {
	var n int64
	for i := range m.Transformer.Layers {
		n += m.Transformer.LayerBytes(i)
	}
	return n
}

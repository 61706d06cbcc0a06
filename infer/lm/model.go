// Package lm ports the Moshi language model of PersonaPlex (moshi/models/lm.py:
// LMModel, LMGen), the checkpoint loading of loaders.get_moshi_lm and the
// sampling of utils/sampling.py.
//
// Model holds the weights (memory-mapped, never copied) and the shape:
// embed_codes, the temporal transformer + out_norm, text_linear, and the
// depformer. Engine computes lockstep steps of many conversations on a
// backend; Gen is LMGen for one conversation: every bit of its streaming
// state (token cache, provided flags, offset, temporal KV rings, RNG) lives
// in it explicitly. Activations and accumulation are float32; bf16 weights
// are widened exactly, which is what makes parity with the float32
// reference fixtures possible. (The Python tool on a GPU computes in bf16,
// so on real weights the two tools are close but not bit-identical.)
package lm

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// AudioTokensPerStream is AUDIO_TOKENS_PER_STREAM: agent codebooks fed per step.
const AudioTokensPerStream = config.AgentCodebooks

// ZeroToken is the token whose embedding is an exact zero vector (zero_token_id).
const ZeroToken = backend.ZeroToken

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

	Emb         []*backend.Weight // n_q × [card+1, dim]; row card = initial token
	TextEmb     *backend.Weight   // [text_card+1, dim]; row text_card = initial token
	Transformer *nn.Transformer
	OutNorm     backend.Norm
	TextLinear  *backend.Weight // [text_card(+1), dim]
	Dep         *Depformer

	// Report of the checkpoint patches applied at load (get_moshi_lm's
	// "Expanding" / "Replacing" log lines).
	Expanded, Replaced []string

	file   *weights.File // the checkpoint the weights are views of
	owned  bool          // file was opened by Open (Close releases it)
	head   Head          // OutNorm and TextLinear, as the host Weights hand them out
	host   *hostWeights
	tables []*backend.Weight // Emb then TextEmb: embed_codes' order
}

// Shape is what the tensor declaration of a checkpoint depends on beyond
// the config: the rows of text_linear (text_card, or text_card + 1 when the
// tokenizer has no padding id of its own) and the depformer steps its
// attention projections hold (dep_q, or dep_q/2 for an 8-step checkpoint).
type Shape struct {
	TextLinearRows int
	DepStepsHeld   int
}

// FullShape is the shape of a checkpoint as LMModel.state_dict() writes it.
func FullShape(c *config.LM) Shape { return Shape{TextLinearRows: c.TextCard, DepStepsHeld: c.DepQ} }

// Tensors declares every tensor of the model (bound to m's fields) in the
// checkpoint's canonical names: the one place the LM's names and shapes
// are written. The temporal layers and depformer steps are nn's
// LayerTensors; per-step names of steps 8..15 may be aliases in an 8-step
// checkpoint (resolved by Load).
func (m *Model) Tensors(sh Shape) ([]nn.TensorRef, error) {
	c := &m.Cfg
	D := c.Dim
	var refs []nn.TensorRef
	m.Emb = make([]*backend.Weight, c.NQ)
	for i := range m.Emb {
		refs = append(refs, nn.Mat(&m.Emb[i], fmt.Sprintf("emb.%d.weight", i), c.Card+1, D))
	}
	refs = append(refs, nn.Mat(&m.TextEmb, "text_emb.weight", c.TextCard+1, D))
	tr, err := nn.NewTransformer(m.temporalConfig())
	if err != nil {
		return nil, fmt.Errorf("transformer: %v", err)
	}
	m.Transformer = tr
	tr.Layers = make([]*nn.Layer, c.NumLayers)
	for i := range tr.Layers {
		tr.Layers[i] = &nn.Layer{}
		refs = append(refs, tr.LayerTensors(tr.Layers[i], "transformer", i, -1, 0)...)
	}
	refs = append(refs, m.HeadTensors(&m.OutNorm, &m.TextLinear, sh.TextLinearRows)...)
	if m.Dep, err = newDepformer(c); err != nil {
		return nil, err
	}
	refs = append(refs, m.Dep.tableTensors(c)...)
	for j := range m.Dep.steps {
		refs = append(refs, m.Dep.StepTensors(c, &m.Dep.steps[j], j, sh.DepStepsHeld)...)
	}
	return refs, nil
}

// HeadTensors declares the output head (out_norm, text_linear) bound to
// norm and lin.
func (m *Model) HeadTensors(norm *backend.Norm, lin **backend.Weight, textRows int) []nn.TensorRef {
	refs, _ := nn.NormTensors(norm, m.Cfg.Norm, "out_norm", m.Cfg.Dim) // the kind was checked by NewTransformer
	return append(refs, nn.Mat(lin, "text_linear.weight", textRows, m.Cfg.Dim))
}

func (m *Model) temporalConfig() nn.TransformerConfig {
	c := &m.Cfg
	return nn.TransformerConfig{
		DModel: c.Dim, NumHeads: c.NumHeads, NumLayers: c.NumLayers, DimFeedforward: c.DimFeedforward(),
		Context: c.Context, Norm: c.Norm, LayerScale: c.LayerScale != nil, Gating: c.Gating,
		PosEmb: c.PosEmb, MaxPeriod: c.MaxPeriod,
	}
}

// Open opens a safetensors checkpoint (memory-mapped; Close releases it)
// and loads it (see Load).
func Open(cfg *config.LM, path string) (*Model, error) {
	f, err := weights.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(cfg, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.owned = true
	return m, nil
}

// Close releases the checkpoint when Open opened it (a file given to Load
// stays the caller's). The model must not be used after.
func (m *Model) Close() error {
	if !m.owned || m.file == nil {
		return nil
	}
	err := m.file.Close()
	m.file, m.owned = nil, false
	return err
}

// Load binds the tensors of an LMModel checkpoint (as Tensors declares
// them), checking every shape. As get_moshi_lm does, it accepts checkpoints
// whose depformer holds fewer steps than dep_q (an 8-step Moshi checkpoint
// for dep_q 16): "Patch 1" (the depformer self-attention weights
// concatenated with themselves) and "Patch 2" (missing per-step gating /
// linears / depformer_in / depformer_emb 8+i taken from i) are applied as
// aliases of the mapped tensors, never as copies.
func Load(cfg *config.LM, f *weights.File) (*Model, error) {
	c := *cfg
	c.Delays = append([]int(nil), cfg.Delays...)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("lm config: %w", err)
	}
	m := &Model{Cfg: c, file: f}
	m.host = &hostWeights{m}
	sh := FullShape(&c)
	if t, err := f.Get("text_linear.weight"); err == nil && len(t.Shape) == 2 && t.Shape[0] == c.TextCard+1 {
		sh.TextLinearRows = c.TextCard + 1
	}
	if t, err := f.Get("depformer.layers.0.self_attn.in_proj_weight"); err == nil && len(t.Shape) == 2 && 2*t.Shape[0] == c.DepQ*3*c.DepformerDim {
		sh.DepStepsHeld = c.DepQ / 2
		for l := 0; l < c.DepformerNumLayers; l++ {
			p := fmt.Sprintf("depformer.layers.%d.self_attn.", l)
			m.Expanded = append(m.Expanded, p+"in_proj_weight", p+"out_proj.weight")
		}
	}
	refs, err := m.Tensors(sh)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var used []string // checkpoint tensors read, once each
	get := func(name string, shape ...int) (*weights.Tensor, error) {
		src, err := m.resolve(f, name)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(used, src) {
			used = append(used, src)
		}
		if src != name && !seen[name] {
			m.Replaced = append(m.Replaced, name+" <- "+src)
		}
		seen[name] = true
		return f.Get(src, shape...)
	}
	if err := nn.BindTensors(refs, get); err != nil {
		return nil, err
	}
	// NaN or Inf in a weight would run to an all-padding transcript with
	// no error: refused here, naming the tensor (a full scan of what the
	// model reads, weights.CheckFinite).
	if err := f.CheckFinite(used...); err != nil {
		return nil, err
	}
	m.head = Head{OutNorm: m.OutNorm, TextLinear: m.TextLinear}
	m.tables = append(append([]*backend.Weight(nil), m.Emb...), m.TextEmb)
	return m, nil
}

// resolve is the checkpoint name of tensor name: itself, or for a per-step
// module "<group>.<n>.…" missing for n in 8..15, "<group>.<n−8>.…" (Patch 2
// of get_moshi_lm).
func (m *Model) resolve(f *weights.File, name string) (string, error) {
	if f.Has(name) {
		return name, nil
	}
	if src, ok := stepAlias(name); ok && f.Has(src) {
		return src, nil
	}
	return "", fmt.Errorf("%s: missing tensor %q", filepath.Base(f.Path), name)
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

// EmbedTables are embed_codes' tables in its order of summation: the n_q
// audio embeddings, then the text embedding. Token ids for a position go
// in that order too: audio streams 1..n_q, then the text stream 0.
func (m *Model) EmbedTables() []*backend.Weight { return m.tables }

// TemporalBytes is the weight storage the temporal transformer reads per step.
func (m *Model) TemporalBytes() int64 {
	var n int64
	for _, l := range m.Transformer.Layers {
		n += nn.LayerBytes(l)
	}
	return n
}

// FLOPsPerFrame is the arithmetic of one frame of one conversation in the
// LM's weight products (2 FLOPs a multiply-add): the temporal transformer,
// the text head and the first depSteps depformer steps. Attention's dot
// products, norms and sampling are left out: a lower bound of the step's
// work, for bench's GFLOP/s and the FMA-peak bounds of
// scripts/bench-targets.sh.
func (m *Model) FLOPsPerFrame(depSteps int) float64 {
	var n int64
	for _, l := range m.Transformer.Layers {
		n += nn.LayerElems(l)
	}
	n += m.TextLinear.Elems()
	for j := range min(depSteps, len(m.Dep.steps)) {
		n += m.Dep.StepElems(j)
	}
	return 2 * float64(n)
}

// CheckFile reports an error when the mapped checkpoint shrank under the
// running job (see weights.File.CheckIntact).
func (m *Model) CheckFile() error { return m.file.CheckIntact() }

// Package config holds the model hyper-parameters in the flat JSON schema of
// kyutai's configs/moshi_7b_202409.json, with an optional "mimi" object for
// the codec. Default() is the real PersonaPlex 7B with the real Mimi, so a
// user of the real checkpoints never needs a config file.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"os"
)

// Seanet holds the SEANet encoder/decoder constructor arguments.
type Seanet struct {
	Channels               int    `json:"channels"`
	Dimension              int    `json:"dimension"`
	Causal                 bool   `json:"causal"`
	NFilters               int    `json:"n_filters"`
	NResidualLayers        int    `json:"n_residual_layers"`
	Activation             string `json:"activation"`
	Compress               int    `json:"compress"`
	DilationBase           int    `json:"dilation_base"`
	DisableNormOuterBlocks int    `json:"disable_norm_outer_blocks"`
	KernelSize             int    `json:"kernel_size"`
	ResidualKernelSize     int    `json:"residual_kernel_size"`
	LastKernelSize         int    `json:"last_kernel_size"`
	Norm                   string `json:"norm"`
	PadMode                string `json:"pad_mode"`
	Ratios                 []int  `json:"ratios"`
	TrueSkip               bool   `json:"true_skip"`
	LSTM                   int    `json:"lstm,omitempty"`
}

// MimiTransformer holds the ProjectedTransformer arguments of Mimi.
type MimiTransformer struct {
	DModel           int      `json:"d_model"`
	NumHeads         int      `json:"num_heads"`
	NumLayers        int      `json:"num_layers"`
	Causal           bool     `json:"causal"`
	LayerScale       *float64 `json:"layer_scale"`
	Context          int      `json:"context"`
	ConvLayout       bool     `json:"conv_layout"`
	MaxPeriod        float64  `json:"max_period"`
	Gating           string   `json:"gating"`
	Norm             string   `json:"norm"`
	PosEmb           string   `json:"positional_embedding"`
	DimFeedforward   int      `json:"dim_feedforward"`
	InputDimension   int      `json:"input_dimension"`
	OutputDimensions []int    `json:"output_dimensions"`
}

// Quantizer holds the SplitResidualVectorQuantizer arguments.
type Quantizer struct {
	Dimension       int `json:"dimension"`
	NQ              int `json:"n_q"`
	Bins            int `json:"bins"`
	InputDimension  int `json:"input_dimension"`
	OutputDimension int `json:"output_dimension"`
}

// Mimi is the codec configuration.
type Mimi struct {
	Seanet       Seanet          `json:"seanet"`
	Transformer  MimiTransformer `json:"transformer"`
	Quantizer    Quantizer       `json:"quantizer"`
	NumCodebooks int             `json:"num_codebooks"`
	SampleRate   int             `json:"sample_rate"`
	FrameRate    float64         `json:"frame_rate"`
}

// FrameSize is the number of samples per codec frame (1920 at 24 kHz, 12.5 Hz).
func (m *Mimi) FrameSize() int { return int(float64(m.SampleRate)/m.FrameRate + 0.5) }

// LM is the language model configuration (flat schema).
type LM struct {
	Dim                     int      `json:"dim"`
	TextCard                int      `json:"text_card"`
	ExistingTextPaddingID   int      `json:"existing_text_padding_id"`
	NQ                      int      `json:"n_q"`
	DepQ                    int      `json:"dep_q"`
	Card                    int      `json:"card"`
	NumHeads                int      `json:"num_heads"`
	NumLayers               int      `json:"num_layers"`
	HiddenScale             float64  `json:"hidden_scale"`
	Causal                  bool     `json:"causal"`
	LayerScale              *float64 `json:"layer_scale"`
	Context                 int      `json:"context"`
	MaxPeriod               float64  `json:"max_period"`
	Gating                  string   `json:"gating"`
	Norm                    string   `json:"norm"`
	PosEmb                  string   `json:"positional_embedding"`
	DepformerDim            int      `json:"depformer_dim"`
	DepformerDimFeedforward int      `json:"depformer_dim_feedforward"`
	DepformerNumHeads       int      `json:"depformer_num_heads"`
	DepformerNumLayers      int      `json:"depformer_num_layers"`
	DepformerCausal         bool     `json:"depformer_causal"`
	DepformerLayerScale     *float64 `json:"depformer_layer_scale"`
	DepformerMultiLinear    bool     `json:"depformer_multi_linear"`
	DepformerContext        int      `json:"depformer_context"`
	DepformerMaxPeriod      float64  `json:"depformer_max_period"`
	DepformerGating         string   `json:"depformer_gating"`
	DepformerPosEmb         string   `json:"depformer_pos_emb"`
	DepformerWeightsPerStep bool     `json:"depformer_weights_per_step"`
	Delays                  []int    `json:"delays"`
}

// Config is a whole model: LM fields at the top level, Mimi under "mimi".
type Config struct {
	LM
	Mimi *Mimi `json:"mimi,omitempty"`
}

// DimFeedforward is int(hidden_scale · dim), the LM's dim_feedforward.
func (c *LM) DimFeedforward() int { return int(c.HiddenScale * float64(c.Dim)) }

// DepDimFeedforward is the depformer's dim_feedforward (explicit, or hidden_scale · depformer_dim).
func (c *LM) DepDimFeedforward() int {
	if c.DepformerDimFeedforward > 0 {
		return c.DepformerDimFeedforward
	}
	return int(c.HiddenScale * float64(c.DepformerDim))
}

// MaxDelay is the largest delay.
func (c *LM) MaxDelay() int {
	m := 0
	for _, d := range c.Delays {
		m = max(m, d)
	}
	return m
}

// AudioCodebooks is the number of codebooks per audio stream (agent or user).
func (c *LM) AudioCodebooks() int { return c.DepQ / 2 }

func f64(v float64) *float64 { return &v }

// DefaultMimi is the real Mimi codec as loaders.get_mimi builds it.
func DefaultMimi() *Mimi {
	return &Mimi{
		Seanet: Seanet{Channels: 1, Dimension: 512, Causal: true, NFilters: 64, NResidualLayers: 1,
			Activation: "ELU", Compress: 2, DilationBase: 2, DisableNormOuterBlocks: 0, KernelSize: 7,
			ResidualKernelSize: 3, LastKernelSize: 3, Norm: "none", PadMode: "constant",
			Ratios: []int{8, 6, 5, 4}, TrueSkip: true},
		Transformer: MimiTransformer{DModel: 512, NumHeads: 8, NumLayers: 8, Causal: true,
			LayerScale: f64(0.01), Context: 250, ConvLayout: true, MaxPeriod: 10000, Gating: "none",
			Norm: "layer_norm", PosEmb: "rope", DimFeedforward: 2048, InputDimension: 512,
			OutputDimensions: []int{512}},
		Quantizer:    Quantizer{Dimension: 256, NQ: 32, Bins: 2048, InputDimension: 512, OutputDimension: 512},
		NumCodebooks: 8, SampleRate: 24000, FrameRate: 12.5,
	}
}

// Default is the real PersonaPlex 7B (dep_q 16, as get_moshi_lm forces) with the real Mimi.
func Default() *Config {
	return &Config{
		LM: LM{Dim: 4096, TextCard: 32000, ExistingTextPaddingID: 3, NQ: 16, DepQ: 16, Card: 2048,
			NumHeads: 32, NumLayers: 32, HiddenScale: 4.125, Causal: true, Context: 3000,
			MaxPeriod: 10000, Gating: "silu", Norm: "rms_norm_f32", PosEmb: "rope",
			DepformerDim: 1024, DepformerDimFeedforward: 4224, DepformerNumHeads: 16,
			DepformerNumLayers: 6, DepformerCausal: true, DepformerMultiLinear: true,
			DepformerContext: 8, DepformerMaxPeriod: 10000, DepformerGating: "silu",
			DepformerPosEmb: "none", DepformerWeightsPerStep: true,
			Delays: []int{0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1}},
		Mimi: DefaultMimi(),
	}
}

// Parse reads a config in the flat schema. Missing fields take the values of
// the real model; a missing "mimi" object (or missing field in it) those of
// the real Mimi.
func Parse(data []byte) (*Config, error) {
	c := Default() // fields absent from the file keep the real model's values
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	if c.Mimi == nil { // "mimi": null
		c.Mimi = DefaultMimi()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads and validates a config file; errors name the file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid model config: %v", path, err)
	}
	return c, nil
}

// Validate checks the values the code relies on.
func (c *Config) Validate() error {
	l := &c.LM
	switch {
	case l.Dim <= 0 || l.NumHeads <= 0 || l.Dim%l.NumHeads != 0:
		return fmt.Errorf("dim %d must be a positive multiple of num_heads %d", l.Dim, l.NumHeads)
	case l.NumLayers <= 0:
		return fmt.Errorf("num_layers must be positive")
	case l.TextCard <= 0 || l.Card <= 0:
		return fmt.Errorf("text_card and card must be positive")
	case l.DepQ <= 0 || l.DepQ > l.NQ || l.DepQ%2 != 0:
		return fmt.Errorf("dep_q %d must be even and at most n_q %d", l.DepQ, l.NQ)
	case len(l.Delays) != l.NQ+1:
		return fmt.Errorf("delays has %d entries, n_q + 1 = %d expected", len(l.Delays), l.NQ+1)
	case l.Context <= 0:
		return fmt.Errorf("context must be positive")
	case l.DepformerDim <= 0 || l.DepformerNumHeads <= 0 || l.DepformerDim%l.DepformerNumHeads != 0:
		return fmt.Errorf("depformer_dim %d must be a positive multiple of depformer_num_heads %d", l.DepformerDim, l.DepformerNumHeads)
	}
	for _, d := range l.Delays {
		if d < 0 {
			return fmt.Errorf("delays must not be negative")
		}
	}
	if m := c.Mimi; m != nil {
		switch {
		case m.SampleRate <= 0 || m.FrameRate <= 0:
			return fmt.Errorf("mimi: sample_rate and frame_rate must be positive")
		case m.NumCodebooks <= 0 || m.NumCodebooks > m.Quantizer.NQ:
			return fmt.Errorf("mimi: num_codebooks %d must be in 1..quantizer.n_q %d", m.NumCodebooks, m.Quantizer.NQ)
		case len(m.Seanet.Ratios) == 0:
			return fmt.Errorf("mimi: seanet.ratios must not be empty")
		case 2*m.NumCodebooks != l.NQ:
			return fmt.Errorf("mimi.num_codebooks %d does not fit the LM: n_q %d streams are the agent's and the user's codebooks (2 × num_codebooks)", m.NumCodebooks, l.NQ)
		}
	}
	return nil
}

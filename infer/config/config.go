// Package config holds the model hyper-parameters in the flat JSON schema of
// kyutai's configs/moshi_7b_202409.json, with an optional "mimi" object for
// the codec. Default() is the real PersonaPlex 7B with the real Mimi, so a
// user of the real checkpoints never needs a config file.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/pp-offline/pp-offline/internal/fileio"
	"github.com/pp-offline/pp-offline/internal/suggest"
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

// MaxFileBytes bounds a config file (the real one is about 2 KB).
const MaxFileBytes = 1 << 20

// ignoredKeys are keys of the Hugging Face repos' config.json that name
// files or generation settings, not the model's shape: the reference's
// loaders read them elsewhere, and so do we (or not at all).
var ignoredKeys = map[string]bool{
	"model_type": true, "model_id": true, "moshi_name": true, "mimi_name": true, "tokenizer_name": true,
	"lora_name": true, "lm_gen_config": true, "stt_config": true, "tts_config": true,
}

// Parse reads a config in the flat schema. Missing fields take the values of
// the real model; a missing "mimi" object (or missing field in it) those of
// the real Mimi. Unknown keys (with the nearest known one suggested), null
// objects, trailing data and values outside what the code supports are
// errors.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, more than a model config's %d", len(data), MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the config object")
	}
	if err := checkKeys(raw, reflect.TypeOf(Config{}), ""); err != nil {
		return nil, err
	}
	c := Default() // fields absent from the file keep the real model's values
	if err := json.Unmarshal(raw, c); err != nil {
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

// checkKeys checks that data is a JSON object whose keys are fields of t
// (recursively into nested objects), naming the first unknown key and the
// known one nearest to it.
func checkKeys(data []byte, t reflect.Type, path string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		if path == "" {
			path = "the config"
		}
		if err != nil {
			var ute *json.UnmarshalTypeError
			if !errors.As(err, &ute) {
				return err
			}
		}
		return fmt.Errorf("%s must be a JSON object", path)
	}
	fields := map[string]reflect.Type{}
	collectFields(t, fields)
	var names []string
	for n := range fields {
		names = append(names, n)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			if path == "" && ignoredKeys[k] {
				continue
			}
			msg := fmt.Sprintf("unknown key %q", path+k)
			if s := suggest.Closest(k, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", path+s)
			}
			return errors.New(msg)
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && string(bytes.TrimSpace(obj[k])) != "null" {
			if err := checkKeys(obj[k], ft, path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectFields maps the JSON names of t's fields (embedded structs
// flattened) to their types.
func collectFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			collectFields(f.Type, out)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
}

// Load reads and validates a config file (at most MaxFileBytes); errors
// name the file.
func Load(path string) (*Config, error) {
	data, err := fileio.ReadFileLimit(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid model config: %v", path, err)
	}
	return c, nil
}

// Bounds on the shape a config may declare: generous above every known
// Moshi / PersonaPlex model, small enough that what they size is
// allocatable (a dim of 65536 or a delay of 1e9 is a typo, not a model).
const (
	maxDim     = 32768
	maxLayers  = 1024
	maxHeads   = 1024
	maxContext = 1 << 20
	maxCard    = 1 << 22
	maxStreams = 256
	maxDelay   = 4096
	// Mimi's SEANet: 4 stages of 1 residual block, kernels of 7 and 3,
	// dilation 1 in the released codec.
	maxSeanetStages = 16
	maxResidual     = 16
	maxDilation     = 1 << 16
	maxKernel       = 4096
)

// AgentCodebooks is the number of audio codebooks of one speaker (Mimi's
// 8): the LM's n_q streams hold at least the agent's.
const AgentCodebooks = 8

// Validate checks the values the code relies on: the LM's (LM.Validate)
// and Mimi's, and that they fit each other.
func (c *Config) Validate() error {
	if err := c.LM.Validate(); err != nil {
		return err
	}
	if c.Mimi != nil && c.Mimi.Transformer.DModel > maxDim {
		return fmt.Errorf("a model dimension above %d is not supported", maxDim)
	}
	return c.validateMimi()
}

// Validate checks the LM's values: the one set of rules, used when a
// config is read and again when a model is loaded from it (lm.Load).
func (l *LM) Validate() error {
	switch {
	case l.Dim > maxDim || l.DepformerDim > maxDim:
		return fmt.Errorf("a model dimension above %d is not supported", maxDim)
	case l.NumLayers > maxLayers || l.DepformerNumLayers > maxLayers || l.NumHeads > maxHeads || l.DepformerNumHeads > maxHeads:
		return fmt.Errorf("more than %d layers or heads is not supported", maxLayers)
	case l.Context > maxContext:
		return fmt.Errorf("context %d is above the supported %d", l.Context, maxContext)
	case l.Card > maxCard || l.TextCard > maxCard:
		return fmt.Errorf("card and text_card must be at most %d", maxCard)
	case l.NQ > maxStreams || l.NQ < 0:
		return fmt.Errorf("n_q %d must be in 0..%d", l.NQ, maxStreams)
	case l.HiddenScale <= 0 || l.HiddenScale > 64 || math.IsNaN(l.HiddenScale):
		return fmt.Errorf("hidden_scale %g must be in (0, 64]", l.HiddenScale)
	case l.DepformerDimFeedforward < 0 || l.DepformerDimFeedforward > 64*maxDim:
		return fmt.Errorf("depformer_dim_feedforward %d is out of range", l.DepformerDimFeedforward)
	case !(l.MaxPeriod > 0) || (l.DepformerPosEmb == "rope" && !(l.DepformerMaxPeriod > 0)):
		return fmt.Errorf("max_period must be positive")
	case l.ExistingTextPaddingID < 0 || (l.TextCard > 0 && l.ExistingTextPaddingID >= l.TextCard):
		return fmt.Errorf("existing_text_padding_id %d must be a token of the text vocabulary (0..%d)", l.ExistingTextPaddingID, l.TextCard-1)
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
	case l.DepformerNumLayers <= 0:
		return fmt.Errorf("depformer_num_layers must be positive")
	case l.NQ < AgentCodebooks:
		return fmt.Errorf("n_q %d is smaller than the %d agent codebooks", l.NQ, AgentCodebooks)
	}
	for _, d := range l.Delays {
		if d < 0 || d > maxDelay {
			return fmt.Errorf("delays must be in 0..%d", maxDelay)
		}
	}
	return nil
}

func (c *Config) validateMimi() error {
	l := &c.LM
	if m := c.Mimi; m != nil {
		ratios := 1
		if len(m.Seanet.Ratios) > maxSeanetStages {
			return fmt.Errorf("mimi: seanet.ratios has %d entries, at most %d are supported", len(m.Seanet.Ratios), maxSeanetStages)
		}
		for _, r := range m.Seanet.Ratios {
			if r <= 0 || r > 64 {
				return fmt.Errorf("mimi: seanet.ratios must be in 1..64")
			}
			ratios *= r
		}
		sn := &m.Seanet
		// The residual blocks' largest dilation, dilation_base^(n−1).
		dil := 1
		for j := 1; j < sn.NResidualLayers && dil <= maxDilation; j++ {
			dil *= max(sn.DilationBase, 1)
		}
		switch {
		case sn.NResidualLayers < 0 || sn.NResidualLayers > maxResidual:
			return fmt.Errorf("mimi: seanet.n_residual_layers %d must be in 0..%d", sn.NResidualLayers, maxResidual)
		case sn.NResidualLayers > 0 && (sn.DilationBase < 1 || dil > maxDilation):
			return fmt.Errorf("mimi: seanet.dilation_base %d must be at least 1, and its power n_residual_layers − 1 at most %d", sn.DilationBase, maxDilation)
		case sn.KernelSize > maxKernel || sn.ResidualKernelSize > maxKernel || sn.LastKernelSize > maxKernel:
			return fmt.Errorf("mimi: seanet kernel sizes (kernel_size %d, residual_kernel_size %d, last_kernel_size %d) must be at most %d",
				sn.KernelSize, sn.ResidualKernelSize, sn.LastKernelSize, maxKernel)
		case sn.Compress < 0 || sn.Compress > maxDim:
			return fmt.Errorf("mimi: seanet.compress %d must be in 1..%d", sn.Compress, maxDim)
		case m.Transformer.DimFeedforward < 0 || m.Transformer.DimFeedforward > 64*maxDim:
			return fmt.Errorf("mimi: transformer.dim_feedforward %d is out of range", m.Transformer.DimFeedforward)
		}
		switch {
		case m.SampleRate > 384000 || m.FrameRate < 1 || m.FrameRate > 1000 || math.IsNaN(m.FrameRate):
			return fmt.Errorf("mimi: sample_rate %d / frame_rate %g out of range (at most 384000 Hz, 1..1000 frames/s)", m.SampleRate, m.FrameRate)
		case ratios > 1<<16:
			return fmt.Errorf("mimi: seanet.ratios multiply to %d, above %d", ratios, 1<<16)
		case m.Seanet.Dimension <= 0 || m.Seanet.Dimension > maxDim || m.Seanet.NFilters <= 0 || m.Seanet.NFilters > maxDim:
			return fmt.Errorf("mimi: seanet.dimension and n_filters must be in 1..%d", maxDim)
		case m.Quantizer.NQ > maxStreams || m.Quantizer.Bins <= 0 || m.Quantizer.Bins > maxCard:
			return fmt.Errorf("mimi: quantizer.n_q must be at most %d and bins in 1..%d", maxStreams, maxCard)
		case m.Transformer.Context <= 0 || m.Transformer.Context > maxContext:
			return fmt.Errorf("mimi: transformer.context must be in 1..%d", maxContext)
		case m.Transformer.NumLayers < 0 || m.Transformer.NumLayers > maxLayers || m.Transformer.NumHeads <= 0 || m.Transformer.NumHeads > maxHeads:
			return fmt.Errorf("mimi: transformer.num_layers and num_heads out of range")
		case m.Transformer.PosEmb == "rope" && !(m.Transformer.MaxPeriod > 0):
			return fmt.Errorf("mimi: transformer.max_period must be positive")
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

// GatingHidden is ActivationGating's hidden size for dim_feedforward (a
// shape the transformer, the offload units and the memory estimate all
// derive from the config).
func GatingHidden(dim, dimFeedforward int) int {
	if dimFeedforward == 4*dim {
		return (21 * dim) / 8
	}
	return (2 * dimFeedforward) / 3
}

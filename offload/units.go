package offload

import (
	"fmt"
	"strings"

	"github.com/pp-offline/pp-offline/infer/weights"

	"github.com/pp-offline/pp-offline/infer/config"
)

// ElemBytes is the storage size of one weight element: every LM weight of a
// PersonaPlex checkpoint, norms included, is bf16.
const ElemBytes = 2

// Kind is what a unit of the LM is.
type Kind int

const (
	// KindLayer is one temporal transformer layer (never split).
	KindLayer Kind = iota
	// KindHead is the output head: out_norm + text_linear.
	KindHead
	// KindDepStep is one depformer step's weights: its slice of every
	// depformer layer, depformer_in[step] and linears[step].
	KindDepStep
	// KindDepformer is the whole depformer as one unit, run once per step
	// (only for checkpoints without depformer_weights_per_step).
	KindDepformer
)

func (k Kind) String() string {
	switch k {
	case KindLayer:
		return "layer"
	case KindHead:
		return "head"
	case KindDepStep:
		return "dep-step"
	case KindDepformer:
		return "depformer"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Part is one tensor (or a block of its rows) inside a unit. A tensor is
// viewed as a matrix [Shape[0], product of the rest]; the part is rows
// [Row0, Row1) of it. Norm scales [1, 1, D] are one row.
type Part struct {
	Tensor     string `json:"tensor"`
	Shape      []int  `json:"shape"` // the whole tensor's shape in the checkpoint
	Row0, Row1 int    `json:"-"`
	Cols       int    `json:"-"`
	// Stored is the part's storage format when it is quantized (q8_0,
	// q4_k blocks); "" is the checkpoint's bf16 (ElemBytes per element).
	Stored weights.DType `json:"stored,omitempty"`
}

// Elems is the number of elements of the part.
func (p Part) Elems() int64 { return int64(p.Row1-p.Row0) * int64(p.Cols) }

// Bytes is the part's storage: its rows in its stored format, or at
// ElemBytes per element.
func (p Part) Bytes() int64 {
	if p.Stored != "" {
		return int64(p.Row1-p.Row0) * p.Stored.RowBytes(p.Cols)
	}
	return p.Elems() * ElemBytes
}

// RowBytes is the storage of one of the part's rows.
func (p Part) RowBytes() int64 {
	if p.Stored != "" {
		return p.Stored.RowBytes(p.Cols)
	}
	return int64(p.Cols) * ElemBytes
}

// Format is the part's storage format: Stored, or bf16.
func (p Part) Format() weights.DType {
	if p.Stored != "" {
		return p.Stored
	}
	return weights.BF16
}

// Unit is the granule the planner places: it is computed as a whole, and
// when streamed, crosses PCIe as one contiguous blob (its Parts in order).
type Unit struct {
	Name  string `json:"name"`
	Kind  Kind   `json:"-"`
	Index int    `json:"-"` // layer index or depformer step
	Bytes int64  `json:"bytes"`
	// Runs is how many times the unit is computed per frame (1, or the
	// number of depformer steps for KindDepformer).
	Runs int `json:"runs"`
	// MatParams is the number of weight elements read by matrix products per
	// position and run (FLOPs = 2·MatParams per position).
	MatParams int64 `json:"-"`
	// KVBytes is the float32 KV cache the unit keeps per batch element at
	// full span (temporal layers: 2 · positions · dim · 4); it lives where
	// the unit is computed.
	KVBytes int64 `json:"kv_bytes,omitempty"`
	// AttnDim is the model width attention runs at (for its FLOPs and for
	// the KV bytes read per position).
	AttnDim int `json:"-"`
	// InDim and OutDim are the activation widths crossing in and out when
	// the unit is computed somewhere other than its neighbours.
	InDim, OutDim int `json:"-"`
	// Launches estimates the GPU kernels one run launches.
	Launches int    `json:"-"`
	Parts    []Part `json:"-"`
}

// LM describes the units of a Moshi-architecture LM derived from its config
// alone (no weights): the units in execution order for one frame, the units
// that exist but are not run, and the tables that are only gathered.
type LM struct {
	Cfg config.LM
	// Units run per frame, in execution order: layers 0..N−1, the head,
	// then depformer steps 0..DepSteps−1.
	Units []Unit
	// Skipped units exist in the checkpoint but are not run (depformer
	// steps DepSteps..dep_q−1, whose tokens the user stream provides); they
	// need neither device nor host memory (the file is mapped).
	Skipped []Unit
	// TableBytes is the size of the embedding tables (emb, text_emb,
	// depformer_emb, depformer_text_emb): gathered a row per token on the
	// host, they never need device memory.
	TableBytes int64
	// DepKVBytes is the depformer's per-frame KV cache (float32, dep_q
	// positions) per batch element.
	DepKVBytes int64
}

// LMParts are the tensors of each unit of an LM, as the model declares
// them (lm.Units builds them from the LM's one tensor declaration; offload
// holds no checkpoint names). A unit's parts are in the order its bytes are
// packed.
type LMParts struct {
	// Layers[i] is temporal layer i's tensors.
	Layers [][]Part
	// Head is out_norm's and text_linear's.
	Head []Part
	// DepSteps[s] is depformer step s's tensors, for every step
	// 0..dep_q−1 (a depformer with weights per step; nil otherwise).
	DepSteps [][]Part
	// Depformer is the shared depformer's tensors, run once per step (a
	// depformer without weights per step; nil otherwise).
	Depformer []Part
}

func sumParts(ps []Part) (bytes int64) {
	for _, p := range ps {
		bytes += p.Bytes()
	}
	return bytes
}

// normSize is the storage of one norm of width dim: RMSNorm's alpha, or
// LayerNorm's weight and bias.
func normSize(norm string, dim int) int64 {
	if strings.HasPrefix(norm, "rms_norm") {
		return ElemBytes * int64(dim)
	}
	return 2 * ElemBytes * int64(dim)
}

// DefaultDepSteps is the number of depformer steps offline inference runs
// per frame: dep_q/2 (8 for PersonaPlex), the agent's codebooks; the user
// stream's tokens are provided, so steps dep_q/2..dep_q−1 are skipped.
func DefaultDepSteps(c *config.LM) int { return c.DepQ / 2 }

// CheckLM reports whether c has an LM shape units can be derived for, with
// depSteps depformer steps per frame.
func CheckLM(c *config.LM, depSteps int) error {
	if depSteps < 0 || depSteps > c.DepQ {
		return fmt.Errorf("depformer steps per frame %d must be in 0..dep_q %d", depSteps, c.DepQ)
	}
	if c.Dim <= 0 || c.NumLayers <= 0 || c.DepformerDim <= 0 {
		return fmt.Errorf("config has no LM shape (dim %d, num_layers %d, depformer_dim %d)", c.Dim, c.NumLayers, c.DepformerDim)
	}
	return nil
}

// NewLM derives the units of the LM described by c from the tensors its
// model declares for each unit (parts; use lm.Units, which builds them):
// the cost model's figures of each unit (matrix parameters, KV cache,
// launches, activation widths) come from c, its bytes from its parts.
// depSteps is the number of depformer steps run per frame (a parameter of
// the cost model): DefaultDepSteps in offline inference, dep_q to generate
// both streams (as the reference's depformer_step does), 0 when no
// depformer runs (a prefill of forced tokens).
func NewLM(c *config.LM, depSteps int, parts LMParts) (*LM, error) {
	if err := CheckLM(c, depSteps); err != nil {
		return nil, err
	}
	if len(parts.Layers) != c.NumLayers {
		return nil, fmt.Errorf("%d layers' tensors for num_layers %d", len(parts.Layers), c.NumLayers)
	}
	if c.DepformerWeightsPerStep && len(parts.DepSteps) != c.DepQ {
		return nil, fmt.Errorf("%d depformer steps' tensors for dep_q %d", len(parts.DepSteps), c.DepQ)
	}
	m := &LM{Cfg: *c}
	D, d := c.Dim, c.DepformerDim
	gated := c.Gating != "none" && c.Gating != ""
	hidden := c.DimFeedforward()
	if gated {
		hidden = config.GatingHidden(D, c.DimFeedforward())
	}
	for i, ps := range parts.Layers {
		mat := int64(4*D*D) + 3*int64(hidden)*int64(D)
		if !gated {
			mat = int64(4*D*D) + 2*int64(hidden)*int64(D)
		}
		m.Units = append(m.Units, Unit{
			Name: fmt.Sprintf("layer.%d", i), Kind: KindLayer, Index: i, Bytes: sumParts(ps), Runs: 1,
			MatParams: mat, KVBytes: 2 * int64(c.Context) * int64(D) * 4, AttnDim: D,
			InDim: D, OutDim: D, Launches: 12, Parts: ps,
		})
	}
	m.Units = append(m.Units, Unit{
		Name: "head", Kind: KindHead, Bytes: sumParts(parts.Head), Runs: 1,
		MatParams: int64(c.TextCard) * int64(D), InDim: D, OutDim: D + c.TextCard, Launches: 3, Parts: parts.Head,
	})

	dh := config.GatingHidden(d, c.DepDimFeedforward())
	L := c.DepformerNumLayers
	depMat := int64(L)*(int64(4*d*d)+3*int64(dh)*int64(d)) + int64(d)*int64(D) + int64(c.Card)*int64(d)
	if c.DepformerWeightsPerStep {
		for s, ps := range parts.DepSteps {
			u := Unit{
				Name: fmt.Sprintf("dep.%d", s), Kind: KindDepStep, Index: s, Bytes: sumParts(ps), Runs: 1,
				MatParams: depMat, AttnDim: d, InDim: D, OutDim: c.Card, Launches: 12*L + 4, Parts: ps,
			}
			if s < depSteps {
				m.Units = append(m.Units, u)
			} else {
				m.Skipped = append(m.Skipped, u)
			}
		}
	} else if depSteps > 0 {
		m.Units = append(m.Units, Unit{
			Name: "depformer", Kind: KindDepformer, Bytes: sumParts(parts.Depformer), Runs: depSteps,
			MatParams: depMat, AttnDim: d, InDim: D, OutDim: c.Card, Launches: 12*L + 4, Parts: parts.Depformer,
		})
	}
	m.TableBytes = ElemBytes * (int64(c.NQ)*int64(c.Card+1)*int64(D) + int64(c.TextCard+1)*int64(D) +
		int64(c.DepQ-1)*int64(c.Card+1)*int64(d) + int64(c.TextCard+1)*int64(d))
	m.DepKVBytes = 2 * int64(c.DepQ) * int64(d) * 4 * int64(L)
	return m, nil
}

// WeightBytes is the total of the run units' weights.
func (m *LM) WeightBytes() (n int64) {
	for _, u := range m.Units {
		n += u.Bytes
	}
	return n
}

// Span is where a part lies in a packed unit blob.
type Span struct {
	Offset, Bytes int64
}

// Pack concatenates a unit's parts into one contiguous host blob, the form a
// streamed unit crosses PCIe in and the bytes Runtime.Acquire hands back.
// part(k) returns exactly part k's rows in its stored format (the
// executor's weights: a view of the mapped checkpoint, or blocks made at
// load); each is checked against the part's size. The spans say where each
// part landed, so the executor can re-wrap the blob as matrices. dst is
// reused when large enough.
func (u *Unit) Pack(dst []byte, part func(k int) ([]byte, error)) ([]byte, []Span, error) {
	if int64(cap(dst)) < u.Bytes {
		dst = make([]byte, u.Bytes)
	}
	dst = dst[:u.Bytes]
	spans := make([]Span, len(u.Parts))
	var off int64
	for i, p := range u.Parts {
		b, err := part(i)
		if err != nil {
			return nil, nil, fmt.Errorf("unit %s: %w", u.Name, err)
		}
		if int64(len(b)) != p.Bytes() || off+p.Bytes() > u.Bytes {
			return nil, nil, fmt.Errorf("unit %s: part %s rows [%d, %d) has %d bytes, %s needs %d", u.Name, p.Tensor, p.Row0, p.Row1, len(b), p.Format(), p.Bytes())
		}
		n := copy(dst[off:], b)
		spans[i] = Span{Offset: off, Bytes: int64(n)}
		off += int64(n)
	}
	if off != u.Bytes {
		return nil, nil, fmt.Errorf("unit %s: parts total %d bytes, the unit %d", u.Name, off, u.Bytes)
	}
	return dst, spans, nil
}

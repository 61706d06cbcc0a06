package lm

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/nn"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Depformer is the depth transformer of LMModel with its per-step input and
// output projections: step j (0..dep_q−1) reads depformer_in[j] (or [0]
// without multi-linear), the embedding of the previous token
// (depformer_text_emb for j = 0, depformer_emb[j−1] after), weight slice j of
// every layer's attention projections and gating, and linears[j]. Its KV
// cache holds the dep_q steps of one frame (the reference ignores
// depformer_context) and is fresh every frame.
//
// Every per-step weight is a view of the mapped checkpoint; for an 8-step
// checkpoint, steps 8+i are views of the tensors of step i (get_moshi_lm's
// two patches), so nothing is copied.
//
// The depformer is computed here rather than by nn.Transformer because
// nn.Transformer selects weight slice t for step t of one contiguous tensor,
// which cannot express "steps 8..15 are steps 0..7" without copying the
// self-attention weights.
type Depformer struct {
	Dim, NumHeads, Steps int
	Hidden               int // gating hidden size

	In      []ops.Mat // per step: [depformer_dim, dim]
	TextEmb ops.Mat   // [text_card+1, depformer_dim]
	Emb     []ops.Mat // per step j ≥ 1 (index j−1): [card+1, depformer_dim]
	Linears []ops.Mat // per step: [card, depformer_dim]
	Layers  []DepLayer

	steps []DepStep // per step: the views above, as the host Weights hand them out

	rope *ops.RoPE
	act  func(float32) float32
}

// DepLayer is one depformer layer: shared norms, per-step weights.
type DepLayer struct {
	Norm1, Norm2    Norm
	Scale1, Scale2  []float32 // layer scale, nil when absent
	InProj, OutProj []ops.Mat // per step: [3·D, D], [D, D]
	GateIn, GateOut []ops.Mat // per step: [2·hidden, D], [D, hidden]
}

// aliasStep resolves the tensor of a per-step module as Patch 2 of
// get_moshi_lm does: "<group>.<n>." missing for n in 8..15 is taken from
// "<group>.<n−8>.".
func aliasStep(f *weights.File, m *Model, group string, n int, rest string) (string, error) {
	name := fmt.Sprintf("%s.%d.%s", group, n, rest)
	if f.Has(name) {
		return name, nil
	}
	if n >= 8 && n < 16 {
		src := fmt.Sprintf("%s.%d.%s", group, n-8, rest)
		if f.Has(src) {
			m.Replaced = append(m.Replaced, name+" <- "+src)
			return src, nil
		}
	}
	return "", fmt.Errorf("%s: missing tensor %q", filepath.Base(f.Path), name)
}

func loadDepformer(f *weights.File, c *config.LM, m *Model) (*Depformer, error) {
	D, Dm := c.DepformerDim, c.Dim
	d := &Depformer{Dim: D, NumHeads: c.DepformerNumHeads, Steps: c.DepQ}
	if (D/d.NumHeads)%2 != 0 && c.DepformerPosEmb == "rope" {
		return nil, fmt.Errorf("depformer: head size %d is odd", D/d.NumHeads)
	}
	switch c.DepformerPosEmb {
	case "none", "":
	case "rope":
		d.rope = ops.NewRoPE(D/d.NumHeads, c.DepformerMaxPeriod)
	default:
		return nil, fmt.Errorf("depformer: positional embedding %q is not supported", c.DepformerPosEmb)
	}
	if !c.DepformerWeightsPerStep {
		return nil, fmt.Errorf("depformer: only depformer_weights_per_step = true is supported")
	}
	var err error
	if d.act, err = nn.Activation(c.DepformerGating); err != nil {
		return nil, fmt.Errorf("depformer: %v (weights per step need gating)", err)
	}
	d.Hidden = nn.GatingHidden(D, c.DepDimFeedforward())
	steps := c.DepQ
	get := func(group string, n int, rest string, shape ...int) (ops.Mat, error) {
		name, err := aliasStep(f, m, group, n, rest)
		if err != nil {
			return ops.Mat{}, err
		}
		return getMat(f, name, shape...)
	}
	nIn := 1
	if c.DepformerMultiLinear {
		nIn = steps
	}
	for j := 0; j < nIn; j++ {
		w, err := get("depformer_in", j, "weight", D, Dm)
		if err != nil {
			return nil, err
		}
		d.In = append(d.In, w)
	}
	for len(d.In) < steps { // single shared depformer_in
		d.In = append(d.In, d.In[0])
	}
	if d.TextEmb, err = getMat(f, "depformer_text_emb.weight", c.TextCard+1, D); err != nil {
		return nil, err
	}
	for j := 0; j < steps-1; j++ {
		w, err := get("depformer_emb", j, "weight", c.Card+1, D)
		if err != nil {
			return nil, err
		}
		d.Emb = append(d.Emb, w)
	}
	for j := 0; j < steps; j++ {
		w, err := get("linears", j, "weight", c.Card, D)
		if err != nil {
			return nil, err
		}
		d.Linears = append(d.Linears, w)
	}
	for i := 0; i < c.DepformerNumLayers; i++ {
		p := fmt.Sprintf("depformer.layers.%d.", i)
		l := DepLayer{}
		if l.Norm1, err = nn.LoadNorm(f, c.Norm, p+"norm1", D); err != nil {
			return nil, err
		}
		if l.Norm2, err = nn.LoadNorm(f, c.Norm, p+"norm2", D); err != nil {
			return nil, err
		}
		if c.DepformerLayerScale != nil {
			for k, dst := range []*[]float32{&l.Scale1, &l.Scale2} {
				t, err := f.Get(fmt.Sprintf("%slayer_scale_%d.scale", p, k+1), D)
				if err != nil {
					return nil, err
				}
				*dst = t.Float32s()
			}
		}
		// Patch 1: an attention projection holding S < dep_q steps is the
		// concatenation of the tensor with itself (S = dep_q / 2), so step j
		// uses slice j mod S.
		proj := func(name string, rowsPerStep int) ([]ops.Mat, error) {
			t, err := f.Get(name)
			if err != nil {
				return nil, err
			}
			if len(t.Shape) != 2 || t.Shape[1] != D || t.Shape[0]%rowsPerStep != 0 {
				return nil, fmt.Errorf("%s: tensor %q has shape %v, the config expects [%d, %d]", filepath.Base(f.Path), name, t.Shape, steps*rowsPerStep, D)
			}
			have := t.Shape[0] / rowsPerStep
			if have != steps {
				if 2*have != steps {
					return nil, fmt.Errorf("%s: tensor %q has shape %v, the config expects [%d, %d] (or half of it for an %d-step checkpoint)", filepath.Base(f.Path), name, t.Shape, steps*rowsPerStep, D, steps/2)
				}
				m.Expanded = append(m.Expanded, name)
			}
			w, err := ops.NewMat(t)
			if err != nil {
				return nil, err
			}
			out := make([]ops.Mat, steps)
			for j := range out {
				s := j % have
				out[j] = w.RowSlice(s*rowsPerStep, (s+1)*rowsPerStep)
			}
			return out, nil
		}
		if l.InProj, err = proj(p+"self_attn.in_proj_weight", 3*D); err != nil {
			return nil, err
		}
		if l.OutProj, err = proj(p+"self_attn.out_proj.weight", D); err != nil {
			return nil, err
		}
		for j := 0; j < steps; j++ {
			gi, err := get(p+"gating", j, "linear_in.weight", 2*d.Hidden, D)
			if err != nil {
				return nil, err
			}
			gout, err := get(p+"gating", j, "linear_out.weight", D, d.Hidden)
			if err != nil {
				return nil, err
			}
			l.GateIn = append(l.GateIn, gi)
			l.GateOut = append(l.GateOut, gout)
		}
		d.Layers = append(d.Layers, l)
	}
	for j := 0; j < steps; j++ {
		w := DepStep{In: d.In[j], Linear: d.Linears[j]}
		for _, l := range d.Layers {
			w.Layers = append(w.Layers, DepStepLayer{Norm1: l.Norm1, Norm2: l.Norm2, Scale1: l.Scale1, Scale2: l.Scale2,
				InProj: l.InProj[j], OutProj: l.OutProj[j], GateIn: l.GateIn[j], GateOut: l.GateOut[j]})
		}
		d.steps = append(d.steps, w)
	}
	return d, nil
}

// StepBytes is the weight storage depformer step j reads (projections,
// attention, gating, output linear; the embedding row is negligible).
func (d *Depformer) StepBytes(j int) int64 {
	n := d.In[j].Bytes() + d.Linears[j].Bytes()
	for _, l := range d.Layers {
		n += l.InProj[j].Bytes() + l.OutProj[j].Bytes() + l.GateIn[j].Bytes() + l.GateOut[j].Bytes()
	}
	return n
}

// DepState is the depformer's streaming state for one frame: the keys and
// values of the steps run so far (capacity dep_q) and scratch buffers.
type DepState struct {
	d      *Depformer
	n      int         // steps run since Reset
	k, v   [][]float32 // per layer: [steps][D]
	x, h   []float32   // [D]
	qkv    []float32   // [3D]
	att, o []float32   // [D]
	ffa    []float32   // [2·hidden]
	row    []float32   // [D] embedding scratch
	scores []float32   // [steps]

	// LayerOut, when set, is called with each layer's output (debugging).
	LayerOut func(step, layer int, x []float32)
}

// NewState allocates a depformer state.
func (d *Depformer) NewState() *DepState {
	D := d.Dim
	s := &DepState{d: d}
	for range d.Layers {
		s.k = append(s.k, make([]float32, d.Steps*D))
		s.v = append(s.v, make([]float32, d.Steps*D))
	}
	s.x, s.h, s.att, s.o, s.row = make([]float32, D), make([]float32, D), make([]float32, D), make([]float32, D), make([]float32, D)
	s.qkv = make([]float32, 3*D)
	s.ffa = make([]float32, 2*d.Hidden)
	s.scores = make([]float32, d.Steps)
	return s
}

// Reset starts a new frame (a fresh streaming state, as depformer_step's
// `with lm_model.depformer.streaming(B)`).
func (s *DepState) Reset() { s.n = 0 }

// Steps is the number of steps run since the last Reset.
func (s *DepState) Steps() int { return s.n }

// Input writes depformer step j's input into dst: depformer_in[j](h) + the
// embedding of prev (the text token for j = 0, audio token of stream j−1 after).
func (s *DepState) Input(dst []float32, j int, h []float32, prev int) {
	s.input(s.d.In[j], dst, j, h, prev)
}

func (s *DepState) input(in ops.Mat, dst []float32, j int, h []float32, prev int) {
	d := s.d
	in.MatVec(dst, h)
	if j == 0 {
		addEmbedding(dst, s.row, d.TextEmb, prev)
	} else {
		addEmbedding(dst, s.row, d.Emb[j-1], prev)
	}
}

// Step runs depformer step j (which must be the next one: j == Steps()) on
// the temporal output h (out_norm'd) and the previous token, writing the
// card logits of stream j+1 into logits (forward_depformer).
func (s *DepState) Step(j int, h []float32, prev int, logits []float32) {
	s.StepWith(&s.d.steps[j], j, h, prev, logits)
}

// StepWith is Step computed from the weights w (step j's, as a Weights
// handed them out).
func (s *DepState) StepWith(w *DepStep, j int, h []float32, prev int, logits []float32) {
	d := s.d
	if j != s.n || j >= d.Steps {
		panic(fmt.Sprintf("lm: depformer step %d run after %d steps", j, s.n))
	}
	x := s.x
	s.input(w.In, x, j, h, prev)
	D := d.Dim
	dh := D / d.NumHeads
	scale := float32(1 / math.Sqrt(float64(dh)))
	first := firstVisible(j, d.Steps)
	for li := range w.Layers {
		l := &w.Layers[li]
		// Self-attention over steps 0..j.
		l.Norm1.Apply(s.h, x)
		l.InProj.MatVec(s.qkv, s.h)
		if d.rope != nil {
			for hd := 0; hd < d.NumHeads; hd++ {
				d.rope.Apply(s.qkv[hd*dh:(hd+1)*dh], j)
				d.rope.Apply(s.qkv[D+hd*dh:D+(hd+1)*dh], j)
			}
		}
		K, V := s.k[li], s.v[li]
		copy(K[j*D:(j+1)*D], s.qkv[D:2*D])
		copy(V[j*D:(j+1)*D], s.qkv[2*D:3*D])
		scores := s.scores[:j+1]
		for hd := 0; hd < d.NumHeads; hd++ {
			q := s.qkv[hd*dh : (hd+1)*dh]
			maxv := float32(math.Inf(-1))
			for t := first; t <= j; t++ {
				v := ops.Dot(q, K[t*D+hd*dh:t*D+(hd+1)*dh]) * scale
				scores[t] = v
				maxv = max(maxv, v)
			}
			var sum float32
			for t := first; t <= j; t++ {
				e := float32(math.Exp(float64(scores[t] - maxv)))
				scores[t] = e
				sum += e
			}
			inv := 1 / sum
			oh := s.att[hd*dh : (hd+1)*dh]
			clear(oh)
			for t := first; t <= j; t++ {
				w := scores[t] * inv
				vv := V[t*D+hd*dh : t*D+(hd+1)*dh]
				for c := range oh {
					oh[c] += w * vv[c]
				}
			}
		}
		l.OutProj.MatVec(s.o, s.att)
		ops.AddScaled(x, s.o, l.Scale1)
		// Gated feed-forward with step j's weights.
		l.Norm2.Apply(s.h, x)
		a := s.ffa
		l.GateIn.MatVec(a, s.h)
		hid := d.Hidden
		for c := 0; c < hid; c++ {
			a[c] = d.act(a[c]) * a[hid+c]
		}
		l.GateOut.MatVec(s.o, a[:hid])
		ops.AddScaled(x, s.o, l.Scale2)
		if s.LayerOut != nil {
			s.LayerOut(j, li, x)
		}
	}
	w.Linear.MatVec(logits, x)
	s.n++
}

// firstVisible is the first step that step j attends to. The reference's
// RingKVCache (capacity dep_q) gives the slot at end_offset % capacity the
// position end_offset instead of end_offset − capacity when the ring is
// exactly full ("delta <= 0"), so at the last step (end_offset = dep_q) step
// 0's key lies "in the future" and is masked out. Reproduced for parity: it
// changes the logits of stream dep_q (the last user codebook) only.
func firstVisible(j, capacity int) int {
	end := j + 1
	if end%capacity == 0 && end > 1 {
		return 1
	}
	return 0
}

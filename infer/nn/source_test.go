package nn

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

// copiedLayers is a LayerSource handing out layers bound (BindTensor) to
// copies of the checkpoint's bytes, rebinding at every acquire, and
// recording the order of acquires and releases.
type copiedLayers struct {
	refs   [][]TensorRef
	ts     [][]weights.Tensor
	layers []Layer
	log    []int // +i acquired, −(i+1) released
}

func (c *copiedLayers) AcquireLayer(i int) *Layer {
	for k, r := range c.refs[i] {
		if err := BindTensor(r, &c.ts[i][k]); err != nil {
			panic(err)
		}
	}
	c.log = append(c.log, i)
	return &c.layers[i]
}

func (c *copiedLayers) ReleaseLayer(i int) { c.log = append(c.log, -(i + 1)) }

func copyLayers(t *testing.T, tr *Transformer, f *weights.File, prefix string) *copiedLayers {
	c := &copiedLayers{layers: make([]Layer, len(tr.Layers))}
	for i := range tr.Layers {
		refs := tr.LayerTensors(&c.layers[i], prefix, i, -1, 0)
		var ts []weights.Tensor
		for _, s := range refs {
			w, err := f.Get(s.Name, s.Shape...)
			if err != nil {
				t.Fatal(err)
			}
			cp := *w
			cp.Data = slices.Clone(w.Data)
			ts = append(ts, cp)
		}
		c.refs = append(c.refs, refs)
		c.ts = append(c.ts, ts)
	}
	return c
}

// Forward and the prefill from another copy of the weights, through a
// LayerSource, are bit-identical to Forward from the transformer's own;
// layers are acquired in order and each released before the next; binding
// again does not allocate.
func TestForwardFromSource(t *testing.T) {
	tr, f := mimiEncoderTransformer(t)
	src := copyLayers(t, tr, f, "encoder_transformer.transformer")
	rows := func(n int) [][]float32 {
		r := make([][]float32, n)
		for i := range r {
			r[i] = make([]float32, 32)
			for c := range r[i] {
				r[i][c] = float32(math.Sin(float64(i*32+c) * 0.29))
			}
		}
		return r
	}
	a, b := tr.NewState(testBE), tr.NewState(testBE)
	sc := tr.NewScratch(testBE)
	x, y := rows(40), rows(40)
	fwd(tr, sc, tr, a, x[:7], backend.Stepwise)
	fwd(tr, sc, src, b, y[:7], backend.Stepwise)
	for i := 7; i < 40; i += 3 {
		fwd(tr, sc, tr, a, x[i:min(i+3, 40)], backend.Chunk)
		fwd(tr, sc, src, b, y[i:min(i+3, 40)], backend.Chunk)
	}
	for i := range x {
		for c := range x[i] {
			if math.Float32bits(x[i][c]) != math.Float32bits(y[i][c]) {
				t.Fatalf("row %d col %d: %g from the source, %g from the transformer", i, c, y[i][c], x[i][c])
			}
		}
	}
	n := len(tr.Layers)
	for k, v := range src.log {
		pass, pos := k/(2*n), k%(2*n)
		want := pos / 2
		if pos%2 == 1 {
			want = -(want + 1)
		}
		if v != want {
			t.Fatalf("pass %d: event %d is %d, want %d (log %v)", pass, pos, v, want, src.log[:2*n])
		}
	}
	if allocs := testalloc.PerRun(t, 10, func() { src.AcquireLayer(0) }); allocs != 0 {
		t.Fatalf("rebinding a layer allocates %v times", allocs)
	}
}

// BindTensor checks what it is given: a tensor of the wrong size or dtype
// is refused, naming it.
func TestBindTensorErrors(t *testing.T) {
	tr, f := mimiEncoderTransformer(t)
	src := copyLayers(t, tr, f, "encoder_transformer.transformer")
	r, ts := src.refs[0][0], src.ts[0][0]
	short := ts
	short.Data = short.Data[:len(short.Data)-2]
	short.Shape = []int{len(short.Data) / short.DType.Size()}
	if err := BindTensor(r, &short); err == nil || !strings.Contains(err.Error(), "in_proj_weight") {
		t.Errorf("short tensor: %v", err)
	}
	other := src.ts[0][1] // out_proj: a third of in_proj's rows
	if err := BindTensor(r, &other); err == nil || !strings.Contains(err.Error(), "bound as") {
		t.Errorf("tensor of another shape: %v", err)
	}
	ints := ts
	ints.DType = weights.I64
	ints.Shape = []int{len(ints.Data) / 8}
	if err := BindTensor(r, &ints); err == nil || !strings.Contains(err.Error(), "dtype") {
		t.Errorf("integer tensor: %v", err)
	}
}

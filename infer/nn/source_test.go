package nn

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/weights"
)

// copiedLayers is a LayerSource handing out layers bound (BindLayer) to
// copies of the checkpoint's bytes, rebinding at every acquire, and
// recording the order of acquires and releases.
type copiedLayers struct {
	t      *Transformer
	ts     [][]weights.Tensor
	layers []Layer
	log    []int // +i acquired, −(i+1) released
}

func (c *copiedLayers) AcquireLayer(i int) *Layer {
	if err := c.t.BindLayer(&c.layers[i], c.ts[i]); err != nil {
		panic(err)
	}
	c.log = append(c.log, i)
	return &c.layers[i]
}

func (c *copiedLayers) ReleaseLayer(i int) { c.log = append(c.log, -(i + 1)) }

func copyLayers(t *testing.T, tr *Transformer, f *weights.File, prefix string) *copiedLayers {
	c := &copiedLayers{t: tr, layers: make([]Layer, len(tr.Layers))}
	for i := range tr.Layers {
		var ts []weights.Tensor
		for _, s := range tr.LayerTensors(prefix, i) {
			w, err := f.Get(s.Name, s.Shape...)
			if err != nil {
				t.Fatal(err)
			}
			cp := *w
			cp.Data = slices.Clone(w.Data)
			ts = append(ts, cp)
		}
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
	a, b := tr.NewState(), tr.NewState()
	x, y := rows(40), rows(40)
	tr.ForwardSteps(a, x[:7])
	tr.ForwardStepsFrom(src, b, y[:7])
	for i := 7; i < 40; i += 3 {
		tr.Forward(a, x[i:min(i+3, 40)])
		tr.ForwardFrom(src, b, y[i:min(i+3, 40)])
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
	if allocs := testing.AllocsPerRun(10, func() { src.AcquireLayer(0) }); allocs != 0 {
		t.Fatalf("rebinding a layer allocates %v times", allocs)
	}
}

// BindLayer checks what it is given.
func TestBindLayerErrors(t *testing.T) {
	tr, f := mimiEncoderTransformer(t)
	src := copyLayers(t, tr, f, "encoder_transformer.transformer")
	ts := src.ts[0]
	var l Layer
	if err := tr.BindLayer(&l, ts[:len(ts)-1]); err == nil || !strings.Contains(err.Error(), "more needed") {
		t.Errorf("too few tensors: %v", err)
	}
	if err := tr.BindLayer(&l, append(slices.Clone(ts), ts[0])); err == nil || !strings.Contains(err.Error(), "used") {
		t.Errorf("too many tensors: %v", err)
	}
	bad := slices.Clone(ts)
	bad[0].Data = bad[0].Data[:len(bad[0].Data)-2]
	if err := tr.BindLayer(&l, bad); err == nil || !strings.Contains(err.Error(), "in_proj_weight") {
		t.Errorf("short tensor: %v", err)
	}
}

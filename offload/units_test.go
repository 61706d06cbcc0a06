package offload_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// The units come from the LM's tensor declaration (lm.Units), so these
// tests live in the external package.

func cfgOf(t testing.TB, path string) *config.LM {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return &c.LM
}

func units(t testing.TB, c *config.LM, depSteps int) *offload.LM {
	t.Helper()
	u, err := lm.Units(c, depSteps)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// unitBytes recomputes the sizes of the units from the shapes in the brief,
// independently of lm.Units.
func unitBytes(c *config.LM) (layer, head, step int64) {
	D, d := int64(c.Dim), int64(c.DepformerDim)
	H := 2 * int64(c.DimFeedforward()) / 3
	h := 2 * int64(c.DepDimFeedforward()) / 3
	layer = 2 * (3*D*D + D*D + 2*H*D + D*H + 2*D)
	head = 2 * (D + int64(c.TextCard)*D)
	step = 2 * (d*D + int64(c.DepformerNumLayers)*(3*d*d+d*d+2*h*d+d*h+2*d) + int64(c.Card)*d)
	return
}

func TestUnitsRealShapes(t *testing.T) {
	for _, tc := range []struct {
		path                  string
		layer, head, step, kv int64
	}{
		{"../testdata/personaplex-7b.config.json", 411058176, 262152192, 166748160, 2 * 3000 * 4096 * 4},
		{"../testdata/personaplex-1b.config.json", 102768640, 131076096, 0, 2 * 3000 * 2048 * 4},
	} {
		c := cfgOf(t, tc.path)
		lm := units(t, c, offload.DefaultDepSteps(c))
		layer, head, step := unitBytes(c)
		if tc.step == 0 {
			tc.step = step
		}
		if layer != tc.layer || head != tc.head || step != tc.step {
			t.Fatalf("%s: test's own formula gives %d/%d/%d", tc.path, layer, head, step)
		}
		if n := len(lm.Units); n != c.NumLayers+1+8 || len(lm.Skipped) != 8 {
			t.Fatalf("%s: %d units run, %d skipped", tc.path, n, len(lm.Skipped))
		}
		var out strings.Builder
		for i, u := range lm.Units {
			want := layer
			switch {
			case i < c.NumLayers:
				if u.Kind != offload.KindLayer || u.Name != fmt.Sprintf("layer.%d", i) || u.KVBytes != tc.kv {
					t.Errorf("%s: unit %d is %s %v, KV %d", tc.path, i, u.Name, u.Kind, u.KVBytes)
				}
			case i == c.NumLayers:
				want = head
				if u.Kind != offload.KindHead || u.KVBytes != 0 {
					t.Errorf("%s: unit %d is %s %v", tc.path, i, u.Name, u.Kind)
				}
			default:
				want = step
				if u.Kind != offload.KindDepStep || u.Index != i-c.NumLayers-1 {
					t.Errorf("%s: unit %d is %s %v", tc.path, i, u.Name, u.Kind)
				}
			}
			if u.Bytes != want {
				t.Errorf("%s: %s has %d bytes, want %d", tc.path, u.Name, u.Bytes, want)
			}
			if i == 0 || i == c.NumLayers || i == c.NumLayers+1 {
				fmt.Fprintf(&out, "  %-8s %12d bytes (%s)\n", u.Name, u.Bytes, offload.FormatSize(u.Bytes))
			}
		}
		for i, u := range lm.Skipped {
			if u.Name != fmt.Sprintf("dep.%d", 8+i) || u.Bytes != step {
				t.Errorf("%s: skipped unit %s, %d bytes", tc.path, u.Name, u.Bytes)
			}
		}
		total := int64(c.NumLayers)*layer + head + 8*step
		if lm.WeightBytes() != total {
			t.Errorf("%s: weights %d, want %d", tc.path, lm.WeightBytes(), total)
		}
		D, d := int64(c.Dim), int64(c.DepformerDim)
		tables := 2 * (16*2049*D + 32001*D + 15*2049*d + 32001*d)
		if lm.TableBytes != tables {
			t.Errorf("%s: tables %d, want %d", tc.path, lm.TableBytes, tables)
		}
		t.Logf("%s: %d units run per frame, %s of weights, KV cache %s (%d layers × %s), embedding tables %s (host)\n%s",
			tc.path, len(lm.Units), offload.FormatSize(total), offload.FormatSize(int64(c.NumLayers)*tc.kv), c.NumLayers, offload.FormatSize(tc.kv), offload.FormatSize(tables), out.String())
	}
}

func TestDepSteps(t *testing.T) {
	c := cfgOf(t, "../testdata/personaplex-7b.config.json")
	if lm := units(t, c, 16); len(lm.Units) != 32+1+16 || len(lm.Skipped) != 0 {
		t.Errorf("16 steps: %d units, %d skipped", len(lm.Units), len(lm.Skipped))
	}
	if lm := units(t, c, 0); len(lm.Units) != 33 || len(lm.Skipped) != 16 {
		t.Errorf("0 steps: %d units, %d skipped", len(lm.Units), len(lm.Skipped))
	}
	for _, n := range []int{-1, 17} {
		if _, err := lm.Units(c, n); err == nil {
			t.Errorf("lm.Units accepted %d depformer steps", n)
		}
	}
	// Without weights per step the depformer is one unit, run once per step.
	c.DepformerWeightsPerStep = false
	lm := units(t, c, 8)
	last := lm.Units[len(lm.Units)-1]
	if len(lm.Units) != 34 || last.Kind != offload.KindDepformer || last.Runs != 8 {
		t.Errorf("shared depformer: %d units, last %s runs %d", len(lm.Units), last.Name, last.Runs)
	}
}

// TestPackTinyCheckpoint packs every unit of the tiny model from its real
// checkpoint: every tensor a unit names exists with the expected shape, and
// the packed blob is the parts' rows in order.
func TestPackTinyCheckpoint(t *testing.T) {
	c := cfgOf(t, "../testdata/tiny/config.json")
	f, err := weights.Open("../testdata/tiny/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lm := units(t, c, 16)
	used := map[string]bool{}
	for _, u := range lm.Units {
		blob, spans, err := u.Pack(nil, rowsOf(f, u))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(blob)) != u.Bytes || len(spans) != len(u.Parts) {
			t.Fatalf("%s: packed %d bytes in %d spans, want %d in %d", u.Name, len(blob), len(spans), u.Bytes, len(u.Parts))
		}
		var off int64
		for i, p := range u.Parts {
			used[p.Tensor] = true
			tn, err := f.Get(p.Tensor, p.Shape...)
			if err != nil {
				t.Fatalf("%s: %v", u.Name, err)
			}
			row := int64(p.Cols) * offload.ElemBytes
			want := tn.Data[int64(p.Row0)*row : int64(p.Row1)*row]
			if spans[i].Offset != off || !bytes.Equal(blob[off:off+spans[i].Bytes], want) {
				t.Errorf("%s: part %s rows %d..%d not where its span says", u.Name, p.Tensor, p.Row0, p.Row1)
			}
			off += spans[i].Bytes
		}
	}
	// Every LM tensor belongs to a unit or to a gathered table.
	for _, name := range f.Names() {
		table := strings.HasPrefix(name, "emb.") || strings.HasPrefix(name, "text_emb.") ||
			strings.HasPrefix(name, "depformer_emb.") || strings.HasPrefix(name, "depformer_text_emb.")
		if !used[name] && !table {
			t.Errorf("tensor %s is in no unit", name)
		}
	}
	// A wrong-sized part and a missing one are reported.
	u := lm.Units[0]
	if _, _, err := u.Pack(nil, func(int) ([]byte, error) { return make([]byte, 3), nil }); err == nil || !strings.Contains(err.Error(), "BF16 needs 24576") {
		t.Errorf("wrong size: %v", err)
	}
	if _, _, err := u.Pack(nil, func(k int) ([]byte, error) { return nil, fmt.Errorf("no %s", u.Parts[k].Tensor) }); err == nil || !strings.Contains(err.Error(), "layer.0") {
		t.Errorf("missing tensor: %v", err)
	}
}

// rowsOf gives Unit.Pack the rows of each part of u from f's tensors, at
// the part's stored row size.
func rowsOf(f *weights.File, u offload.Unit) func(k int) ([]byte, error) {
	return func(k int) ([]byte, error) {
		p := u.Parts[k]
		tn, err := f.Get(p.Tensor)
		if err != nil {
			return nil, err
		}
		rb := p.RowBytes()
		return tn.Data[min(int64(len(tn.Data)), int64(p.Row0)*rb):min(int64(len(tn.Data)), int64(p.Row1)*rb)], nil
	}
}

// TestUnitsMatchOldBuilder: the units lm.Units derives from the LM's tensor
// declaration are exactly those the builder that spelled every name itself
// (OldNewLM, kept in the tests) produced — names, kinds, bytes, cost-model
// figures, parts in order — for the 7B, 1.3B and tiny shapes, every number
// of depformer steps, and the shared depformer (with and without
// multi-linear), so every plan is unchanged.
func TestUnitsMatchOldBuilder(t *testing.T) {
	for _, path := range []string{"../testdata/personaplex-7b.config.json", "../testdata/personaplex-1b.config.json", "../testdata/tiny/config.json"} {
		base := cfgOf(t, path)
		for _, shared := range []bool{false, true} {
			for _, multi := range []bool{base.DepformerMultiLinear, !base.DepformerMultiLinear} {
				c := *base
				c.DepformerWeightsPerStep = !shared
				c.DepformerMultiLinear = multi
				if !shared && multi != base.DepformerMultiLinear {
					continue
				}
				for _, steps := range []int{0, 1, offload.DefaultDepSteps(&c), c.DepQ} {
					want, err := offload.OldNewLM(&c, steps)
					if err != nil {
						t.Fatal(err)
					}
					got := units(t, &c, steps)
					if steps == offload.DefaultDepSteps(&c) {
						// The accelerate baseline (which names the
						// checkpoint's modules from the units) and the plan
						// are unchanged too.
						fig := offload.DefaultFigures()
						bg, errG := offload.Accelerate(got, offload.Workload{Batch: 1}, fig, 8<<30)
						bw, errW := offload.Accelerate(want, offload.Workload{Batch: 1}, fig, 8<<30)
						if errG != nil || errW != nil || !reflect.DeepEqual(bg, bw) {
							t.Errorf("%s shared %v: accelerate baselines differ (%v, %v)", path, shared, errG, errW)
						}
						if !shared && bg != nil {
							n := len(bg.Modules)
							for s := 0; s < c.DepQ; s++ {
								if name := bg.Modules[n-c.DepQ+s].Name; name != fmt.Sprintf("linears.%d", s) {
									t.Errorf("%s: accelerate module %d is %q, not linears.%d", path, n-c.DepQ+s, name, s)
								}
							}
						}
						pg, errG := offload.NewProblem(got, offload.Workload{Batch: 1}, fig, 8<<30, 0).Solve()
						pw, errW := offload.NewProblem(want, offload.Workload{Batch: 1}, fig, 8<<30, 0).Solve()
						if errG != nil || errW != nil || !reflect.DeepEqual(pg.Where, pw.Where) || pg.Predict.FrameMs != pw.Predict.FrameMs || pg.Memory != pw.Memory {
							t.Errorf("%s shared %v: plans differ (%v, %v)", path, shared, errG, errW)
						}
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s shared %v multi-linear %v, %d steps: lm.Units differs from the old builder", path, shared, multi, steps)
						for i := range min(len(got.Units), len(want.Units)) {
							if !reflect.DeepEqual(got.Units[i], want.Units[i]) {
								t.Logf("unit %d: got %+v\nwant %+v", i, got.Units[i], want.Units[i])
								break
							}
						}
					}
				}
			}
		}
	}
}

// Parts stored as blocks are sized and packed by their block rows (a
// part's RowBytes in its format), each part checked against its format.
func TestPackStoredParts(t *testing.T) {
	u := offload.Unit{Name: "u", Parts: []offload.Part{
		{Tensor: "q", Shape: []int{4, 64}, Row0: 1, Row1: 3, Cols: 64, Stored: weights.Q8_0},
		{Tensor: "b", Shape: []int{2, 8}, Row0: 0, Row1: 2, Cols: 8},
	}}
	u.Bytes = u.Parts[0].Bytes() + u.Parts[1].Bytes()
	if u.Parts[0].Bytes() != 2*68 || u.Parts[0].RowBytes() != 68 || u.Parts[0].Format() != weights.Q8_0 || u.Parts[1].Format() != weights.BF16 {
		t.Fatalf("q8_0 part: %d bytes, %d a row, %s", u.Parts[0].Bytes(), u.Parts[0].RowBytes(), u.Parts[0].Format())
	}
	q := make([]byte, 4*68)
	for i := range q {
		q[i] = byte(i)
	}
	b := make([]byte, 2*8*2)
	for i := range b {
		b[i] = byte(200 + i)
	}
	rows := func(k int) ([]byte, error) {
		if k == 0 {
			rb := u.Parts[0].RowBytes()
			return q[1*rb : 3*rb], nil
		}
		return b, nil
	}
	blob, spans, err := u.Pack(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blob[:136], q[68:204]) || !bytes.Equal(blob[136:], b) || spans[1].Offset != 136 {
		t.Fatalf("packed wrongly: spans %v", spans)
	}
	if _, _, err := u.Pack(nil, func(int) ([]byte, error) { return make([]byte, 2*64*2), nil }); err == nil || !strings.Contains(err.Error(), "has 256 bytes, Q8_0 needs 136") {
		t.Errorf("bf16-sized rows for a q8_0 part: %v", err)
	}
	if _, _, err := u.Pack(nil, func(k int) ([]byte, error) { return make([]byte, 3), nil }); err == nil || !strings.Contains(err.Error(), "Q8_0 needs 136") {
		t.Errorf("a wrong-sized part: %v", err)
	}
}

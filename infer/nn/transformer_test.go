package nn

import (
	"math"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/weights"
)

func mimiEncoderTransformer(t *testing.T) (*Transformer, *weights.File) {
	t.Helper()
	cfg, err := config.Load("../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := weights.Open("../../testdata/tiny/mimi.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	mt := cfg.Mimi.Transformer
	tr, err := LoadTransformer(f, "encoder_transformer.transformer", TransformerConfig{
		DModel: mt.DModel, NumHeads: mt.NumHeads, NumLayers: mt.NumLayers, DimFeedforward: mt.DimFeedforward,
		Context: mt.Context, Norm: mt.Norm, LayerScale: mt.LayerScale != nil, Gating: mt.Gating,
		PosEmb: mt.PosEmb, MaxPeriod: mt.MaxPeriod,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr, f
}

// The Mimi encoder transformer, fed the reference SEANet output two latent
// frames per call as offline.py does, reproduces the reference output while
// its 32-position ring wraps (78 positions).
func TestMimiEncoderTransformerParity(t *testing.T) {
	tr, _ := mimiEncoderTransformer(t)
	exp, err := weights.Open("../../testdata/tiny/expected/mimi/mimi_encode.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := exp.Get("seanet_out")
	want, _ := exp.Get("encoder_transformer_out")
	C, T := in.Shape[1], in.Shape[2]
	x, w := in.Float32s(), want.Float32s()
	st, sc := tr.NewState(testBE), tr.NewScratch(testBE)
	var maxErr, maxRef float64
	for f := 0; f < T; f += 2 {
		rows := make([][]float32, 2)
		for i := range rows {
			rows[i] = make([]float32, C)
			for c := 0; c < C; c++ {
				rows[i][c] = x[c*T+f+i]
			}
		}
		fwd(tr, sc, tr, st, rows, backend.Chunk)
		for i := range rows {
			for c := 0; c < C; c++ {
				maxErr = math.Max(maxErr, math.Abs(float64(rows[i][c]-w[c*T+f+i])))
				maxRef = math.Max(maxRef, math.Abs(float64(w[c*T+f+i])))
			}
		}
	}
	if rel := maxErr / maxRef; rel > 1e-5 {
		t.Fatalf("max abs err %g (rel %g)", maxErr, rel)
	}
	t.Logf("max abs err %g, max |ref| %g", maxErr, maxRef)
}

// ForwardSteps equals Forward called once per row.
func TestForwardStepsEqualsSteps(t *testing.T) {
	tr, _ := mimiEncoderTransformer(t)
	a, b := tr.NewState(testBE), tr.NewState(testBE)
	sc := tr.NewScratch(testBE)
	n := 45
	rowsA := make([][]float32, n)
	rowsB := make([][]float32, n)
	for i := range rowsA {
		rowsA[i] = make([]float32, 32)
		rowsB[i] = make([]float32, 32)
		for c := range rowsA[i] {
			v := float32(math.Sin(float64(i*32+c) * 0.37))
			rowsA[i][c], rowsB[i][c] = v, v
		}
	}
	for i := range rowsA {
		fwd(tr, sc, tr, a, rowsA[i:i+1], backend.Chunk)
	}
	fwd(tr, sc, tr, b, rowsB, backend.Stepwise)
	for i := range rowsA {
		for c := range rowsA[i] {
			if d := math.Abs(float64(rowsA[i][c] - rowsB[i][c])); d > 1e-6 {
				t.Fatalf("row %d col %d: %g vs %g", i, c, rowsA[i][c], rowsB[i][c])
			}
		}
	}
	for l := range a.Rings {
		ak, _ := kv(a.Rings[l])
		bk, _ := kv(b.Rings[l])
		for j := range ak {
			if ak[j] != bk[j] {
				t.Fatalf("ring %d differs at %d", l, j)
			}
		}
	}
}

// Reserve sizes the rings once (n + 1 slots and a quarter, at most the
// context) and
// changes no output: positions stepped one at a time through a reserved
// state and through one grown by doubling give the same bits, before and
// after the ring reaches the context and wraps.
func TestReserveChangesNoOutput(t *testing.T) {
	tr0, f := mimiEncoderTransformer(t)
	cfg := tr0.Cfg
	cfg.Context = 100
	tr, err := LoadTransformer(f, "encoder_transformer.transformer", cfg)
	if err != nil {
		t.Fatal(err)
	}
	maxC := tr.MaxCapacity()
	if maxC <= initialCapacity {
		t.Fatalf("context %d: max capacity %d, not above the initial %d", cfg.Context, maxC, initialCapacity)
	}
	for _, n := range []int{70, maxC + 30} {
		grown, reserved := tr.NewState(testBE), tr.NewState(testBE)
		tr.Reserve(testBE, reserved, n)
		want := min(maxC, n+1+(n+1)/4)
		sc := tr.NewScratch(testBE)
		for i := 0; i < n; i++ {
			a, b := make([]float32, 32), make([]float32, 32)
			for c := range a {
				a[c] = float32(math.Sin(float64(i*32+c) * 0.37))
				b[c] = a[c]
			}
			fwd(tr, sc, tr, grown, [][]float32{a}, backend.Chunk)
			fwd(tr, sc, tr, reserved, [][]float32{b}, backend.Chunk)
			for c := range a {
				if math.Float32bits(a[c]) != math.Float32bits(b[c]) {
					t.Fatalf("n %d, position %d col %d: %g grown, %g reserved", n, i, c, a[c], b[c])
				}
			}
			if got := reserved.Rings[0].Capacity; got != want {
				t.Fatalf("n %d, position %d: reserved ring of %d slots, want %d from the start", n, i, got, want)
			}
		}
		if g := grown.Rings[0].Capacity; n == 70 && g == want {
			t.Fatalf("n %d: the grown ring has %d slots too (the test shows nothing)", n, g)
		}
	}
}

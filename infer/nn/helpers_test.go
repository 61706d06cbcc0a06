package nn

import (
	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
)

var testBE = cpu.Default()

// fwd runs rows (host slices, updated in place) through tr as one part of
// state st.
func fwd(tr *Transformer, sc *Scratch, src LayerSource, st *TransformerState, rows [][]float32, group int) {
	if len(rows) == 0 {
		return
	}
	x := testBE.NewActs(len(rows), len(rows[0]))
	for i, r := range rows {
		testBE.Upload(x.Slice(i, i+1), r)
	}
	tr.Forward(sc, src, x, []Part{{State: st, Rows: len(rows)}}, group)
	for i, r := range rows {
		testBE.Download(r, x.Slice(i, i+1))
	}
}

func kv(r *backend.Ring) ([]float32, []float32) { return cpu.KV(r) }

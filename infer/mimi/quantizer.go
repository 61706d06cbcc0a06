package mimi

import (
	"fmt"
	"math"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// codebook is EuclideanCodebook's embedding, embedding_sum / max(cluster_usage, ε),
// with the squared norm of each centroid.
type codebook struct {
	vecs  ops.Mat // [bins][dim], F32
	data  []float32
	norms []float32
}

const codebookEpsilon = 1e-5

func loadCodebook(f *weights.File, prefix string, bins, dim int) (*codebook, error) {
	es, err := f.Get(prefix+".embedding_sum", bins, dim)
	if err != nil {
		return nil, err
	}
	cu, err := f.Get(prefix+".cluster_usage", bins)
	if err != nil {
		return nil, err
	}
	sum, usage := es.Float32s(), cu.Float32s()
	cb := &codebook{data: sum, norms: make([]float32, bins)}
	for i := 0; i < bins; i++ {
		u := max(usage[i], codebookEpsilon)
		row := sum[i*dim : (i+1)*dim]
		for j := range row {
			row[j] /= u
		}
		cb.norms[i] = ops.Dot(row, row)
	}
	cb.vecs = ops.MatFromF32(bins, dim, cb.data)
	return cb, nil
}

func (cb *codebook) vec(code int) []float32 {
	d := cb.vecs.Cols
	return cb.data[code*d : (code+1)*d]
}

// pick is torch.cdist(x, codebook).argmin() given the products dots =
// codebook·x: the distance is computed as cdist does for many centroids,
// sqrt(max(|x|²+|c|²−2x·c, 0)), and ties keep the first index.
func (cb *codebook) pick(e *ops.Engine, x, dots []float32) int {
	xn := e.Dot(x, x)
	best, bestD := 0, float32(math.Inf(1))
	for i, d := range dots {
		v := max(xn+cb.norms[i]-2*d, 0)
		v = float32(math.Sqrt(float64(v)))
		if v < bestD {
			best, bestD = i, v
		}
	}
	return best
}

// rvq is one ResidualVectorQuantizer (force_projection: 1×1 convolutions in
// and out) restricted to the codebooks in use.
type rvq struct {
	inProj, outProj ops.Mat
	books           []*codebook
}

func loadRVQ(f *weights.File, prefix string, q *config.Quantizer, total, used int) (*rvq, error) {
	inDim, outDim := quantInDim(q), quantOutDim(q)
	r := &rvq{}
	w, err := f.Get(prefix+".input_proj.weight", q.Dimension, inDim, 1)
	if err != nil {
		return nil, err
	}
	if r.inProj, err = ops.NewMat(w); err != nil {
		return nil, err
	}
	if w, err = f.Get(prefix+".output_proj.weight", outDim, q.Dimension, 1); err != nil {
		return nil, err
	}
	if r.outProj, err = ops.NewMat(w); err != nil {
		return nil, err
	}
	for i := 0; i < total; i++ {
		p := fmt.Sprintf("%s.vq.layers.%d._codebook", prefix, i)
		if i >= used {
			// Unused codebooks must still be there (the reference loads them).
			if _, err := f.Get(p+".embedding_sum", q.Bins, q.Dimension); err != nil {
				return nil, err
			}
			continue
		}
		cb, err := loadCodebook(f, p, q.Bins, q.Dimension)
		if err != nil {
			return nil, err
		}
		r.books = append(r.books, cb)
	}
	return r, nil
}

func quantInDim(q *config.Quantizer) int {
	if q.InputDimension > 0 {
		return q.InputDimension
	}
	return q.Dimension
}

func quantOutDim(q *config.Quantizer) int {
	if q.OutputDimension > 0 {
		return q.OutputDimension
	}
	return q.Dimension
}

// quantizer is SplitResidualVectorQuantizer with set_num_codebooks(n):
// rvq_first holds codebook 0, rvq_rest codebooks 1..n−1.
type quantizer struct {
	first, rest *rvq // rest nil when one codebook is used
	dim, bins   int
	outDim      int
}

func loadQuantizer(f *weights.File, c *config.Mimi) (*quantizer, error) {
	q := &c.Quantizer
	if q.NQ < 2 {
		return nil, fmt.Errorf("quantizer: n_q %d: the split quantizer needs at least 2", q.NQ)
	}
	if q.Dimension <= 0 || q.Bins <= 0 {
		return nil, fmt.Errorf("quantizer: dimension and bins must be positive")
	}
	qz := &quantizer{dim: q.Dimension, bins: q.Bins, outDim: quantOutDim(q)}
	var err error
	if qz.first, err = loadRVQ(f, "quantizer.rvq_first", q, 1, 1); err != nil {
		return nil, err
	}
	rest, err := loadRVQ(f, "quantizer.rvq_rest", q, q.NQ-1, c.NumCodebooks-1)
	if err != nil {
		return nil, err
	}
	if c.NumCodebooks > 1 {
		qz.rest = rest
	}
	return qz, nil
}

// quantScratch is the per-state scratch of the quantizer.
type quantScratch struct {
	res, q []float32 // [dim]
	dots   []float32 // [bins]
	out    []float32 // [outDim]
	tmp    []float32 // [outDim]
}

func (qz *quantizer) newScratch() *quantScratch {
	return &quantScratch{res: make([]float32, qz.dim), q: make([]float32, qz.dim),
		dots: make([]float32, qz.bins), out: make([]float32, qz.outDim), tmp: make([]float32, qz.outDim)}
}

// decode writes the latent vector of codes into sc.out and returns it.
func (qz *quantizer) decode(e *ops.Engine, codes []int, sc *quantScratch) []float32 {
	dec := func(r *rvq, codes []int, dst []float32) {
		clear(sc.q)
		for i, cb := range r.books {
			ops.Add(sc.q, cb.vec(codes[i]))
		}
		e.MatVec(r.outProj, dst, sc.q)
	}
	dec(qz.first, codes[:1], sc.out)
	if qz.rest != nil {
		dec(qz.rest, codes[1:], sc.tmp)
		ops.Add(sc.out, sc.tmp)
	}
	return sc.out
}

// quantBatch is the scratch of encodeBatch (row lists over the latents)
// and of its callers (the latents, their codes and scratches).
type quantBatch struct {
	res, dots [][]float32
	xs        [][]float32
	codes     [][]int
	scs       []*quantScratch
}

// encodeBatch quantizes latent vectors xs[i] (each with its scratch
// scs[i]) into codes[i] (the codebooks in use): split residual vector
// quantization, the input projection and each codebook's products run as
// one MatMul over the rows, which reads every codebook once for them all
// and gives each row MatVec's bits; the nearest search (pick) and the
// residual update stay per row.
func (qz *quantizer) encodeBatch(e *ops.Engine, codes [][]int, xs [][]float32, scs []*quantScratch, qb *quantBatch) {
	B := len(xs)
	qb.res, qb.dots = at(qb.res, B), at(qb.dots, B)
	for i, sc := range scs {
		qb.res[i], qb.dots[i] = sc.res, sc.dots
	}
	enc := func(r *rvq, first, n int) {
		e.MatMul(r.inProj, qb.res, xs)
		for k, cb := range r.books[:n] {
			e.MatMul(cb.vecs, qb.dots, qb.res)
			for i, sc := range scs {
				c := cb.pick(e, sc.res, sc.dots)
				codes[i][first+k] = c
				v := cb.vec(c)
				for j := range sc.res {
					sc.res[j] -= v[j]
				}
			}
		}
	}
	enc(qz.first, 0, 1)
	if qz.rest != nil {
		enc(qz.rest, 1, len(qz.rest.books))
	}
	clear(qb.res)
	clear(qb.dots)
}

package cuda

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/weights"
)

func dryWeight(rows, cols int, dt weights.DType) *backend.Weight {
	return &backend.Weight{Name: "w", Rows: rows, Cols: cols, DType: dt, Host: make([]byte, rows*cols*dt.Size())}
}

// Every op of the backend, on the dry driver: each launch matches its
// kernel's signature and the launch limits, through every path (both
// matmul kernels, vectorised or not, views, rings grown, wrapped, copied,
// stepwise and chunked attention). No values
// are checked (TestConformance does that on a GPU).
func TestDryOps(t *testing.T) {
	for _, dtype := range []string{"f32", "bf16"} {
		be, st, err := NewDry(Options{ComputeDType: dtype}, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []weights.DType{weights.BF16, weights.F16, weights.F32} {
			for _, sh := range [][2]int{{1, 8}, {37, 64}, {96, 97}, {300, 256}} {
				w := dryWeight(sh[0], sh[1], dt)
				for _, B := range []int{1, 9, 16} {
					x, y := be.NewActs(B, sh[1]), be.NewActs(B, sh[0])
					be.Upload(x, make([]float32, B*sh[1]))
					be.MatMul(y, x, w)
					be.Download(make([]float32, B*sh[0]), y)
				}
			}
		}
		want := []string{"matmul_fma_vec", "matmul_fma", "matmul_fma_rows"} // B = 1 (float rows, K % 8 == 0; the rest), B > 1
		if dtype == "bf16" {
			want = []string{"matmul_mma_bf16"}
		}
		for _, k := range want {
			if st.Count(k) == 0 {
				t.Fatalf("%s compute never launched %s", dtype, k)
			}
		}
		const B, D = 5, 96
		a := be.NewActs(B, D)
		wide := be.NewActs(B+2, D+8)
		be.Upload(wide.Columns(4, 4+D).Slice(1, 1+B), make([]float32, B*D))
		be.Download(make([]float32, B*D), wide.Columns(4, 4+D).Slice(1, 1+B))
		scale, bias := dryWeight(1, D, weights.BF16), dryWeight(1, D, weights.F32)
		be.Norm(a, wide.Columns(0, D).Slice(0, B), &backend.Norm{RMS: true, Eps: 1e-5, W: scale})
		be.Norm(a, a, &backend.Norm{Eps: 1e-5, W: scale, B: bias})
		be.AddScaled(a, a, scale)
		be.AddScaled(a, a, nil)
		be.Gate(a.Columns(0, D/2), a, backend.SiLU)
		be.Activate(a.Columns(3, 50), backend.GELU)
		be.RoPE(a.Columns(16, 64), be.NewRope(16, 10000), []int{0, 7, 300, 2999, 12})
		be.Copy(wide.Slice(2, 2+B).Columns(0, D), a)
		tabs := []*backend.Weight{dryWeight(11, 40, weights.BF16), dryWeight(7, 40, weights.F32), dryWeight(13, 40, weights.F16)}
		e := be.NewActs(3, 40)
		be.Embed(e, tabs, []int{3, 0, 12, backend.ZeroToken, 6, 1, 10, 2, backend.ZeroToken}, false)
		be.Embed(e, tabs, []int{3, 0, 12, backend.ZeroToken, 6, 1, 10, 2, backend.ZeroToken}, true)

		const H, dh, ctx = 4, 16, 24
		rings := []*backend.Ring{be.NewRing(H, dh, 2), be.NewRing(H, dh, ctx), be.NewRing(H, dh, 3)}
		for p := 0; p < 5; p++ {
			if p+1 >= rings[0].Capacity {
				be.GrowRing(rings[0], min(ctx, 2*rings[0].Capacity))
			}
			be.Attend(be.NewActs(1, H*dh), be.NewActs(1, 3*H*dh), []backend.Seq{{Ring: rings[0], Rows: 1}}, ctx, backend.Stepwise)
		}
		be.FillRing(rings[1], 30)
		for _, group := range []int{backend.Stepwise, backend.Chunk, 2} {
			seqs := []backend.Seq{{Ring: rings[0], Rows: 3}, {Ring: rings[1], Rows: 1}, {Ring: rings[2], Rows: 4}} // 4 > capacity 3: in chunks written row by row
			be.Attend(be.NewActs(8, H*dh), be.NewActs(8, 3*H*dh), seqs, ctx, group)
		}
		cp := be.NewRing(H, dh, 1)
		be.CopyRing(cp, rings[1])
		if cp.End != rings[1].End || cp.Capacity != ctx {
			t.Fatalf("CopyRing: end %d capacity %d", cp.End, cp.Capacity)
		}
		for _, k := range []string{"rmsnorm", "layernorm", "add_scaled", "gate", "activate", "rope", "copy2d", "embed_sum", "ring_write", "attend", "fill_ring"} {
			if st.Count(k) == 0 {
				t.Errorf("%s compute: %s never launched", dtype, k)
			}
		}
		be.Close()
	}
}

// Placements, as the bound weight says: an OnCPU weight is multiplied by
// the CPU backend (nothing launched, nothing uploaded), a weight bound to
// device memory is read there (nothing uploaded), any other is uploaded
// once into the resident cache; the name plays no part, and the memory
// limit holds.
func TestDryPlacements(t *testing.T) {
	be, st, err := NewDry(Options{ComputeDType: "f32", CPU: cpu.Default()}, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	buf, err := be.OffloadDevice().Alloc("unit", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	x, y := be.NewActs(2, 64), be.NewActs(2, 32)
	for _, place := range []string{"cpu", "device", "resident"} {
		w := dryWeight(32, 64, weights.BF16)
		switch place {
		case "cpu":
			w.OnCPU = true
		case "device":
			w.Dev, w.DevOffset = buf, 4096
		}
		fma := func() int { return st.Count("matmul_fma") + st.Count("matmul_fma_vec") + st.Count("matmul_fma_rows") }
		n, up := fma(), be.Resident()
		be.MatMul(y, x, w)
		if launched := fma() > n; launched == (place == "cpu") {
			t.Errorf("%s weight: launched %v", place, launched)
		}
		if uploaded := be.Resident() - up; uploaded != map[string]int64{"resident": 32 * 64 * 2}[place] {
			t.Errorf("%s weight: %d bytes uploaded", place, uploaded)
		}
	}
	// A weight past its device buffer is refused.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a weight past the end of its buffer was accepted")
			}
		}()
		w := dryWeight(32, 64, weights.BF16)
		w.Dev, w.DevOffset = buf, 1<<16-100
		be.MatMul(y, x, w)
	}()
	used, peak, limit := be.Memory()
	if used > limit || peak > limit {
		t.Fatalf("%d used, %d peak of %d", used, peak, limit)
	}
}

// The offload.Device of a closed backend answers errors, never panics (a
// runtime closed after its backend).
func TestOffloadDeviceAfterClose(t *testing.T) {
	be, _, err := NewDry(Options{}, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	d := be.OffloadDevice()
	b, err := d.Alloc("unit", 1000)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := d.NewStream()
	f, _ := d.NewFence()
	if err := d.Reserve("kv", 1<<20); err != nil || d.Used() < 1<<20 {
		t.Fatal(err, d.Used())
	}
	if err := d.CopyAsync(s, b, 0, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyAsync(s, b, 1, make([]byte, 1000)); err == nil {
		t.Fatal("a copy past the buffer's end was accepted")
	}
	be.Close()
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	d.Unreserve("kv")
	if err := d.Record(f, s); err == nil {
		t.Fatal("a record on a closed backend succeeded")
	}
	if err := d.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
}

// The B = 1 product takes matmul_fma_vec (16-byte weight and activation
// loads) only when both are 16-byte aligned with K % 8 == 0; an
// activation view starting one float in, or a row of K % 8 != 0, takes
// matmul_fma (on a GPU the vector loads would fault on them).
func TestDryMatVecKernelChoice(t *testing.T) {
	be, st, err := NewDry(Options{ComputeDType: "f32"}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range []struct {
		name      string
		cols, off int
		dt        weights.DType
		want      string
	}{
		{"aligned bf16", 64, 0, weights.BF16, "matmul_fma_vec"},
		{"aligned f32", 64, 0, weights.F32, "matmul_fma_vec"},
		{"aligned f16", 64, 0, weights.F16, "matmul_fma_vec"},
		{"view one float in", 64, 1, weights.BF16, "matmul_fma"},
		{"view four floats in", 64, 4, weights.BF16, "matmul_fma_vec"},
		{"K % 8 != 0", 60, 0, weights.BF16, "matmul_fma"},
		{"q8_0", 64, 0, weights.Q8_0, "matmul_fma"},
	} {
		w := &backend.Weight{Name: "w", Rows: 16, Cols: c.cols, DType: c.dt, Host: make([]byte, c.dt.RowBytes(c.cols)*16)}
		wide := be.NewActs(1, c.cols+8)
		x, y := wide.Columns(c.off, c.off+c.cols), be.NewActs(1, 16)
		vec, fma := st.Count("matmul_fma_vec"), st.Count("matmul_fma")
		be.MatMul(y, x, w)
		got := ""
		switch {
		case st.Count("matmul_fma_vec") > vec:
			got = "matmul_fma_vec"
		case st.Count("matmul_fma") > fma:
			got = "matmul_fma"
		}
		if got != c.want {
			t.Errorf("%s: launched %q, want %q", c.name, got, c.want)
		}
	}
}

package mimi

import (
	"fmt"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"math"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/testalloc"
)

const tinyDir = "../../testdata/tiny/"

func tinyModel(t testing.TB) *Model {
	t.Helper()
	cfg, err := config.Load(tinyDir + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(cfg.Mimi, tinyDir+"mimi.safetensors", cpu.Default(), ops.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func loadWAV(t testing.TB, path string) []float32 {
	t.Helper()
	pcm, err := audio.LoadMono(path, 24000)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

// frames cuts pcm into frames of n samples, the last one zero-padded (_iterate_audio).
func frames(pcm []float32, n int) [][]float32 {
	var out [][]float32
	for i := 0; i < len(pcm); i += n {
		f := make([]float32, n)
		copy(f, pcm[i:min(i+n, len(pcm))])
		out = append(out, f)
	}
	return out
}

func fixture(t testing.TB, name string) *weights.File {
	t.Helper()
	f, err := weights.Open(tinyDir + "expected/mimi/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func tensor(t testing.TB, f *weights.File, name string) *weights.Tensor {
	t.Helper()
	x, err := f.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// channelMajor collects per-frame time-major blocks [steps][C] into the
// reference layout [C][frames·steps].
type channelMajor struct {
	C, T int
	data []float32
	next int
}

func newChannelMajor(C, T int) *channelMajor {
	return &channelMajor{C: C, T: T, data: make([]float32, C*T)}
}

func (c *channelMajor) add(rows []float32) {
	n := len(rows) / c.C
	for i := 0; i < n; i++ {
		for ch := 0; ch < c.C; ch++ {
			c.data[ch*c.T+c.next+i] = rows[i*c.C+ch]
		}
	}
	c.next += n
}

// relErr is max |got − want| / max |want|.
func relErr(t testing.TB, what string, got []float32, want *weights.Tensor) float64 {
	t.Helper()
	w := want.Float32s()
	if len(got) != len(w) {
		t.Fatalf("%s: %d values, reference has %d", what, len(got), len(w))
	}
	var maxErr, maxRef float64
	for i := range w {
		maxErr = math.Max(maxErr, math.Abs(float64(got[i]-w[i])))
		maxRef = math.Max(maxRef, math.Abs(float64(w[i])))
	}
	return maxErr / maxRef
}

func snrDB(got []float32, want []float32) float64 {
	var sig, noise float64
	for i := range want {
		d := float64(got[i] - want[i])
		sig += float64(want[i]) * float64(want[i])
		noise += d * d
	}
	return 10 * math.Log10(sig/noise)
}

type encodeRun struct {
	codes                  [][]int
	seanet, trOut, latents *channelMajor
}

func runEncode(m *Model, e *Encoder, pcm []float32) *encodeRun {
	fs := frames(pcm, m.FrameSize())
	n := len(fs)
	r := &encodeRun{seanet: newChannelMajor(m.Dimension(), 2*n), trOut: newChannelMajor(m.Dimension(), 2*n),
		latents: newChannelMajor(m.Dimension(), n)}
	for _, f := range fs {
		c := e.EncodeFrame(f)
		r.codes = append(r.codes, append([]int(nil), c...))
		r.seanet.add(e.SeanetOut())
		r.trOut.add(e.TransformerOut())
		r.latents.add(e.Latent())
	}
	return r
}

func TestEncodeMatchesReference(t *testing.T) {
	m := tinyModel(t)
	exp := fixture(t, "mimi_encode.safetensors")
	pcm := loadWAV(t, tinyDir+"input.wav")
	if len(pcm) != 73200 {
		t.Fatalf("input.wav: %d samples, 73200 expected", len(pcm))
	}
	e := m.NewEncoder()
	r := runEncode(m, e, pcm)
	want := tensor(t, exp, "codes")
	K, F := want.Shape[1], want.Shape[2]
	if len(r.codes) != F || K != m.NumCodebooks() {
		t.Fatalf("%d frames of %d codes, reference %d of %d", len(r.codes), m.NumCodebooks(), F, K)
	}
	wc := want.Int64s()
	mismatches := 0
	for f := 0; f < F; f++ {
		for k := 0; k < K; k++ {
			if int64(r.codes[f][k]) != wc[k*F+f] {
				if mismatches < 10 {
					t.Errorf("frame %d codebook %d: code %d, reference %d", f, k, r.codes[f][k], wc[k*F+f])
				}
				mismatches++
			}
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d codes differ", mismatches, K*F)
	}
	for _, c := range []struct {
		name string
		got  *channelMajor
	}{{"seanet_out", r.seanet}, {"encoder_transformer_out", r.trOut}, {"latent", r.latents}} {
		rel := relErr(t, c.name, c.got.data, tensor(t, exp, c.name))
		t.Logf("%s: max rel err %.3g", c.name, rel)
		if rel > 1e-4 {
			t.Errorf("%s: max rel err %g > 1e-4", c.name, rel)
		}
	}

	// Reset gives exactly what a fresh state gives.
	e.Reset()
	r2 := runEncode(m, e, pcm)
	for f := range r.codes {
		for k := range r.codes[f] {
			if r.codes[f][k] != r2.codes[f][k] {
				t.Fatalf("after Reset: frame %d codebook %d: %d, fresh state %d", f, k, r2.codes[f][k], r.codes[f][k])
			}
		}
	}
	for i := range r.latents.data {
		if r.latents.data[i] != r2.latents.data[i] {
			t.Fatalf("after Reset: latent value %d differs: %g vs %g", i, r2.latents.data[i], r.latents.data[i])
		}
	}
}

type decodeRun struct {
	latent, up, trOut *channelMajor
	pcm               []float32
}

func runDecode(m *Model, d *Decoder, codes [][]int) *decodeRun {
	n := len(codes)
	D := m.Dimension()
	r := &decodeRun{latent: newChannelMajor(D, n), up: newChannelMajor(D, 2*n), trOut: newChannelMajor(D, 2*n)}
	for _, c := range codes {
		pcm := d.DecodeFrame(c)
		r.pcm = append(r.pcm, pcm...)
		r.latent.add(d.QuantizedLatent())
		r.up.add(d.Upsampled())
		r.trOut.add(d.TransformerOut())
	}
	return r
}

func fixtureCodes(t testing.TB, f *weights.File) [][]int {
	c := tensor(t, f, "codes")
	K, F := c.Shape[1], c.Shape[2]
	v := c.Int64s()
	out := make([][]int, F)
	for i := range out {
		out[i] = make([]int, K)
		for k := range out[i] {
			out[i][k] = int(v[k*F+i])
		}
	}
	return out
}

func TestDecodeMatchesReference(t *testing.T) {
	m := tinyModel(t)
	exp := fixture(t, "mimi_decode.safetensors")
	codes := fixtureCodes(t, exp)
	d := m.NewDecoder()
	r := runDecode(m, d, codes)
	for _, c := range []struct {
		name string
		got  *channelMajor
	}{{"quantized_latent", r.latent}, {"upsampled", r.up}, {"decoder_transformer_out", r.trOut}} {
		rel := relErr(t, c.name, c.got.data, tensor(t, exp, c.name))
		t.Logf("%s: max rel err %.3g", c.name, rel)
		if rel > 1e-4 {
			t.Errorf("%s: max rel err %g > 1e-4", c.name, rel)
		}
	}
	want := tensor(t, exp, "pcm_out").Float32s()
	if len(r.pcm) != len(want) {
		t.Fatalf("pcm: %d samples, reference %d", len(r.pcm), len(want))
	}
	snr := snrDB(r.pcm, want)
	t.Logf("pcm_out: SNR %.1f dB, max rel err %.3g", snr, relErr(t, "pcm_out", r.pcm, tensor(t, exp, "pcm_out")))
	if snr < 60 {
		t.Errorf("pcm_out: SNR %.1f dB < 60", snr)
	}

	d.Reset()
	r2 := runDecode(m, d, codes)
	for i := range r.pcm {
		if r.pcm[i] != r2.pcm[i] {
			t.Fatalf("after Reset: sample %d: %g, fresh state %g", i, r2.pcm[i], r.pcm[i])
		}
	}
}

// The voice prompt as offline.py encodes it (load_audio, normalize_audio to
// −24 LUFS, frames) gives the reference's codes.
func TestVoicePromptCodes(t *testing.T) {
	m := tinyModel(t)
	pcm := audio.NormalizeLoudness(loadWAV(t, tinyDir+"voices/TINYF0.wav"), 24000, -24)
	r := runEncode(m, m.NewEncoder(), pcm)
	want := tensor(t, fixture(t, "voice_prompt_encode.safetensors"), "codes")
	K, F := want.Shape[1], want.Shape[2]
	if len(r.codes) != F {
		t.Fatalf("%d frames, reference %d", len(r.codes), F)
	}
	wc := want.Int64s()
	for f := 0; f < F; f++ {
		for k := 0; k < K; k++ {
			if int64(r.codes[f][k]) != wc[k*F+f] {
				t.Fatalf("frame %d codebook %d: code %d, reference %d", f, k, r.codes[f][k], wc[k*F+f])
			}
		}
	}
}

// Encoders and decoders are independent: interleaving two streams on one
// model gives each stream's own results.
func TestIndependentStates(t *testing.T) {
	m := tinyModel(t)
	pcm := loadWAV(t, tinyDir+"input.wav")
	fs := frames(pcm, m.FrameSize())
	a, b := m.NewEncoder(), m.NewEncoder()
	dec := m.NewDecoder()
	ref := runEncode(m, m.NewEncoder(), pcm)
	for i, f := range fs {
		ca := a.EncodeFrame(f)
		dec.DecodeFrame(ca)
		b.EncodeFrame(fs[len(fs)-1-i])
		for k := range ca {
			if ca[k] != ref.codes[i][k] {
				t.Fatalf("frame %d codebook %d: %d with interleaved streams, %d alone", i, k, ca[k], ref.codes[i][k])
			}
		}
	}
}

func TestInvalidInputsPanic(t *testing.T) {
	m := tinyModel(t)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"short frame", func() { m.NewEncoder().EncodeFrame(make([]float32, 100)) }},
		{"code out of range", func() { m.NewDecoder().DecodeFrame([]int{0, 1, 2, 3, 4, 5, 6, 2048}) }},
		{"too few codes", func() { m.NewDecoder().DecodeFrame([]int{0}) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
	if err := m.CheckCodes([]int{0, 1, 2, 3, 4, 5, 6, -1}); err == nil {
		t.Error("CheckCodes accepted -1")
	}
}

func TestLoadErrorsNameTensor(t *testing.T) {
	cfg, err := config.Load(tinyDir + "config.json")
	if err != nil {
		t.Fatal(err)
	}
	c := *cfg.Mimi
	c.Seanet.NFilters = 16 // shapes no longer match the checkpoint
	_, err = Open(&c, tinyDir+"mimi.safetensors", cpu.Default(), ops.Default())
	if err == nil {
		t.Fatal("mismatched config accepted")
	}
	t.Log(err)
	if _, err := Open(cfg.Mimi, tinyDir+"missing.safetensors", cpu.Default(), ops.Default()); err == nil {
		t.Fatal("missing file accepted")
	} else {
		t.Log(err)
	}
}

// No allocation per frame, after a Reset included: the states keep every
// buffer. (A fresh state's first frame allocates nn.TransformerState's
// scratch, which nn sizes lazily on its first Forward.)
func TestNoAllocationsPerFrame(t *testing.T) {
	m := tinyModel(t)
	pcm := loadWAV(t, tinyDir+"input.wav")[:m.FrameSize()]
	e, d := m.NewEncoder(), m.NewDecoder()
	codes := make([]int, m.NumCodebooks())
	afterReset := testalloc.PerRun(t, 5, func() {
		e.Reset()
		d.Reset()
		copy(codes, e.EncodeFrame(pcm))
		d.DecodeFrame(codes)
	})
	steady := testalloc.PerRun(t, 20, func() {
		copy(codes, e.EncodeFrame(pcm))
		d.DecodeFrame(codes)
	})
	if afterReset != 0 || steady != 0 {
		t.Errorf("allocations: %v per frame after a reset, %v per frame in steady state", afterReset, steady)
	}
}

// Every kernel variant and thread count gives bit-identical codes, latents
// and samples at the real Mimi's size (where the convolutions and matrix
// products are split between threads), and the tiny model still matches
// the reference codes under each variant.
func TestKernelVariantsAndThreadsBitIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("real-size model")
	}
	real := realRandomModel(t)
	tinyDefault := tinyModel(t)
	m, tiny := real, tinyDefault
	tinyPCM := loadWAV(t, tinyDir+"input.wav")
	wantTiny := runEncode(tiny, tiny.NewEncoder(), tinyPCM)
	use := func(k string, th int) {
		t.Helper()
		c, err := cpu.New(cpu.Options{Kernel: k, Threads: th})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		m, tiny = real.WithCompute(c, c.Engine()), tinyDefault.WithCompute(c, c.Engine())
	}
	type result struct {
		codes  []int
		latent []float32
		pcm    []float32
	}
	run := func(frames int) result {
		var r result
		e, d := m.NewEncoder(), m.NewDecoder()
		sig := testSignal(frames * m.FrameSize())
		for f := 0; f < frames; f++ {
			c := e.EncodeFrame(sig[f*m.FrameSize() : (f+1)*m.FrameSize()])
			r.codes = append(r.codes, c...)
			r.latent = append(r.latent, e.Latent()...)
			r.pcm = append(r.pcm, d.DecodeFrame(c)...)
		}
		return r
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: value %d: %g, first configuration %g", what, i, got[i], want[i])
			}
		}
	}
	var first *result
	names := ops.KernelNames()
	for i := len(names) - 1; i >= 0; i-- { // best first: it runs the most frames
		k := names[i]
		frames := 3
		if k == "portable" {
			frames = 1 // slow at this size
		}
		for _, th := range []int{1, 2} {
			use(k, th)
			r := run(frames)
			if first == nil {
				first = &r
				continue
			}
			what := fmt.Sprintf("kernel %s, %d threads", k, th)
			for i := range r.codes {
				if r.codes[i] != first.codes[i] {
					t.Fatalf("%s: code %d is %d, first configuration %d", what, i, r.codes[i], first.codes[i])
				}
			}
			same(what+": latent", r.latent, first.latent[:len(r.latent)])
			same(what+": pcm", r.pcm, first.pcm[:len(r.pcm)])
		}
		got := runEncode(tiny, tiny.NewEncoder(), tinyPCM)
		for f := range got.codes {
			for i := range got.codes[f] {
				if got.codes[f][i] != wantTiny.codes[f][i] {
					t.Fatalf("kernel %s: tiny model frame %d code %d differs", k, f, i)
				}
			}
		}
	}
}

// stageBytes is the memory a stage's buffers hold.
func stageBytes(s stage) int64 {
	switch s := s.(type) {
	case *convStage:
		return 4 * int64(cap(s.buf)+cap(s.out))
	case *convTrStage:
		return 4 * int64(cap(s.buf)+cap(s.out))
	case *resStage:
		n := int64(0)
		for _, b := range s.block {
			n += stageBytes(b)
		}
		if s.shortcut != nil {
			n += stageBytes(s.shortcut)
		}
		return n
	}
	return 0
}

// StreamBytes bounds, closely, what an encoder's and a decoder's SEANet
// buffers hold after calls of that many frames, at the real Mimi's size.
func TestStreamBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("real-size model")
	}
	m := realRandomModel(t)
	for _, frames := range []int{1, 5, 16} {
		e, d := m.NewEncoder(), m.NewDecoder()
		pcm := testSignal(frames * m.FrameSize())
		for range 2 {
			d.Decode(e.Encode(pcm))
		}
		var held int64
		for _, s := range append(append([]stage{}, e.steps...), d.steps...) {
			held += stageBytes(s)
		}
		held += stageBytes(e.down) + stageBytes(d.up)
		want, err := StreamBytes(m.Cfg, frames)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d frames a call: buffers %.1f MiB, StreamBytes %.1f MiB", frames, float64(held)/(1<<20), float64(want)/(1<<20))
		if held > want || float64(held) < 0.7*float64(want) {
			t.Errorf("%d frames a call: the buffers hold %d bytes, StreamBytes says %d", frames, held, want)
		}
	}
}

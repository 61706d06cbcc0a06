package job

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"time"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/offload"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Config      *config.Config
	MoshiWeight string // "" = random bf16 weights at the config's shape
	MimiWeight  string // "" = random f32 weights at the config's Mimi shape
	Quantize    string // quantize the LM at load: "", "q8_0", "q4_k" (--weights, as Options.Quantize)
	Frames      int    // measured frames (after Warmup)
	Warmup      int
	MemoryBytes int // buffer for the memory-bandwidth measurement (0 = 1 GiB)
	// KVFill pretends this many positions are already in the LM's KV cache
	// (synthetic keys and values), to time attention at long contexts.
	KVFill int
	// BatchSize is the number of conversations run in lockstep (≤ 1: one).
	BatchSize int
	// Device is where it runs (the CPU, or a GPU; not the simulated device).
	Device DeviceOptions
	Log    Logger
}

// BenchResult is what `pp-offline bench` reports: medians over the frames.
type BenchResult struct {
	Config                string  `json:"config,omitempty"`
	Weights               string  `json:"weights"` // "random" or the checkpoint paths
	Frames                int     `json:"frames"`
	BatchSize             int     `json:"batch_size"`
	LMMsPerStep           float64 `json:"lm_ms_per_step"`    // one lockstep LM step for all conversations
	FrameMsPerStep        float64 `json:"frame_ms_per_step"` // LM + codec for all conversations
	CodecMsPerStep        float64 `json:"codec_ms_per_step"` // Mimi encode + decode for all conversations
	LMFramesPerSecond     float64 `json:"lm_frames_per_second"`
	FramesPerSecond       float64 `json:"frames_per_second"` // aggregate: batch_size · 1000 / frame_ms_per_step
	PeakRSSBytes          int64   `json:"peak_rss_bytes"`
	KVBytesHeld           int64   `json:"kv_bytes_held"` // the LM's KV rings of all conversations at the end`
	KVPositions           int     `json:"kv_positions"`  // cache positions attended at the last frame
	Threads               int     `json:"threads"`
	LMMsPerFrame          float64 `json:"lm_ms_per_frame"`
	TemporalMsPerFrame    float64 `json:"temporal_ms_per_frame"`
	DepformerMsPerFrame   float64 `json:"depformer_ms_per_frame"` // text head, depformer and sampling
	DepformerSteps        int     `json:"depformer_steps_per_frame"`
	CodecEncodeMsPerFrame float64 `json:"codec_encode_ms_per_frame"`
	CodecDecodeMsPerFrame float64 `json:"codec_decode_ms_per_frame"`
	// CodecFramesPerCall is the frames of each conversation the codec
	// codes in one call (job.CodecFrames); the codec figures are a call's
	// time spread over its frames, and the warm-up and measured frames
	// whole calls.
	CodecFramesPerCall  int     `json:"codec_frames_per_call"`
	TotalMsPerFrame     float64 `json:"total_ms_per_frame"`
	RealTimeFactor      float64 `json:"real_time_factor"`
	WeightBytesPerFrame int64   `json:"weight_bytes_per_frame"`
	// The arithmetic of a step's weight products, all conversations, 2
	// FLOPs a multiply-add (attention's dot products, norms and sampling
	// left out: lm.Model.FLOPsPerFrame, mimi.FLOPsPerFrame), and the LM's
	// and the whole step's rates by them.
	LMGFLOPPerStep    float64 `json:"lm_gflop_per_step"`
	CodecGFLOPPerStep float64 `json:"codec_gflop_per_step"`
	LMGFLOPs          float64 `json:"lm_gflops"`
	FrameGFLOPs       float64 `json:"frame_gflops"`
	KVBytesPerFrame   int64   `json:"kv_bytes_per_frame"`  // keys and values attended (float32, or bf16 with KVDType bf16)
	MemoryBoundGBps   float64 `json:"weights_and_kv_gbps"` // (weights + KV) / LM time
	AchievedGBps      float64 `json:"achieved_gbps"`
	MemoryGBps        float64 `json:"memory_gbps"`
	RooflineFraction  float64 `json:"roofline_fraction"` // achieved / memory: 0 when the LM ran on a GPU (the host's bandwidth does not bound it)
	LoadSeconds       float64 `json:"load_seconds"`
	GoArch            string  `json:"goarch"`
	NumCPU            int     `json:"num_cpu"`
	KernelPath        string  `json:"kernel"`
	ComputeDType      string  `json:"compute_dtype"`
	KVDType           string  `json:"kv_dtype"` // what the LM's KV cache stores: f32 or bf16
	Device            string  `json:"device,omitempty"`
	// The offload plan's prediction (--cpu-offload on a GPU) and the device
	// memory the backend held at most.
	PlanFrameMs     float64 `json:"plan_frame_ms,omitempty"`
	PlanSummary     string  `json:"plan,omitempty"`
	DevicePeakBytes int64   `json:"device_peak_bytes,omitempty"`
	DeviceLimit     int64   `json:"device_limit_bytes,omitempty"`
	StreamedBytes   int64   `json:"streamed_bytes,omitempty"`
}

// Bench runs the full frame loop (Mimi encode → LMGen step → Mimi decode)
// on random or real weights and measures it. The LM's KV cache is sized to
// the frames run (a 3000-step float32 cache at 7B is 3 GB); attention
// semantics are unchanged since no position falls out of the context.
func Bench(o BenchOptions) (res *BenchResult, err error) {
	defer deviceFailure(&err)
	return bench(o)
}

func bench(o BenchOptions) (*BenchResult, error) {
	if o.Log == nil {
		o.Log = nopLog{}
	}
	if o.Frames <= 0 {
		o.Frames = 20
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	// The codec codes a chunk of frames at a time (Session): the warm-up
	// and the measured frames are whole chunks.
	chunk := CodecFrames(max(1, o.BatchSize))
	if w, f := roundUp(o.Warmup, chunk), roundUp(o.Frames, chunk); w != o.Warmup || f != o.Frames {
		o.Log.Infof("the codec codes %d frames at a time at this batch size: %d warm-up and %d measured frames", chunk, w, f)
		o.Warmup, o.Frames = w, f
	}
	cfg := *o.Config
	lmCfg := cfg.LM
	lmCfg.Context = min(lmCfg.Context, o.KVFill+o.Warmup+o.Frames+16)
	res := &BenchResult{Frames: o.Frames, GoArch: runtime.GOARCH, NumCPU: runtime.NumCPU()}

	B := max(1, o.BatchSize)
	mem := o.MemoryBytes
	if mem <= 0 {
		mem = 1 << 30
	}
	if err := benchMemory(o, &cfg, &lmCfg, B, mem); err != nil {
		return nil, err
	}

	bc := cfg
	bc.LM = lmCfg
	d, err := OpenDevice(o.Device, JobShape{Config: &bc, BatchSize: o.BatchSize, MoshiWeight: o.MoshiWeight, Quantize: o.Quantize}, o.Log)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if d.Kind == DeviceSim {
		return nil, fmt.Errorf("bench: --device sim is not timed (see pp-offline tune)")
	}
	e := d.CPU().Engine()
	res.Threads, res.KernelPath, res.ComputeDType = e.Threads(), e.KernelName(), e.ComputeDType()
	res.Device = d.Name()
	if p := d.Plan(); p != nil {
		res.PlanFrameMs, res.PlanSummary = p.Predict.FrameMs, p.Summary()
		o.Log.Infof("offload plan: %s", res.PlanSummary)
	}

	t0 := time.Now()
	model, codec, randoms, err := benchModels(o, &cfg, &lmCfg, d, res)
	if err != nil {
		return nil, err
	}
	defer closeAll(randoms)
	defer model.Close()
	defer codec.Close()
	res.LoadSeconds = time.Since(t0).Seconds()
	res.BatchSize = B
	w, err := d.Place(model, B)
	if err != nil {
		return nil, err
	}
	eng := lm.NewEngine(model, d.Backend(), w)
	eng.SetStageTiming(true) // on a GPU: the temporal transformer's device time, not its queueing
	sess := NewSession(eng, codec)
	frame := codec.FrameSize()
	gens := make([]*lm.Gen, B)
	for i := range gens {
		gens[i] = eng.NewGen(lm.GenOptions{FrameRate: cfg.Mimi.FrameRate})
		gens[i].StepSilence() // a prompt phase first, so every measured step returns a frame
		if o.KVFill > 0 {
			model.Transformer.FillSynthetic(d.Backend(), gens[i].TransformerState(), o.KVFill)
		}
		hz := 220 * (1 + 0.1*float64(i)) // a different tone per conversation
		sess.Join(&Conversation{Gen: gens[i], Audio: func(f int, pcm []float32) {
			for k := range pcm {
				pcm[k] = float32(0.3 * math.Sin(float64(f*frame+k)*2*math.Pi*hz/float64(cfg.Mimi.SampleRate)))
			}
		}})
	}
	var tEnc, tLM, tTemp, tDep, tDec []float64
	var bytesPerFrame []int64
	depSteps := 0
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	for f := 0; f < o.Warmup+o.Frames; f++ {
		_, st, err := sess.Step()
		if err != nil {
			return nil, err
		}
		if f < o.Warmup || st.Outputs < B {
			continue
		}
		gs := gens[0].Stats()
		tEnc = append(tEnc, ms(st.Encode))
		tLM = append(tLM, ms(st.LM))
		tTemp = append(tTemp, ms(gs.TemporalTime))
		tDep = append(tDep, ms(gs.HeadsTime))
		tDec = append(tDec, ms(st.Decode))
		bytesPerFrame = append(bytesPerFrame, gs.WeightBytes)
		depSteps = gs.DepSteps
		o.Log.Infof("step %d (%d conversations): encode %.1f ms, LM %.1f ms, decode %.1f ms", f, B, ms(st.Encode), ms(st.LM), ms(st.Decode))
	}
	gen := gens[0]
	for _, g := range gens {
		res.KVBytesHeld += g.TransformerState().Bytes()
	}
	if len(tLM) == 0 {
		return nil, fmt.Errorf("no frame measured (frames %d, warmup %d)", o.Frames, o.Warmup)
	}
	res.Frames = len(tLM)
	if g := d.GPU(); g != nil {
		_, res.DevicePeakBytes, res.DeviceLimit = g.Memory()
	}
	if p := d.Plan(); p != nil {
		// The offload runtime copies every streamed unit once per pass.
		for i, u := range p.Units() {
			if p.Where[i] == offload.Streamed {
				res.StreamedBytes += u.Bytes * int64(o.Warmup+o.Frames)
			}
		}
	}
	res.KVPositions = min(gen.TransformerState().Offset, lmCfg.Context)
	res.LMMsPerFrame = median(tLM)
	res.TemporalMsPerFrame = median(tTemp)
	res.DepformerMsPerFrame = median(tDep)
	res.DepformerSteps = depSteps
	res.CodecEncodeMsPerFrame = chunkMedian(tEnc, chunk)
	res.CodecDecodeMsPerFrame = chunkMedian(tDec, chunk)
	res.CodecFramesPerCall = chunk
	res.TotalMsPerFrame = res.LMMsPerFrame + res.CodecEncodeMsPerFrame + res.CodecDecodeMsPerFrame
	res.RealTimeFactor = res.TotalMsPerFrame / (1000 / cfg.Mimi.FrameRate)
	res.LMMsPerStep, res.FrameMsPerStep = res.LMMsPerFrame, res.TotalMsPerFrame
	res.CodecMsPerStep = res.CodecEncodeMsPerFrame + res.CodecDecodeMsPerFrame
	res.LMFramesPerSecond = float64(B) * 1000 / res.LMMsPerStep
	res.FramesPerSecond = float64(B) * 1000 / res.FrameMsPerStep
	res.PeakRSSBytes = peakRSS()
	res.WeightBytesPerFrame = bytesPerFrame[len(bytesPerFrame)-1]
	res.AchievedGBps = float64(res.WeightBytesPerFrame) / (res.LMMsPerFrame * 1e6)
	res.LMGFLOPPerStep = float64(B) * model.FLOPsPerFrame(depSteps) / 1e9
	codecFLOP, err := mimi.FLOPsPerFrame(cfg.Mimi)
	if err != nil {
		return nil, err
	}
	res.CodecGFLOPPerStep = float64(B) * codecFLOP / 1e9
	res.LMGFLOPs = res.LMGFLOPPerStep / (res.LMMsPerStep / 1e3)
	res.FrameGFLOPs = (res.LMGFLOPPerStep + res.CodecGFLOPPerStep) / (res.FrameMsPerStep / 1e3)
	elem := int64(4)
	res.KVDType = "f32"
	if r := gen.TransformerState().Rings; len(r) > 0 && r[0].ElemBytes == 2 {
		elem, res.KVDType = 2, "bf16"
	}
	res.KVBytesPerFrame = int64(B) * int64(res.KVPositions) * int64(lmCfg.Dim) * 2 * elem * int64(lmCfg.NumLayers)
	res.MemoryBoundGBps = float64(res.WeightBytesPerFrame+res.KVBytesPerFrame) / (res.LMMsPerFrame * 1e6)
	o.Log.Infof("measuring memory read bandwidth over %d MiB", mem>>20)
	res.MemoryGBps = e.MeasureReadBandwidth(mem)
	if res.MemoryGBps > 0 && d.Kind == DeviceCPU {
		// The host's bandwidth bounds the LM on the CPU only (on a GPU
		// it read "484 % of the roofline").
		res.RooflineFraction = res.AchievedGBps / res.MemoryGBps
	}
	return res, nil
}

// benchModels loads bench's models, from files or random at the config's
// shape, on the device (res.Weights says which). Closing the models releases
// the files; closeAll(randoms) releases the random weights' memory after them.
func benchModels(o BenchOptions, cfg *config.Config, lmCfg *config.LM, d *Device, res *BenchResult) (model *lm.Model, codec *mimi.Model, randoms []*weights.File, err error) {
	fail := func(err error) (*lm.Model, *mimi.Model, []*weights.File, error) {
		if model != nil {
			model.Close()
		}
		closeAll(randoms)
		return nil, nil, nil, err
	}
	// random weights are held like a mapped checkpoint (RandomMapped).
	random := func(specs []weights.Spec, seed uint64) *weights.File {
		f := weights.RandomMapped(specs, seed)
		randoms = append(randoms, f)
		return f
	}
	if o.MoshiWeight != "" {
		model, err = lm.Open(lmCfg, o.MoshiWeight)
		res.Weights = o.MoshiWeight
	} else {
		o.Log.Infof("building random bf16 LM weights (dim %d, %d layers)", lmCfg.Dim, lmCfg.NumLayers)
		model, err = lm.Load(lmCfg, random(lm.WeightSpecs(lmCfg, weights.BF16), 1))
		res.Weights = "random"
	}
	if err != nil {
		return fail(err)
	}
	if err := quantizeAtLoad(o.Log, model, o.Quantize, d.Host()); err != nil {
		return fail(err)
	}
	if o.Quantize != "" {
		res.Weights += " (" + o.Quantize + " at load)"
	}
	if o.MimiWeight != "" {
		codec, err = mimi.Open(cfg.Mimi, o.MimiWeight, d.CodecBackend(), d.Host())
		res.Weights += " + " + o.MimiWeight
	} else {
		var specs []weights.Spec
		if specs, err = mimi.WeightSpecs(cfg.Mimi); err == nil {
			codec, err = mimi.Load(cfg.Mimi, random(specs, 2), d.CodecBackend(), d.Host())
		}
	}
	if err != nil {
		return fail(err)
	}
	return model, codec, randoms, nil
}

// closeAll closes files (nil ones too).
func closeAll(files []*weights.File) {
	for _, f := range files {
		f.Close()
	}
}

// benchMemory checks the memory a bench run needs before anything loads:
// random weights are new RAM, files are mapped, the bandwidth buffer mem.
func benchMemory(o BenchOptions, cfg *config.Config, lmCfg *config.LM, B, mem int) error {
	est := EstimateMemory(cfg, B, o.KVFill+o.Warmup+o.Frames+16, B*16, o.Device.KVElemBytes())
	est.Other = int64(mem)
	specs := lm.WeightSpecs(lmCfg, weights.BF16)
	if o.MoshiWeight == "" {
		for _, s := range specs {
			est.Other += specBytes(s)
		}
	} else {
		est.Mapped += fileSize(o.MoshiWeight)
		specs = checkpointSpecs(o.MoshiWeight)
	}
	blocks, _ := quantSizes(o.Quantize, specs) // --weights: the blocks are new RAM
	est.Other += blocks
	if o.MimiWeight == "" {
		if specs, err := mimi.WeightSpecs(cfg.Mimi); err == nil {
			for _, s := range specs {
				est.Other += specBytes(s)
			}
		}
	} else {
		est.Mapped += fileSize(o.MimiWeight)
	}
	return checkMemory(est, o.Log, "use a smaller --memory-mib, --batch-size or --frames, or a smaller --config")

}

// roundUp is n rounded up to a multiple of k.
func roundUp(n, k int) int { return (n + k - 1) / k * k }

// chunkMedian is the median over x's windows of k steps of their mean: a
// codec chunk's time spread over its frames (the median of x when k = 1).
func chunkMedian(x []float64, k int) float64 {
	var w []float64
	for i := 0; i+k <= len(x); i += k {
		sum := 0.0
		for _, v := range x[i : i+k] {
			sum += v
		}
		w = append(w, sum/float64(k))
	}
	if len(w) == 0 {
		return median(x)
	}
	return median(w)
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func specBytes(s weights.Spec) int64 {
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n
}

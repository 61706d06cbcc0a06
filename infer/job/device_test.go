package job

import (
	"context"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cuda"
	"github.com/pp-offline/pp-offline/infer/config"
)

// The size check of a fully resident GPU job: the 7B's weights and KV
// cache do not fit an 8 GiB budget, and the message says what to do; they
// fit an H200.
func TestFits(t *testing.T) {
	cfg, err := config.Load("../../testdata/personaplex-7b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	const weights7B = 16_700_000_000
	f := FitsFor(cfg, weights7B, 1, 8<<30)
	msg := f.Error()
	if msg == "" || !strings.Contains(msg, "--cpu-offload") || !strings.Contains(msg, "8.00 GiB") {
		t.Fatalf("7B in 8 GiB: %q", msg)
	}
	if msg := FitsFor(cfg, weights7B, 1, 131<<30).Error(); msg != "" {
		t.Fatalf("7B on an H200: %q", msg)
	}
	// The KV cache grows with the batch.
	if a, b := FitsFor(cfg, weights7B, 1, 0).KV, FitsFor(cfg, weights7B, 8, 0).KV; b != 8*a {
		t.Fatalf("KV at B=8: %d, at B=1: %d", b, a)
	}
}

// withDryGPU makes Device "cuda" use the CUDA backend's dry driver (no
// GPU): a device of mem bytes.
func withDryGPU(t *testing.T, mem int64) {
	newGPU = func(o cuda.Options) (*cuda.CUDA, error) {
		limit := o.Memory
		if limit <= 0 {
			limit = mem
		}
		g, _, err := cuda.NewDry(o, limit)
		return g, err
	}
	gpuFreeMemory = func() (int64, error) { return mem, nil }
	gpuAvailable = func() error { return nil }
	t.Cleanup(func() { newGPU, gpuFreeMemory, gpuAvailable = cuda.New, cuda.FreeMemory, cuda.Available })
}

// The job and bench paths of Device "cuda" on the dry driver: the size
// check refuses a model that does not fit with its one-line message;
// --cpu-offload plans for the budget and runs; bench reports the plan and
// the device's memory.
func TestCUDAJobPathsDry(t *testing.T) {
	cfg, err := config.Load("../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	tiny := "../../testdata/tiny/"
	o := Options{Config: cfg, Device: DeviceOptions{Name: "cuda"}, MoshiWeight: tiny + "model.safetensors", MimiWeight: tiny + "mimi.safetensors",
		Tokenizer: tiny + "tokenizer.model", Greedy: true}
	item := &Item{InputWAV: tiny + "input.wav", VoicePrompt: tiny + "voices/TINYF0.pt", Greedy: true}
	run := func(o Options) (int, error) {
		n := 0
		err := RunItems(context.Background(), o, Items(item), func(r ItemResult) {
			if r.Err != nil {
				t.Errorf("item: %v", r.Err)
			}
			n++
		})
		return n, err
	}

	withDryGPU(t, 16<<20) // 16 MiB: the tiny model and its workspace do not fit
	if _, err := run(o); err == nil || !strings.Contains(err.Error(), "--cpu-offload") {
		t.Fatalf("a model larger than the device: %v", err)
	}
	// --weights q8_0 is sized as its blocks: a device between the bf16
	// and the q8_0 need refuses the one and runs the other.
	q8 := o
	q8.Quantize = "q8_0"
	files := fileSize(o.MoshiWeight) + fileSize(o.MimiWeight)
	specs := checkpointSpecs(o.MoshiWeight)
	blocks, saved := quantSizes("q8_0", specs)
	if b, s := quantSizes("", specs); saved <= 0 || blocks <= 0 || b != 0 || s != 0 {
		t.Fatalf("q8_0: %d bytes of blocks save %d; without --weights %d, %d", blocks, saved, b, s)
	}
	between := FitsFor(cfg, files-saved/2, 1, 0).Need()
	withDryGPU(t, between)
	if _, err := run(o); err == nil || !strings.Contains(err.Error(), "--cpu-offload") {
		t.Fatalf("bf16 on a device of %d bytes: %v", between, err)
	}
	if n, err := run(q8); err != nil || n != 1 {
		t.Fatalf("--weights q8_0 on a device of %d bytes: %d items, %v", between, n, err)
	}
	withDryGPU(t, 1<<30)
	if n, err := run(o); err != nil || n != 1 {
		t.Fatalf("resident: %d items, %v", n, err)
	}
	// bf16 KV rings are the CPU backend's: asked for on the GPU, the job
	// stops with one line before loading anything.
	kv := o
	kv.Device.KVDType = "bf16"
	if n, err := run(kv); err == nil || n != 0 || !strings.Contains(err.Error(), "--kv-dtype bf16 is for the CPU backend") {
		t.Fatalf("--kv-dtype bf16 on the GPU: %d items, %v", n, err)
	}
	off := o
	off.Device = DeviceOptions{Name: "cuda", CPUOffload: true, Offload: OffloadOptions{Memory: 64 << 20}}
	if n, err := run(off); err != nil || n != 1 {
		t.Fatalf("--cpu-offload: %d items, %v", n, err)
	}

	// Quantized weights through the GPU's offload plan, sized before
	// loading: quantized at load, and a file from QuantizeFile (whose
	// header gives the units' formats).
	qfile := t.TempDir() + "/q4_k.safetensors"
	if _, err := QuantizeFile(QuantizeOptions{MoshiWeight: tiny + "model.safetensors", Output: qfile, Format: "q4_k"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ weights, file string }{{"q8_0", o.MoshiWeight}, {"q4_k", o.MoshiWeight}, {"", qfile}} {
		qo := off
		qo.Quantize, qo.MoshiWeight = q.weights, q.file
		if st := storedDTypes(qo.Device, JobShape{MoshiWeight: qo.MoshiWeight, Quantize: qo.Quantize}, nil); st == nil || st("transformer.layers.0.self_attn.in_proj_weight") == "" {
			t.Fatalf("%s %s: the plan would size the units as bf16", q.weights, q.file)
		}
		if n, err := run(qo); err != nil || n != 1 {
			t.Fatalf("--cpu-offload, %s %s: %d items, %v", q.weights, q.file, n, err)
		}
	}
	if storedDTypes(o.Device, JobShape{MoshiWeight: o.MoshiWeight, Quantize: o.Quantize}, nil) != nil {
		t.Fatal("a bf16 checkpoint sized as blocks")
	}
	if _, err := Bench(BenchOptions{Config: cfg, Frames: 2, Warmup: 1, MemoryBytes: 1 << 20, Quantize: "q8_0", Device: DeviceOptions{Name: "cuda", CPUOffload: true, Offload: OffloadOptions{Memory: 64 << 20}}}); err != nil {
		t.Fatalf("bench --weights q8_0 --cpu-offload: %v", err)
	}

	r, err := Bench(BenchOptions{Config: cfg, Frames: 2, Warmup: 1, MemoryBytes: 1 << 20, Device: DeviceOptions{Name: "cuda", CPUOffload: true, Offload: OffloadOptions{Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.PlanSummary == "" || r.DeviceLimit != 64<<20 || r.DevicePeakBytes == 0 || !strings.HasPrefix(r.Device, "cuda (dry run") {
		t.Fatalf("bench on the dry device: plan %q, limit %d, peak %d, device %q", r.PlanSummary, r.DeviceLimit, r.DevicePeakBytes, r.Device)
	}
	// The host's bandwidth is measured but is no roofline for an LM on
	// the device.
	if r.MemoryGBps <= 0 || r.RooflineFraction != 0 {
		t.Fatalf("bench on the dry device: memory %v GB/s, roofline fraction %v (want 0)", r.MemoryGBps, r.RooflineFraction)
	}
}

// The prompt cache's states live in device memory on a GPU: the size check
// counts them. A device with room for the job but not for its cache
// refuses a batch that would keep states, naming --prompt-cache, and runs
// it with the cache off; a job of one item keeps no state and runs.
func TestCUDAPromptCacheFitsDry(t *testing.T) {
	cfg, err := config.Load("../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	tiny := "../../testdata/tiny/"
	o := Options{Config: cfg, Device: DeviceOptions{Name: "cuda"}, MoshiWeight: tiny + "model.safetensors", MimiWeight: tiny + "mimi.safetensors",
		Tokenizer: tiny + "tokenizer.model", Greedy: true, BatchSize: 2}
	items := func(n int) []*Item {
		var its []*Item
		for range n {
			its = append(its, &Item{InputWAV: tiny + "input.wav", VoicePrompt: tiny + "voices/TINYF0.pt", Greedy: true})
		}
		return its
	}
	run := func(o Options, n int) (int, error) {
		done := 0
		err := RunItems(context.Background(), o, Items(items(n)...), func(r ItemResult) {
			if r.Err != nil {
				t.Errorf("item: %v", r.Err)
			}
			done++
		})
		return done, err
	}
	f := FitsFor(cfg, fileSize(o.MoshiWeight)+fileSize(o.MimiWeight), o.BatchSize, 0)
	states := openPromptCache(o).estimate(cfg, 0, 4)
	if states <= 0 {
		t.Fatalf("prompt cache estimate %d", states)
	}
	withDryGPU(t, f.Need()+states/2)
	_, err = run(o, 3)
	if err == nil || !strings.Contains(err.Error(), "prompt cache") || !strings.Contains(err.Error(), "--prompt-cache") {
		t.Fatalf("a cache that does not fit beside the job: %v", err)
	}
	off := o
	off.PromptCache = -1
	if n, err := run(off, 3); err != nil || n != 3 {
		t.Fatalf("--prompt-cache 0: %d items, %v", n, err)
	}
	if n, err := run(o, 1); err != nil || n != 1 {
		t.Fatalf("one item (no state kept): %d items, %v", n, err)
	}
	withDryGPU(t, f.Need()+4*states)
	if n, err := run(o, 3); err != nil || n != 3 {
		t.Fatalf("a device with room for the cache: %d items, %v", n, err)
	}
	// --cpu-offload plans for the budget less the cache's states.
	offl := o
	offl.Device = DeviceOptions{Name: "cuda", CPUOffload: true, Offload: OffloadOptions{Memory: states / 2}}
	if _, err := run(offl, 3); err == nil || !strings.Contains(err.Error(), "--prompt-cache") {
		t.Fatalf("--cpu-offload with a budget under the cache's states: %v", err)
	}
	offl.Device.Offload.Memory = 64 << 20
	if n, err := run(offl, 3); err != nil || n != 3 {
		t.Fatalf("--cpu-offload: %d items, %v", n, err)
	}
}

// --cpu-offload plans the LM in what the device budget leaves beside the
// backend's fixed buffers (the upload arena, the codec's transformers, the
// prompt cache): a budget they fill is refused before anything loads, in
// one line naming them; one a little larger runs (on the dry driver).
func TestCPUOffloadBudgetLeavesFixedBuffers(t *testing.T) {
	cfg, err := config.Load("../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	tiny := "../../testdata/tiny/"
	o := Options{Config: cfg, MoshiWeight: tiny + "model.safetensors", MimiWeight: tiny + "mimi.safetensors",
		Tokenizer: tiny + "tokenizer.model", Greedy: true, BatchSize: 1, PromptCache: -1}
	run := func(mem int64) error {
		withDryGPU(t, mem)
		o.Device = DeviceOptions{Name: "cuda", CPUOffload: true, Offload: OffloadOptions{Memory: mem}}
		var itemErr error
		err := RunItems(context.Background(), o, Items(&Item{InputWAV: tiny + "input.wav", VoicePrompt: tiny + "voices/TINYF0.pt", Greedy: true}),
			func(r ItemResult) { itemErr = r.Err })
		if err == nil {
			err = itemErr
		}
		return err
	}
	err = run(cuda.ArenaBytes)
	if err == nil || !strings.Contains(err.Error(), "--gpu-memory 8.00 MiB leaves no room") || !strings.Contains(err.Error(), "upload arena") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a budget the arena fills: %v", err)
	}
	if err := run(cuda.ArenaBytes + 1<<20); err != nil {
		t.Fatalf("a budget with room beside the arena: %v", err)
	}
}

// --kv-dtype bf16 gives the LM's backend bf16 rings and leaves the codec's
// float32 (its transformers stay exact), on one engine.
func TestKVDTypeRingsOnTheCPU(t *testing.T) {
	for _, kv := range []string{"", "f32", "bf16"} {
		d, err := OpenDevice(DeviceOptions{Name: "cpu", Threads: 1, KVDType: kv}, JobShape{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lmRing, codecRing := d.Backend().NewRing(2, 32, 4), d.CodecBackend().NewRing(2, 32, 4)
		wantLM := int64(2 * 4 * 2 * 32 * 4)
		if kv == "bf16" {
			wantLM /= 2
		}
		if lmRing.Bytes() != wantLM || codecRing.Bytes() != 2*4*2*32*4 {
			t.Errorf("--kv-dtype %q: the LM's ring holds %d bytes (want %d), the codec's %d", kv, lmRing.Bytes(), wantLM, codecRing.Bytes())
		}
		d.Close()
	}
	if err := CheckDeviceOptions(DeviceOptions{KVDType: "int8"}); err == nil || !strings.Contains(err.Error(), "--kv-dtype") {
		t.Fatalf("--kv-dtype int8: %v", err)
	}
}

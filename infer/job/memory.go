package job

import (
	"fmt"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/internal/sysmem"
	"github.com/pp-offline/pp-offline/offload"
)

// Estimate is the memory a job will allocate (beyond the memory-mapped
// checkpoints, which the kernel pages in and out and which are reported
// apart), known before anything is loaded.
type Estimate struct {
	Batch       int
	Positions   int   // KV positions of the longest conversation (≤ context)
	KV          int64 // the LM's KV rings, every conversation
	Activations int64 // one pass: the prefill rows of a batch and its step rows
	Codec       int64 // Mimi's streaming state, every conversation
	Other       int64 // random weights (bench), measurement buffers
	Mapped      int64 // memory-mapped weights (page cache, not counted in Total)
}

// Total is what the job allocates.
func (e Estimate) Total() int64 { return e.KV + e.Activations + e.Codec + e.Other }

// EstimateMemory is the memory of batch conversations of at most positions
// LM positions each (prompt phases and frames) with prefill rows in one
// pass, on the model of cfg, the LM's KV cache storing kvElem bytes an
// element (4: float32; 2: --kv-dtype bf16; DeviceOptions.KVElemBytes).
func EstimateMemory(cfg *config.Config, batch, positions, prefill, kvElem int) Estimate {
	l := &cfg.LM
	positions = min(positions, l.Context)
	e := Estimate{Batch: batch, Positions: positions}
	e.KV = int64(batch) * 2 * int64(l.NumLayers) * int64(positions) * int64(l.Dim) * int64(kvElem)
	hidden := int64(config.GatingHidden(l.Dim, l.DimFeedforward()))
	perRow := (7*int64(l.Dim) + 2*hidden) * 4 // x, queue, qkv, att, o, norm; the gated hidden
	rows := int64(prefill + batch)
	e.Activations = rows*perRow + int64(batch)*int64(l.TextCard+l.Card+2*l.DepformerDim)*4
	// Mimi: the encoder and decoder transformers' rings (context positions
	// of d_model keys and values per layer) and the convolutions' buffers,
	// for the frames a call of the session's codec (CodecFrames).
	if m := cfg.Mimi; m != nil {
		t := &m.Transformer
		ring := 2 * 2 * int64(t.NumLayers) * int64(t.Context) * int64(t.DModel) * 4
		conv, err := mimi.StreamBytes(m, CodecFrames(batch))
		if err != nil { // not a loadable codec: its load says why
			conv = 0
		}
		e.Codec = int64(batch) * (ring + conv)
	}
	return e
}

func (e Estimate) String() string {
	return fmt.Sprintf("%s (KV cache %s for %d conversation(s) of up to %d positions, activations %s, codec %s, other %s; plus %s of memory-mapped weights)",
		offload.FormatSize(e.Total()), offload.FormatSize(e.KV), e.Batch, e.Positions, offload.FormatSize(e.Activations),
		offload.FormatSize(e.Codec), offload.FormatSize(e.Other), offload.FormatSize(e.Mapped))
}

// checkMemory refuses a job whose estimate exceeds the memory available to
// the process (the machine's, or its cgroup's limit), with the numbers and
// what to do instead, rather than let it be killed half way.
func checkMemory(e Estimate, log Logger, advice string) error {
	m := sysmem.Read()
	if !m.OK {
		return nil
	}
	avail, source := m.Bytes, m.Source
	if e.Total() > avail {
		return fmt.Errorf("not enough memory: this job needs about %s, %s leaves %s; %s", e, source, offload.FormatSize(avail), advice)
	}
	if m.AddressSpaceLimited() && e.Total()+e.Mapped > avail {
		// Under ulimit -v a mapping takes address space it cannot page out.
		return fmt.Errorf("not enough address space: this job needs about %s plus its mapped files, %s leaves %s; %s", e, source, offload.FormatSize(avail), advice)
	}
	if e.Total()+e.Mapped > avail {
		log.Infof("memory: %s; %s leaves %s: the weights will be paged from disk (slower)", e, source, offload.FormatSize(avail))
	}
	return nil
}

// inputLimits bounds what one item's audio may decode to, before it is
// decoded: a quarter of the memory the process can still take (the rest is
// the models' and the KV cache's), shared by the B items in flight, at most
// audio.DefaultMaxSamples. audio.LoadMonoLimits holds at most 8 bytes per
// allowed sample while decoding and resampling.
func inputLimits(B int) audio.Limits {
	m := sysmem.Read()
	if !m.OK {
		return audio.Limits{}
	}
	n := m.Bytes / 4 / 8 / int64(max(1, B))
	return audio.Limits{MaxSamples: min(max(n, 1<<20), audio.DefaultMaxSamples)}
}

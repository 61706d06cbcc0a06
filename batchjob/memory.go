package batchjob

import (
	"fmt"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/internal/sysmem"
)

// Memory is what the host lets this process use.
type Memory struct {
	Bytes  int64  // usable now
	Source string // how it was found, for the log
}

// HostMemory reads the memory this process may use (see sysmem.Available:
// MemAvailable, lowered to the cgroup's limit less its usage). 0 when
// nothing can be read.
func HostMemory() Memory {
	n, source, ok := sysmem.Available()
	if !ok {
		return Memory{}
	}
	return Memory{n, fmt.Sprintf("%s free (%s)", gib(n), source)}
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// ConversationBytes is the memory one more conversation in the batch
// costs at most: infer's estimate for one conversation at the full context
// (rings grow to it on long inputs) with a prompt prefill of 256 rows, its
// KV cache of kvElem bytes an element (job.DeviceOptions.KVElemBytes).
func ConversationBytes(cfg *config.Config, kvElem int) int64 {
	return job.EstimateMemory(cfg, 1, cfg.LM.Context, 256, kvElem).Total()
}

// MaxBatch caps the chosen batch: beyond it a step is compute-bound on any
// CPU this runs on, so more conversations only add latency and memory.
const MaxBatch = 16

// ChooseBatch picks the batch size from the memory left once the weights
// (mapped, but resident while the job runs) and a reserve are set aside,
// capped at MaxBatch and at the items to run; why says how, in one line.
func ChooseBatch(mem Memory, weightBytes int64, cfg *config.Config, items, kvElem int) (b int, why string) {
	per := ConversationBytes(cfg, kvElem)
	const reserve = 1 << 30
	items = max(items, 1)
	if mem.Bytes <= 0 {
		b = min(4, items)
		return b, fmt.Sprintf("batch size %d: the free memory cannot be read here (%s per conversation); pass --batch-size", b, gib(per))
	}
	left := mem.Bytes - weightBytes - reserve
	fit := int(max(left/per, 1))
	b = min(fit, MaxBatch, items)
	limit := "what fits"
	switch b {
	case items:
		if items < min(fit, MaxBatch) {
			limit = "as many as the items to run"
		}
	case MaxBatch:
		if fit > MaxBatch {
			limit = fmt.Sprintf("the cap of %d", MaxBatch)
		}
	}
	if left < per {
		limit = "the minimum: even one conversation may not fit"
	}
	return b, fmt.Sprintf("batch size %d (%s): %s, less %s of weights and a 1 GiB reserve, at %s per conversation (KV cache at the full %d-step context + codec state) fits %d",
		b, limit, mem.Source, gib(weightBytes), gib(per), cfg.LM.Context, fit)
}

// MaxBatchFlag bounds --batch-size before it sizes anything (a batch's
// state is allocated per conversation); the memory estimate then says
// whether the batch fits.
const MaxBatchFlag = 4096

package batchjob

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pp-offline/pp-offline/infer/config"
)

// Memory is what the host lets this process use.
type Memory struct {
	Bytes  int64  // usable now
	Source string // how it was found, for the log
}

// HostMemory reads the memory this process may use: the host's available
// memory (/proc/meminfo MemAvailable), lowered to the cgroup's limit less
// its usage (v2 memory.max / memory.current, v1 memory.limit_in_bytes /
// memory.usage_in_bytes) when there is one. 0 when nothing can be read.
func HostMemory() Memory {
	var m Memory
	if kb := meminfo("MemAvailable"); kb > 0 {
		m = Memory{kb << 10, fmt.Sprintf("%s available (/proc/meminfo)", gib(kb<<10))}
	} else if kb := meminfo("MemTotal"); kb > 0 {
		m = Memory{kb << 10, fmt.Sprintf("%s physical (/proc/meminfo)", gib(kb<<10))}
	}
	for _, c := range []struct{ limit, usage string }{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		limit, ok := readInt(c.limit)
		if !ok || limit <= 0 || limit >= 1<<60 {
			continue
		}
		used, _ := readInt(c.usage)
		free := max(limit-used, 0)
		if m.Bytes == 0 || free < m.Bytes {
			m = Memory{free, fmt.Sprintf("%s free of the cgroup limit %s (%s)", gib(free), gib(limit), c.limit)}
		}
		break
	}
	return m
}

func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// ConversationBytes is the memory one more conversation in the batch
// costs at most: the LM's float32 KV rings at the full context (rings grow
// to it on long inputs), Mimi's encoder and decoder transformer caches, the
// depformer's, and activations and token caches (a fixed allowance).
func ConversationBytes(cfg *config.Config) int64 {
	l := &cfg.LM
	kv := int64(l.NumLayers) * int64(l.Context) * int64(l.Dim) * 2 * 4
	dep := int64(l.DepformerNumLayers) * int64(l.DepformerContext) * int64(l.DepformerDim) * 2 * 4
	mt := &cfg.Mimi.Transformer
	codec := 2 * int64(mt.NumLayers) * int64(mt.Context) * int64(mt.DModel) * 2 * 4
	acts := int64(64 << 20)
	return kv + dep + codec + acts
}

// MaxBatch caps the chosen batch: beyond it a step is compute-bound on any
// CPU this runs on, so more conversations only add latency and memory.
const MaxBatch = 16

// ChooseBatch picks the batch size from the memory left once the weights
// (mapped, but resident while the job runs) and a reserve are set aside,
// capped at MaxBatch and at the items to run; why says how, in one line.
func ChooseBatch(mem Memory, weightBytes int64, cfg *config.Config, items int) (b int, why string) {
	per := ConversationBytes(cfg)
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

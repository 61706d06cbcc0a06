package job

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"

	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/internal/sysmem"
)

// The prompt cache: within a job, the state the prompt phases leave (token
// cache, offset, KV rings: lm.Snapshot) is computed once per distinct
// prompt and restored into every conversation that starts from it. The
// usual overnight job is one persona over many recordings, and at B > 1 and
// short inputs the prompt phases are a large share of its work.
//
// What the state depends on is the key: the voice prompt's content (the
// saved embeddings and token cache of a .pt, or the decoded, normalised
// samples of a voice WAV, whose Mimi codes follow from them), the text
// prompt's token ids, the frame rate (the silences' length) and whether the
// phases run step by step. The model, its weights and the backend are the
// job's, one per cache. Sampling settings and the seed are not in it: the
// prompt phases force every stream and draw nothing from the generator
// (lm.Snapshot), which stays each conversation's own.

// DefaultPromptCache is the prompt cache's default number of entries.
const DefaultPromptCache = 4

// promptKey identifies the state the prompt phases leave.
type promptKey [sha256.Size]byte

// promptKeyOf is the key of an item's prompt phases.
func promptKeyOf(in *inputs, stepwise bool, frameRate float64) promptKey {
	h := sha256.New()
	w := keyWriter{h: h}
	w.u64(math.Float64bits(frameRate))
	if stepwise {
		w.u64(1)
	} else {
		w.u64(0)
	}
	switch {
	case in.sys.VoiceEmbeddings != nil:
		w.u64('e')
		w.u64(uint64(len(in.sys.VoiceEmbeddings)))
		for _, e := range in.sys.VoiceEmbeddings {
			w.floats(e)
		}
		w.u64(uint64(len(in.sys.VoiceCache)))
		for _, row := range in.sys.VoiceCache {
			w.u64(uint64(len(row)))
			for _, v := range row {
				w.u64(uint64(v))
			}
		}
	case in.voiceAudio != nil:
		w.u64('a')
		w.floats(in.voiceAudio)
	default:
		w.u64('-')
	}
	w.u64(uint64(len(in.sys.TextIDs)))
	for _, id := range in.sys.TextIDs {
		w.u64(uint64(id))
	}
	var k promptKey
	h.Sum(k[:0])
	return k
}

// keyWriter feeds fixed-width little-endian values to a hash (lengths
// first, so that no two inputs hash the same stream).
type keyWriter struct {
	h   hash.Hash
	buf [8 << 10]byte
}

func (w *keyWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:8], v)
	w.h.Write(w.buf[:8])
}

func (w *keyWriter) floats(x []float32) {
	w.u64(uint64(len(x)))
	for len(x) > 0 {
		n := min(len(x), len(w.buf)/4)
		for i, v := range x[:n] {
			binary.LittleEndian.PutUint32(w.buf[4*i:], math.Float32bits(v))
		}
		w.h.Write(w.buf[:4*n])
		x = x[n:]
	}
}

// promptCache is a small LRU of post-prompt states, bounded in entries and
// in bytes (the snapshots' KV rings, which live in the backend's memory).
type promptCache struct {
	maxEntries int
	maxBytes   int64

	entries []promptEntry // least recently used first
	bytes   int64

	hits, misses, evictions int
	peakEntries             int
	peakBytes               int64
}

type promptEntry struct {
	key   promptKey
	snap  *lm.Snapshot
	bytes int64
}

// newPromptCache is a cache of at most entries snapshots and maxBytes.
func newPromptCache(entries int, maxBytes int64) *promptCache {
	return &promptCache{maxEntries: entries, maxBytes: maxBytes}
}

// get is the state of k (nil: not held), counted as a hit or a miss.
func (c *promptCache) get(k promptKey) *lm.Snapshot {
	for i, e := range c.entries {
		if e.key == k {
			c.hits++
			copy(c.entries[i:], c.entries[i+1:])
			c.entries[len(c.entries)-1] = e
			return e.snap
		}
	}
	c.misses++
	return nil
}

// put keeps snap (of bytes) under k, evicting the least recently used
// entries as the bounds need; false when snap alone is over the byte bound
// (nothing is kept, nothing evicted).
func (c *promptCache) put(k promptKey, snap *lm.Snapshot, bytes int64) bool {
	if c.maxEntries <= 0 || bytes > c.maxBytes {
		return false
	}
	for len(c.entries) > 0 && (len(c.entries) >= c.maxEntries || c.bytes+bytes > c.maxBytes) {
		c.bytes -= c.entries[0].bytes
		c.entries[0] = promptEntry{}
		c.entries = c.entries[1:]
		c.evictions++
	}
	c.entries = append(c.entries, promptEntry{key: k, snap: snap, bytes: bytes})
	c.bytes += bytes
	c.peakEntries = max(c.peakEntries, len(c.entries))
	c.peakBytes = max(c.peakBytes, c.bytes)
	return true
}

// String is the cache's log line.
func (c *promptCache) String() string {
	return fmt.Sprintf("prompt cache: %d entries, %s (peak %d, %s; bound %d entries, %s); %d conversations restored their prompt state from it, %d ran their prompt phases, %d entries evicted",
		len(c.entries), mib(c.bytes), c.peakEntries, mib(c.peakBytes), c.maxEntries, mib(c.maxBytes), c.hits, c.misses, c.evictions)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// promptCacheBytes is the cache's byte bound: room for entries states of
// prompt phases up to 511 positions (a 30 s voice prompt and a long text
// prompt: the rings of p ≥ 128 positions hold p + 1, of fewer 128; never
// more than the context) and their token caches, at most a sixteenth of
// the memory the process can take.
func promptCacheBytes(cfg *config.Config, entries int) int64 {
	l := &cfg.LM
	positions := int64(min(max(l.Context, 1), 512))
	b := int64(entries) * (2*4*int64(l.Dim)*int64(l.NumLayers)*positions + 4<<10)
	if m := sysmem.Read(); m.OK {
		b = min(b, m.Bytes/16)
	}
	return b
}

// estimate is the memory the cache will likely hold: full, with states of
// prompt phases of p positions (rings grown for them as nn grows them: 128
// slots, or p + 1 beyond; kvElem bytes an element), within its byte bound.
func (c *promptCache) estimate(cfg *config.Config, p, kvElem int) int64 {
	l := &cfg.LM
	slots := int64(min(max(l.Context, 1), max(128, p+1)))
	return min(c.maxBytes, int64(c.maxEntries)*(2*int64(kvElem)*int64(l.Dim)*int64(l.NumLayers)*slots+4<<10))
}

// openPromptCache is the job's prompt cache of o (nil: off).
func openPromptCache(o Options) *promptCache {
	n := o.PromptCache
	if n < 0 {
		return nil
	}
	if n == 0 {
		n = DefaultPromptCache
	}
	return newPromptCache(n, promptCacheBytes(o.Config, n))
}

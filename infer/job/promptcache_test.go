package job

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/prompts"
)

// logLines collects a job's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Infof(format string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, a...))
	l.mu.Unlock()
}

// cacheLine is the job's "prompt cache:" line ("" when none), and that it
// was logged at most once.
func (l *logLines) cacheLine(t *testing.T) string {
	t.Helper()
	var got []string
	for _, s := range l.lines {
		if strings.HasPrefix(s, "prompt cache: ") {
			got = append(got, s)
		}
	}
	if len(got) > 1 {
		t.Fatalf("the prompt cache logged %d times: %q", len(got), got)
	}
	if len(got) == 0 {
		return ""
	}
	return got[0]
}

var cacheCounts = regexp.MustCompile(`^prompt cache: (\d+) entries, [0-9.]+ MiB \(peak (\d+), .*\); (\d+) conversations restored their prompt state from it, (\d+) ran their prompt phases, (\d+) entries evicted$`)

// counts parses a cache line: entries, peak entries, hits, misses, evictions.
func counts(t *testing.T, line string) [5]int {
	t.Helper()
	m := cacheCounts.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("prompt cache line %q", line)
	}
	var c [5]int
	for i := range c {
		c[i], _ = strconv.Atoi(m[i+1])
	}
	return c
}

// sharedItems: one persona (voice, text prompt) over many inputs of
// different lengths, greedy and sampled (equal and different seeds), for
// a .pt and a WAV voice, with other prompts mixed in (misses between the
// hits). The order of keys: A A B A C B A B D B A (A = .pt + "Be brief.",
// B = WAV + "", C = .pt + other text, D = bf16 .pt + "Be brief.").
func sharedItems(t *testing.T) []*Item {
	dir := t.TempDir()
	full := tinyDir + "input.wav"
	short := writeInput(t, dir, 1920*9+700)
	mid := writeInput(t, dir, 1920*23)
	tiny2 := writeInput(t, dir, 1920*3)
	pt, pt16, wav := tinyDir+"voices/TINYF0.pt", tinyDir+"voices/TINYF0-bf16.pt", tinyDir+"voices/TINYF0.wav"
	sampled := func(seed int64) Item {
		return Item{TempAudio: 0.8, TempText: 0.7, TopKAudio: 250, TopKText: 25, Seed: seed}
	}
	greedy := Item{Greedy: true}
	var items []*Item
	add := func(base Item, in, voice, text string) {
		it := base
		it.InputWAV, it.VoicePrompt, it.TextPrompt = in, voice, text
		it.Tag = len(items)
		items = append(items, &it)
	}
	add(greedy, full, pt, "Be brief.")          // A
	add(sampled(7), short, pt, "Be brief.")     // A
	add(sampled(7), mid, wav, "")               // B
	add(sampled(7), mid, pt, "Be brief.")       // A, the same seed as item 1
	add(greedy, tiny2, pt, "You enjoy a chat.") // C
	add(sampled(3), full, wav, "")              // B
	add(sampled(42), mid, pt, "Be brief.")      // A
	add(greedy, short, wav, "")                 // B
	add(sampled(11), full, pt16, "Be brief.")   // D: other bytes, other key
	add(sampled(3), tiny2, wav, "")             // B, the same seed as item 5
	add(sampled(5), short, pt, "Be brief.")     // A
	return items
}

// Conversations that share their prompts give exactly (bit for bit) what
// each gives alone without the cache (its own prompt phases, queued into
// its first pass): .pt and WAV voices, greedy and sampled with equal and
// different seeds, at every batch size and with a cache too small to keep
// them all (evictions, misses between hits). The cache's log line counts
// what happened.
func TestSharedPromptsEqualUnshared(t *testing.T) {
	o := tinyOptions(t)
	items := sharedItems(t)
	alone := map[int]outcome{}
	unshared := o
	unshared.PromptCache = -1
	for _, it := range items {
		alone[it.Tag.(int)] = runBatch(t, unshared, []*Item{it})[it.Tag.(int)]
	}
	for k, s := range alone {
		if s.err != "" || len(s.pieces) == 0 {
			t.Fatalf("item %d failed alone: %s", k, s.err)
		}
	}
	// Keys in order: A A B A C B A B D B A.
	for _, tc := range []struct {
		name    string
		b, size int
		items   []*Item
		want    [5]int // entries, peak, hits, misses, evictions
	}{
		// Default size (4): A, B, C, D each run once (D, the last new
		// key, is still followed by an item: it is kept).
		{"B=1", 1, 0, items, [5]int{4, 4, 7, 4, 0}},
		{"B=3", 3, 0, items, [5]int{4, 4, 7, 4, 0}},
		{"B=8", 8, 0, items, [5]int{4, 4, 7, 4, 0}},
		{"B=16", 16, 0, items, [5]int{4, 4, 7, 4, 0}},
		// One entry: A A | B | A | C | B | A | B | D | B | A: 1 hit (the
		// second item); every other change of key evicts (but the last
		// item's: no item follows it, nothing is kept).
		{"one entry", 3, 1, items, [5]int{1, 1, 1, 10, 8}},
		// Two entries, LRU: A A B A (hit) C (evicts B) B (evicts A) A
		// (evicts C) B (hit) D (evicts A) B (hit) A (evicts D; the last:
		// not kept).
		{"two entries", 2, 2, items, [5]int{2, 2, 4, 7, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob := o
			ob.BatchSize, ob.PromptCache = tc.b, tc.size
			log := &logLines{}
			ob.Log = log
			got := runBatch(t, ob, tc.items)
			for k, want := range alone {
				g := got[k]
				if g.err != "" {
					t.Fatalf("item %d: %s", k, g.err)
				}
				if !slices.Equal(g.pieces, want.pieces) {
					t.Fatalf("item %d: transcript differs from its unshared run", k)
				}
				if !slices.Equal(g.pcm, want.pcm) {
					t.Fatalf("item %d: audio differs from its unshared run", k)
				}
			}
			if c := counts(t, log.cacheLine(t)); c != tc.want {
				t.Fatalf("cache counts %v, want %v (%s)", c, tc.want, log.cacheLine(t))
			}
		})
	}
}

// A job of one item keeps nothing and says nothing about the cache (its
// prompt phases stay queued into its first pass, as without one); a job
// with the cache off logs no cache line either.
func TestPromptCacheOneItem(t *testing.T) {
	o := tinyOptions(t)
	items := sharedItems(t)
	for _, size := range []int{0, -1} {
		ob := o
		ob.PromptCache = size
		log := &logLines{}
		ob.Log = log
		runBatch(t, ob, items[:1])
		if l := log.cacheLine(t); l != "" {
			t.Fatalf("size %d: %q", size, l)
		}
	}
	ob := o
	ob.PromptCache = -1
	ob.BatchSize = 4
	log := &logLines{}
	ob.Log = log
	runBatch(t, ob, items)
	if l := log.cacheLine(t); l != "" {
		t.Fatalf("cache off: %q", l)
	}
}

// The key is the prompt's content: equal for the same voice read twice,
// different for another voice, another format of the same voice (bf16 vs
// f32 .pt: other values), another text prompt, the frame rate and
// stepwise phases; the sampling settings are not in it.
func TestPromptKey(t *testing.T) {
	o := tinyOptions(t)
	lim := inputLimits(1)
	tok := loadTokenizer(t, o)
	read := func(voice, text string, seed int64) *inputs {
		in, err := prepare(t.Context(), &Item{InputWAV: tinyDir + "input.wav", VoicePrompt: voice, TextPrompt: text, Seed: seed}, o.Config, tok, o.Tokenizer, lim)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	pt, pt16, wav := tinyDir+"voices/TINYF0.pt", tinyDir+"voices/TINYF0-bf16.pt", tinyDir+"voices/TINYF0.wav"
	a := promptKeyOf(read(pt, "Be brief.", 1), false, 12.5)
	if b := promptKeyOf(read(pt, "Be brief.", 99), false, 12.5); a != b {
		t.Fatal("the same prompts with another seed: another key")
	}
	others := map[string]promptKey{
		"bf16 .pt":     promptKeyOf(read(pt16, "Be brief.", 1), false, 12.5),
		"WAV voice":    promptKeyOf(read(wav, "Be brief.", 1), false, 12.5),
		"text":         promptKeyOf(read(pt, "Be brief!", 1), false, 12.5),
		"no text":      promptKeyOf(read(pt, "", 1), false, 12.5),
		"stepwise":     promptKeyOf(read(pt, "Be brief.", 1), true, 12.5),
		"frame rate":   promptKeyOf(read(pt, "Be brief.", 1), false, 25),
		"WAV, no text": promptKeyOf(read(wav, "", 1), false, 12.5),
	}
	seen := map[promptKey]string{a: "base"}
	for name, k := range others {
		if prev, dup := seen[k]; dup {
			t.Fatalf("%s and %s have one key", name, prev)
		}
		seen[k] = name
	}
	if promptKeyOf(read(wav, "", 1), false, 12.5) != others["WAV, no text"] {
		t.Fatal("a WAV voice read twice: two keys")
	}
}

func loadTokenizer(t *testing.T, o Options) *prompts.Tokenizer {
	t.Helper()
	tok, err := prompts.Load(o.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The LRU's bounds: entries and bytes; the least recently used goes first;
// a state over the byte bound alone is not kept (and evicts nothing).
func TestPromptCacheLRU(t *testing.T) {
	key := func(i byte) promptKey { return promptKey{i} }
	snaps := make([]*lm.Snapshot, 8)
	for i := range snaps {
		snaps[i] = new(lm.Snapshot)
	}
	c := newPromptCache(3, 100)
	for i := byte(0); i < 3; i++ {
		if !c.put(key(i), snaps[i], 30) {
			t.Fatalf("put %d refused", i)
		}
	}
	if c.get(key(0)) != snaps[0] { // 0 is now the most recent: 1, 2, 0
		t.Fatal("get 0")
	}
	c.put(key(3), snaps[3], 30) // over 3 entries: 1 goes
	if c.get(key(1)) != nil || c.get(key(2)) != snaps[2] || c.get(key(0)) != snaps[0] || c.get(key(3)) != snaps[3] {
		t.Fatal("entry bound: the least recently used did not go first")
	}
	// Order now 2, 0, 3 (90 bytes); 60 more bytes evict 2 and 0.
	c.put(key(4), snaps[4], 60)
	if c.get(key(2)) != nil || c.get(key(0)) != nil || c.get(key(3)) != snaps[3] || c.get(key(4)) != snaps[4] {
		t.Fatal("byte bound")
	}
	if c.bytes != 90 || len(c.entries) != 2 {
		t.Fatalf("%d bytes in %d entries", c.bytes, len(c.entries))
	}
	if c.put(key(5), snaps[5], 101) || len(c.entries) != 2 || c.get(key(5)) != nil {
		t.Fatal("a state over the byte bound was kept or evicted others")
	}
	if c.evictions != 3 || c.peakEntries != 3 || c.peakBytes != 90 {
		t.Fatalf("evictions %d peak %d entries %d bytes", c.evictions, c.peakEntries, c.peakBytes)
	}
	if off := newPromptCache(0, 100); off.put(key(0), snaps[0], 1) {
		t.Fatal("a cache of 0 entries kept one")
	}
}

// The memory estimate of an entry is what a real one holds: the tiny
// model's state after its prompt phases (a .pt voice and a text prompt,
// longer than its context: rings at the full context), within 10 %, not
// under, with float32 and with bf16 rings.
func TestPromptCacheEstimate(t *testing.T) {
	o := tinyOptions(t)
	tok := loadTokenizer(t, o)
	in, err := prepare(t.Context(), &Item{InputWAV: tinyDir + "input.wav", VoicePrompt: tinyDir + "voices/TINYF0.pt", TextPrompt: "Be brief."},
		o.Config, tok, o.Tokenizer, inputLimits(1))
	if err != nil {
		t.Fatal(err)
	}
	m, err := lm.Open(&o.Config.LM, o.MoshiWeight)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, kv := range []string{"f32", "bf16"} {
		be, err := cpu.New(cpu.Options{Threads: 1, KVDType: kv})
		if err != nil {
			t.Fatal(err)
		}
		g := lm.NewGen(m, be, lm.GenOptions{FrameRate: o.Config.Mimi.FrameRate})
		if err := g.QueueSystemPrompts(in.sys); err != nil {
			t.Fatal(err)
		}
		got := g.Snapshot().Bytes()
		c := newPromptCache(3, 1<<40)
		est := c.estimate(o.Config, in.promptSteps(o.Config, o.Config.Mimi.FrameSize()), DeviceOptions{KVDType: kv}.KVElemBytes()) / 3
		slack := est / 10
		if kv == "bf16" {
			slack += 2 << 10 // the entry's 4 KiB allowance for its token cache is a larger share of the tiny model's bf16 rings
		}
		if got > est || got < est-slack {
			t.Fatalf("--kv-dtype %s: an entry holds %d bytes, estimated %d", kv, got, est)
		}
		be.Close()
	}
	if small := newPromptCache(3, 1000); small.estimate(o.Config, 10, 4) != 1000 {
		t.Fatal("the estimate is not within the byte bound")
	}
}

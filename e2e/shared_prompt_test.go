package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sharedPromptItems: one persona over many inputs (the default .pt voice
// and text prompt, P), a WAV voice (W) and another text prompt (T), in the
// order P P W P T W P W: greedy, the same seed twice, other seeds.
func sharedPromptItems() []batchItem {
	wav := func(it batchItem) batchItem {
		it.voice = "TINYF0.wav"
		it.flags = append(it.flags, "--voice-prompt", "TINYF0.wav")
		return it
	}
	return []batchItem{
		{name: "p1", samples: 73200, fields: map[string]any{"greedy": true}, flags: []string{"--greedy"}},
		{name: "p2", samples: 1920 * 23, fields: map[string]any{"seed": 7}, flags: []string{"--seed", "7"}},
		wav(batchItem{name: "w1", samples: 1920*9 + 700, fields: map[string]any{"seed": 7}, flags: []string{"--seed", "7"}}),
		{name: "p3", samples: 1920 * 17, fields: map[string]any{"seed": 7}, flags: []string{"--seed", "7"}},
		{name: "t1", samples: 1920 * 12, fields: map[string]any{"seed": 5, "text_prompt": "Be brief."}, flags: []string{"--seed", "5", "--text-prompt", "Be brief."}},
		wav(batchItem{name: "w2", samples: 73200, fields: map[string]any{"greedy": true}, flags: []string{"--greedy"}}),
		{name: "p4", samples: 1920 * 30, fields: map[string]any{"seed": 11, "temp_audio": 0.5}, flags: []string{"--seed", "11", "--temp-audio", "0.5"}},
		wav(batchItem{name: "w3", samples: 1920 * 5, fields: map[string]any{"seed": 7}, flags: []string{"--seed", "7"}}),
	}
}

var promptCacheLine = regexp.MustCompile(`prompt cache: (\d+) entries, [0-9.]+ MiB .*; (\d+) conversations restored their prompt state from it, (\d+) ran their prompt phases`)

// A batch whose items share their prompts (restored from the job's prompt
// cache) writes exactly the bytes, WAV and JSON, of each item's separate
// run of the main command (one item: its own prompt phases, nothing
// shared), greedy and sampled, .pt and WAV voices, mixed prompts; the log
// says once what the cache held and how many conversations it served.
func TestSharedPromptBatchMatchesSingleRuns(t *testing.T) {
	dir := t.TempDir()
	items := sharedPromptItems()
	manifest := writeJob(t, dir, items)
	want := map[string][2][]byte{}
	for _, it := range items {
		want[it.name] = single(t, dir, it)
	}
	if _, stderr, code := run(t, tinyArgs(t.TempDir(), "--greedy")...); code != 0 || strings.Contains(stderr, "prompt cache:") {
		t.Fatalf("a single run: exit %d, used the prompt cache:\n%s", code, stderr)
	}
	for _, c := range []struct{ B, cache string }{{"1", ""}, {"3", ""}, {"8", ""}, {"3", "0"}, {"3", "1"}} {
		B := c.B
		name := "B=" + B
		args := batchArgs("--manifest", manifest, "--batch-size", B)
		if c.cache != "" {
			name += ",--prompt-cache=" + c.cache
			args = append(args, "--prompt-cache", c.cache)
		}
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			_, stderr, code := run(t, append(args, "--output-dir", out)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, it := range items {
				w, _ := os.ReadFile(filepath.Join(out, it.name+".wav"))
				j, _ := os.ReadFile(filepath.Join(out, it.name+".json"))
				if len(w) == 0 || !bytes.Equal(w, want[it.name][0]) || !bytes.Equal(j, want[it.name][1]) {
					t.Errorf("%s: batch output differs from the single run (wav %d vs %d bytes)", it.name, len(w), len(want[it.name][0]))
				}
			}
			if c.cache == "0" {
				if strings.Contains(stderr, "prompt cache:") {
					t.Fatalf("--prompt-cache 0 used a cache:\n%s", stderr)
				}
				return
			}
			if n := strings.Count(stderr, "prompt cache: "); n != 1 {
				t.Fatalf("the prompt cache line %d times:\n%s", n, stderr)
			}
			m := promptCacheLine.FindStringSubmatch(stderr)
			if c.cache == "1" {
				// One entry: only a run of equal prompts shares.
				if m == nil || m[1] != "1" {
					t.Fatalf("prompt cache line %q, want 1 entry:\n%s", m, stderr)
				}
				return
			}
			// P, W and T run their prompt phases once each; the other 5 share.
			if m == nil || m[1] != "3" || m[2] != "5" || m[3] != "3" {
				t.Fatalf("prompt cache line %q, want 3 entries, 5 restored, 3 run:\n%s", m, stderr)
			}
		})
	}
}

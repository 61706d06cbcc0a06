package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With --kv-dtype bf16 (the LM's keys and values stored as bf16), a batch
// whose items share their prompts still writes exactly the bytes of each
// item's separate run with the flag, greedy and sampled, .pt and WAV
// voices; the log says so once; and the flag does change the outputs
// (here: at least one item's audio differs from its float32-cache run).
func TestKVDTypeBF16BatchMatchesSingleRuns(t *testing.T) {
	dir := t.TempDir()
	items := sharedPromptItems()
	manifest := writeJob(t, dir, items)
	f32 := map[string][2][]byte{}
	for _, it := range items {
		f32[it.name] = single(t, dir, it)
	}
	want := map[string][2][]byte{}
	for i := range items {
		items[i].flags = append(items[i].flags, "--kv-dtype", "bf16")
		want[items[i].name] = single(t, dir, items[i])
	}
	out := t.TempDir()
	_, stderr, code := run(t, batchArgs("--manifest", manifest, "--batch-size", "3", "--kv-dtype", "bf16", "--output-dir", out)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "KV cache bf16"); n != 1 {
		t.Fatalf("the KV cache line %d times:\n%s", n, stderr)
	}
	differs := 0
	for _, it := range items {
		w, _ := os.ReadFile(filepath.Join(out, it.name+".wav"))
		j, _ := os.ReadFile(filepath.Join(out, it.name+".json"))
		if len(w) == 0 || !bytes.Equal(w, want[it.name][0]) || !bytes.Equal(j, want[it.name][1]) {
			t.Errorf("%s: batch output differs from the single run with --kv-dtype bf16 (wav %d vs %d bytes)", it.name, len(w), len(want[it.name][0]))
		}
		if !bytes.Equal(w, f32[it.name][0]) {
			differs++
		}
	}
	if differs == 0 {
		t.Fatal("--kv-dtype bf16 changed no output: the flag did not reach the KV cache")
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// logStamp is the start of every log line off a terminal: UTC to the
// millisecond, then the level (issue 23, item 6).
var logStamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[(info|warn)\] `)

// logLines are stderr's lines but the last error line ("pp-offline: ...").
func logLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "pp-offline: ") {
			out = append(out, l)
		}
	}
	return out
}

// The main job and download, run in Tokyo's time zone off a terminal:
// every line is stamped in UTC with milliseconds, and the voice warning is
// a warning.
func TestLogFormatOffTerminal(t *testing.T) {
	env := append(os.Environ(), "TZ=Asia/Tokyo")
	dir := t.TempDir()
	_, stderr, code := runWithEnv(t, env, tinyArgs(dir, "--greedy")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, l := range logLines(stderr) {
		if !logStamp.MatchString(l) {
			t.Fatalf("main job: line not in the log format: %q", l)
		}
	}
	if n := strings.Count(stderr, "[warn] "); n != 1 || !strings.Contains(grepLine(stderr, "[warn]"), "longer than the model's context") {
		t.Fatalf("main job: %d warnings, want the voice warning once:\n%s", n, stderr)
	}

	s := tinyHub(t)
	home := t.TempDir()
	stdout, stderr, code := runWithEnv(t, hubEnv(s, home, "TZ=Asia/Tokyo"), "download")
	if code != 0 || !strings.Contains(stdout, "snapshots") {
		t.Fatalf("download: exit %d: %s", code, stderr)
	}
	lines := logLines(stderr)
	if len(lines) == 0 {
		t.Fatal("download logged nothing")
	}
	for _, l := range lines {
		if !logStamp.MatchString(l) {
			t.Fatalf("download: line not in the log format: %q", l)
		}
	}
}

// A batch of items sharing one voice says the voice warning once, and its
// start and end lines are in the log format.
func TestBatchWarningOnceAndStamped(t *testing.T) {
	dir := t.TempDir()
	var items []batchItem
	for _, n := range []string{"a", "b", "c"} {
		items = append(items, batchItem{name: n, samples: 1920 * 4, fields: map[string]any{"greedy": true}})
	}
	manifest := writeJob(t, dir, items)
	_, stderr, code := run(t, batchArgs("--manifest", manifest, "--output-dir", filepath.Join(dir, "out"), "--batch-size", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "longer than the model's context"); n != 1 {
		t.Fatalf("the voice warning %d times, want once:\n%s", n, stderr)
	}
	for _, want := range []string{"[info] shard ", "[info] done: 3 ok", "[warn] " + filepath.Join(wdTiny(t), "voices", "TINYF0.pt")} {
		if l := grepLine(stderr, want); !logStamp.MatchString(l) {
			t.Fatalf("no line %q in the log format:\n%s", want, stderr)
		}
	}
}

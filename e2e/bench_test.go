package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// bench --json ends with one line of JSON holding the documented keys, with
// values that follow from the run (the tiny model's step reads its weights).
func TestBenchJSON(t *testing.T) {
	out, stderr, code := run(t, "bench", "--config", tiny+"config.json", "--frames", "3", "--warmup", "1", "--memory-mib", "8", "--json", "-q", "--threads", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"lm_ms_per_frame", "codec_ms_per_step", "codec_encode_ms_per_frame", "codec_decode_ms_per_frame", "weight_bytes_per_frame", "achieved_gbps", "memory_gbps", "roofline_fraction", "threads"} {
		v, ok := m[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v", k, m[k])
		}
	}
	if c, e, d := m["codec_ms_per_step"].(float64), m["codec_encode_ms_per_frame"].(float64), m["codec_decode_ms_per_frame"].(float64); math.Abs(c-(e+d)) > 1e-9*c {
		t.Errorf("codec_ms_per_step %v is not encode %v + decode %v", c, e, d)
	}
	// One conversation's codec codes 16 frames a call: 3 frames are
	// measured as one call's 16.
	if m["threads"].(float64) != 1 || m["frames"].(float64) != 16 || m["codec_frames_per_call"].(float64) != 16 {
		t.Errorf("threads %v frames %v codec frames per call %v", m["threads"], m["frames"], m["codec_frames_per_call"])
	}
	// The tiny model: temporal layers + text head + 8 depformer steps + embedding rows.
	if b := m["weight_bytes_per_frame"].(float64); b < 1e6 || b > 3e6 {
		t.Errorf("weight bytes per frame %v", b)
	}
	// The random weights are bf16: 2 bytes and 2 FLOPs a weight, so the
	// LM's FLOPs are its bytes read less the few embedding rows, which are
	// read but not multiplied.
	bytes, lmFLOP := m["weight_bytes_per_frame"].(float64), m["lm_gflop_per_step"].(float64)*1e9
	if d := bytes - lmFLOP; d <= 0 || d > 0.01*bytes {
		t.Errorf("lm_gflop_per_step %v GFLOP against %v weight bytes", lmFLOP/1e9, bytes)
	}
	if c := m["codec_gflop_per_step"].(float64); c <= 0 {
		t.Errorf("codec_gflop_per_step %v", c)
	}
	if r, want := m["lm_gflops"].(float64), m["lm_gflop_per_step"].(float64)/m["lm_ms_per_step"].(float64)*1e3; math.Abs(r-want) > 1e-9*want {
		t.Errorf("lm_gflops %v, want %v", r, want)
	}
}

// --kv-fill makes the measured frames attend over that many more positions.
func TestBenchKVFill(t *testing.T) {
	out, stderr, code := run(t, "bench", "--config", tiny+"config.json", "--frames", "2", "--warmup", "0", "--memory-mib", "8", "--json", "-q", "--kv-fill", "30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m struct {
		KVPositions float64 `json:"kv_positions"`
		KVBytes     float64 `json:"kv_bytes_per_frame"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 6 silence steps + 30 synthetic + 2 frames, in a ring of capacity 48.
	if m.KVPositions < 36 || m.KVBytes != m.KVPositions*64*2*4*2 {
		t.Fatalf("kv_positions %v, kv_bytes_per_frame %v", m.KVPositions, m.KVBytes)
	}
}

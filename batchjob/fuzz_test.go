package batchjob

import (
	"math"
	"testing"
)

// A manifest line never panics the parser: it is an item whose sampling
// values are in range, or an error message.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"input_wav": "a.wav", "output_wav": "o/a.wav", "output_text": "o/a.json"}`,
		`{"input_wav": "a.wav", "output_wav": "a.out.wav", "output_text": "a.json", "seed": 7, "temp_audio": 0.5, "topk_text": 3, "greedy": true, "voice_prompt": "NATF2.pt", "text_prompt": "hi"}`,
		`{"input_wav": 3}`, `[]`, `null`, `{"input_wav": "a.wav", "input_wav": "b.wav"}`, `{"seed": 1e400}`,
	} {
		f.Add([]byte(s))
	}
	def := Settings{Seed: -1, TempAudio: 0.8, TempText: 0.7, TopKAudio: 250, TopKText: 25, OutputFormat: "pcm16", OutputTextFormat: "list"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		it, msg := parseLine(raw, def, "/base", "")
		if it == nil {
			if msg == "" {
				t.Fatal("no item and no message")
			}
			return
		}
		if msg != "" {
			t.Fatalf("an item and a message %q", msg)
		}
		if it.TempAudio < 0 || it.TempText < 0 || math.IsNaN(it.TempAudio) || math.IsNaN(it.TempText) || it.TopKAudio < 1 || it.TopKText < 1 {
			t.Fatalf("out-of-range sampling accepted: %+v", it)
		}
	})
}

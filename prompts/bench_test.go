package prompts

import (
	"strings"
	"testing"
)

// prompt2000 is a 2,000-character role prompt (README-style text, a few
// accents and an emoji so that the normalizer and unknown paths run too).
func prompt2000() string {
	const base = "You work for CitySan Services which is a waste management company and your name is Ayelen Lucero. " +
		"Information: verify the customer's name, Omar Torres; café pickup every other week at 9 PM (April 12th). 😀 "
	s := strings.Repeat(base, 2000/len([]rune(base))+1)
	return string([]rune(s)[:2000])
}

func benchEncode(b *testing.B, path string) {
	tok := loadTok(b, path)
	text := WrapWithSystemTags(prompt2000())
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = tok.Encode(text)
	}
}

// BenchmarkEncode2000: the PersonaPlex-like unigram nmt_nfkc model.
func BenchmarkEncode2000(b *testing.B) { benchEncode(b, tinyModel) }

func BenchmarkEncode2000BPE(b *testing.B) { benchEncode(b, fixtures+"/bpe_nfkc.model") }

func BenchmarkEncode2000ByteFallback(b *testing.B) {
	benchEncode(b, fixtures+"/unigram_bytes_cf.model")
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		loadTok(b, tinyModel)
	}
}

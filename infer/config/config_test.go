package config

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The built-in default is the real PersonaPlex 7B + Mimi, field for field as
// the fixtures' personaplex-7b.config.json states them.
func TestDefaultIsPersonaPlex7B(t *testing.T) {
	c, err := Load("../../testdata/personaplex-7b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		a, _ := json.Marshal(c)
		b, _ := json.Marshal(Default())
		t.Fatalf("default differs from the 7B config:\n%s\n%s", a, b)
	}
	if c.DimFeedforward() != 16896 || c.DepDimFeedforward() != 4224 || c.MaxDelay() != 1 || c.Mimi.FrameSize() != 1920 {
		t.Fatalf("derived values: %d %d %d %d", c.DimFeedforward(), c.DepDimFeedforward(), c.MaxDelay(), c.Mimi.FrameSize())
	}
}

func TestTinyAndMissingMimi(t *testing.T) {
	c, err := Load("../../testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim != 64 || c.Context != 48 || c.Mimi.Transformer.Context != 32 || c.Mimi.Seanet.NFilters != 8 {
		t.Fatalf("tiny config read wrong: %+v", c.LM)
	}
	c, err = Load("../../testdata/personaplex-1b.config.json") // no "mimi": the real one
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim != 2048 || !reflect.DeepEqual(c.Mimi, DefaultMimi()) {
		t.Fatalf("1b config: dim %d mimi %+v", c.Dim, c.Mimi)
	}
}

func TestInvalidConfigs(t *testing.T) {
	for _, c := range []struct{ js, want string }{
		{`{"dim": 65, "num_heads": 4}`, "multiple of num_heads"},
		{`{"delays": [0, 1]}`, "delays has 2 entries"},
		{`{"dep_q": 3}`, "dep_q 3"},
		{`{"dim": "x"}`, "cannot unmarshal"},
		{`{"mimi": {"sample_rate": 0}}`, "sample_rate"},
		{`{"mimi": {"num_codebooks": 4}}`, "does not fit the LM"},
	} {
		_, err := Parse([]byte(c.js))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.js, err, c.want)
		}
	}
	p := t.TempDir() + "/bad.json"
	os.WriteFile(p, []byte("{"), 0o644)
	if _, err := Load(p); err == nil || !strings.HasPrefix(err.Error(), p+": not a valid model config") {
		t.Errorf("Load error %v", err)
	}
}

package config

import (
	"bytes"
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
		// Unknown keys, with the nearest known one.
		{`{"num_layer": 3}`, `unknown key "num_layer" (did you mean "num_layers"?)`},
		{`{"mimi": {"seanet": {"ratio": [8]}}}`, `unknown key "mimi.seanet.ratio" (did you mean "mimi.seanet.ratios"?)`},
		{`{"mimi": {"transformr": {}}}`, `unknown key "mimi.transformr" (did you mean "mimi.transformer"?)`},
		{`{"zzz": 1}`, `unknown key "zzz"`},
		// Not one object.
		{`null`, "must be a JSON object"},
		{`[1, 2]`, "must be a JSON object"},
		{`{"dim": 4096} {"dim": 2048}`, "data after the config object"},
		{`{"dim": 4096} x`, "data after the config object"},
		{`{"mimi": {"seanet": null, "quantizer": 3}}`, "must be a JSON object"},
		// Values the code cannot use.
		{`{"max_period": 0}`, "max_period must be positive"},
		{`{"max_period": -5}`, "max_period must be positive"},
		{`{"existing_text_padding_id": 32000}`, "existing_text_padding_id 32000"},
		{`{"existing_text_padding_id": -1}`, "existing_text_padding_id -1"},
		{`{"dim": 65536, "num_heads": 32}`, "dimension above"},
		{`{"delays": [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1000000000]}`, "delays must be in 0..4096"},
		{`{"context": 1000000000}`, "context 1000000000"},
		{`{"num_layers": 100000}`, "layers or heads"},
		{`{"hidden_scale": 0}`, "hidden_scale"},
		{`{"mimi": {"seanet": {"ratios": [8, 0]}}}`, "seanet.ratios must be in 1..64"},
		{`{"mimi": {"frame_rate": 0.001}}`, "frame_rate"},
		{`{"mimi": {"transformer": {"context": 0}}}`, "transformer.context"},
		// SEANet's shape: bounded before a plan is made of it (a million
		// residual layers took minutes in the memory estimate).
		{`{"mimi": {"seanet": {"n_residual_layers": 1000000}}}`, "n_residual_layers 1000000 must be in 0..16"},
		{`{"mimi": {"seanet": {"n_residual_layers": -1}}}`, "n_residual_layers -1"},
		{`{"mimi": {"seanet": {"n_residual_layers": 16, "dilation_base": 3}}}`, "dilation_base 3"},
		{`{"mimi": {"seanet": {"n_residual_layers": 2, "dilation_base": 0}}}`, "dilation_base 0"},
		{`{"mimi": {"seanet": {"kernel_size": 4611686018427387904}}}`, "kernel_size 4611686018427387904"},
		{`{"mimi": {"seanet": {"last_kernel_size": 5000}}}`, "must be at most 4096"},
		{`{"mimi": {"seanet": {"compress": 100000}}}`, "compress 100000"},
		{`{"mimi": {"seanet": {"ratios": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}}}`, "17 entries"},
		{`{"mimi": {"transformer": {"dim_feedforward": 1000000000}}}`, "dim_feedforward 1000000000"},
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
	// Every error names the file; the file is bounded before it is read.
	big := t.TempDir() + "/big.json"
	os.WriteFile(big, bytes.Repeat([]byte(" "), MaxFileBytes+1), 0o644)
	for path, want := range map[string]string{
		big:         "more than the",
		"/dev/zero": "is a device",
		t.TempDir(): "is a directory",
	} {
		if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s): %v, want %q", path, err, want)
		}
	}
}

// The keys of the hub repos' config.json that name files or generation
// settings are not model fields, and are accepted (ignored) at the top level.
func TestIgnoredKeys(t *testing.T) {
	c, err := Parse([]byte(`{"model_type": "moshi", "moshi_name": "model.safetensors", "lm_gen_config": {"temp": 0.8}, "dim": 4096}`))
	if err != nil || c.Dim != 4096 {
		t.Fatalf("%v", err)
	}
	if _, err := Parse([]byte(`{"mimi": {"model_type": "x"}}`)); err == nil {
		t.Fatal("model_type accepted inside mimi")
	}
}

// Parse never panics and either returns a config that validates or an
// error, whatever the bytes.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"../../testdata/tiny/config.json", "../../testdata/personaplex-7b.config.json", "../../testdata/personaplex-1b.config.json"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"num_layer": 3}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
	})
}

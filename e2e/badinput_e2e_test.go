package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"github.com/pp-offline/pp-offline/voices"
)

// memoryCeilingKB is the address-space limit every bad-input run gets
// (ulimit -v): a hostile file must be refused, not be allowed to grow the
// process until the machine's OOM killer ends it.
const memoryCeilingKB = 4 << 20 // 4 GiB

// runLimitedEnv runs the binary under the memory ceiling;
// env adds environment variables.
func runLimitedEnv(t *testing.T, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	// A bounded wait: a case that hangs (a FIFO once did) fails instead of
	// stalling the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, memoryCeilingKB), binPath}, args...)...)
	var e bytes.Buffer
	cmd.Stderr = &e
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("still running after 2 minutes: %v", args)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return e.String(), 0
}

// treeSums is a checksum of every regular file under the given roots.
func treeSums(t *testing.T, roots ...string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil {
					out[p] = sha256.Sum256(b)
				}
			}
			return nil
		})
	}
	return out
}

// badCase is one bad input: how to build it (in dir, the case's own
// folder, with out its output folder), the exit code, what the one error
// line must say, and the file it must name.
type badCase struct {
	name  string
	args  func(dir, out string) []string
	code  int
	want  string
	names string // a path (or its base name) the error line must contain; "" = want says it
}

// badCaseEnv: more environment variables of a case, by name.
var badCaseEnv = map[string][]string{}

// The bad-input matrix through the built binary: every case exits with its
// code and one line "pp-offline: <file>: <problem>", no Go trace, no file
// left behind, every input untouched, under a 4 GiB address-space ceiling.
func TestBadInputMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the bad-input matrix runs the binary ~70 times")
	}
	src := t.TempDir() // shared hostile inputs, built once
	path := func(name string) string { return filepath.Join(src, name) }
	write := func(name string, data []byte) string {
		os.WriteFile(path(name), data, 0o644)
		return path(name)
	}
	pcm := func(x []float32) []byte {
		var b bytes.Buffer
		audio.EncodePCM16(&b, x, 24000)
		return b.Bytes()
	}
	float := func(x []float32, rate int) []byte {
		var b bytes.Buffer
		audio.EncodeFloat32(&b, x, rate)
		return b.Bytes()
	}
	tone := make([]float32, 24000)
	for i := range tone {
		tone[i] = float32(0.3 * math.Sin(float64(i)*0.05))
	}
	withNaN := append([]float32(nil), tone...)
	withNaN[100] = float32(math.NaN())
	withInf := append([]float32(nil), tone...)
	withInf[100] = float32(math.Inf(1))
	empty := write("empty.wav", pcm(nil))
	garbage := write("garbage.wav", bytes.Repeat([]byte("not audio "), 40))
	nanWAV := write("nan.wav", float(withNaN, 24000))
	infWAV := write("inf.wav", float(withInf, 24000))
	oneHz := write("onehz.wav", float(tone[:24], 1))
	full := pcm(tone)
	truncHdr := write("trunchdr.wav", full[:30])
	adpcm := append([]byte(nil), full...)
	adpcm[20] = 2 // WAVE_FORMAT_ADPCM
	adpcmWAV := write("adpcm.wav", adpcm)
	zeroCh := append([]byte(nil), full...)
	zeroCh[22], zeroCh[23] = 0, 0
	zeroChWAV := write("zerochannels.wav", zeroCh)
	opus := write("voice.opus", append([]byte("OggS\x00\x02"+strings.Repeat("\x00", 20)+"\x01\x13OpusHead"), make([]byte, 64)...))
	flacTrunc := write("trunc.flac", []byte("fLaC\x00\x00\x00\x22\x12\x00\x12\x00"))
	fifo := path("fifo.wav")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	dirInput := path("adir")
	os.Mkdir(dirInput, 0o755)

	// Voices.
	p, err := voices.LoadPT(tiny + "voices/TINYF0.pt")
	if err != nil {
		t.Fatal(err)
	}
	savePT := func(name string, q *voices.Prompt) string {
		if err := voices.SavePT(path(name), q); err != nil {
			t.Fatal(err)
		}
		return path(name)
	}
	wide := &voices.Prompt{Cache: p.Cache}
	for _, e := range p.Embeddings {
		wide.Embeddings = append(wide.Embeddings, append(append([]float32(nil), e...), 0))
	}
	widePT := savePT("WIDE.pt", wide)
	nanP := &voices.Prompt{Cache: p.Cache}
	for _, e := range p.Embeddings {
		nanP.Embeddings = append(nanP.Embeddings, append([]float32(nil), e...))
	}
	nanP.Embeddings[2][3] = float32(math.NaN())
	nanPT := savePT("NANV.pt", nanP)
	long := &voices.Prompt{Cache: p.Cache}
	for i := 0; i < 5000; i++ {
		long.Embeddings = append(long.Embeddings, p.Embeddings[i%len(p.Embeddings)])
	}
	longPT := savePT("LONG.pt", long)
	notZip := write("NOTZIP.pt", []byte("this is not a zip archive at all"))
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("EVIL/data.pkl")
	w.Write([]byte("\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."))
	zw.Close()
	evilPT := write("EVIL.pt", zb.Bytes())
	voiceEmpty := write("voiceempty.wav", pcm(nil))

	// Tokenizers, configs, weights.
	tokGarbage := write("tok.model", bytes.Repeat([]byte{0xff, 0x13}, 300))
	cfgText, _ := os.ReadFile(tiny + "config.json")
	cfgWith := func(name, edit string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(cfgText, &m); err != nil {
			t.Fatal(err)
		}
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte("{"+edit+"}"), &e); err != nil {
			t.Fatal(err)
		}
		for k, v := range e {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return write(name, b)
	}
	cfgUnknown := cfgWith("unknown.json", `"num_layer": 3`)
	cfgTrailing := write("trailing.json", append(append([]byte(nil), cfgText...), []byte(" {}")...))
	cfgNull := write("null.json", []byte("null"))
	cfgHuge := cfgWith("hugedim.json", `"dim": 65536, "num_heads": 32`)
	cfgDelays := cfgWith("delays.json", `"delays": [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1000000000]`)
	cfgPeriod := cfgWith("period.json", `"max_period": 0`)
	cfgPad := cfgWith("pad.json", `"existing_text_padding_id": 99999`)
	model, _ := os.ReadFile(tiny + "model.safetensors")
	truncModel := write("trunc.safetensors", model[:len(model)/2])
	lying := append([]byte(nil), model...)
	copy(lying[8:], bytes.Replace(lying[8:200], []byte(`"data_offsets":[`), []byte(`"data_offsets":[9`), 1))
	lyingModel := write("lying.safetensors", lying)
	garbageModel := write("garbage.safetensors", bytes.Repeat([]byte{7}, 4096))
	// A header not padded to keep the tensors aligned (allowed by the
	// format; the safetensors library pads): pad spaces moves every
	// tensor by pad bytes.
	unaligned := func(name, src string, pad int) string {
		b, _ := os.ReadFile(src)
		n := binary.LittleEndian.Uint64(b)
		out := binary.LittleEndian.AppendUint64(nil, n+uint64(pad))
		out = append(append(append(out, b[8:8+n]...), bytes.Repeat([]byte(" "), pad)...), b[8+n:]...)
		return write(name, out)
	}
	oddModel := unaligned("odd.safetensors", tiny+"model.safetensors", 1)
	oddMimi := unaligned("odd-mimi.safetensors", tiny+"mimi.safetensors", 2)

	main := func(edits ...string) func(dir, out string) []string {
		return func(dir, out string) []string {
			args := tinyArgs(out, "--greedy")
			for i := 0; i+1 < len(edits); i += 2 {
				v := strings.ReplaceAll(strings.ReplaceAll(edits[i+1], "$OUT", out), "$DIR", dir)
				args = setFlag(args, edits[i], v)
			}
			return args
		}
	}
	cases := []badCase{
		// The user's input.
		{"missing input", main("--input-wav", "$DIR/nope.wav"), 1, "no such file", "nope.wav"},
		{"empty input", main("--input-wav", empty), 1, "no audio samples", "empty.wav"},
		{"garbage input", main("--input-wav", garbage), 1, "", "garbage.wav"},
		{"directory input", main("--input-wav", dirInput), 1, "directory", "adir"},
		{"device input", main("--input-wav", "/dev/zero"), 1, "device", "/dev/zero"},
		{"fifo input", main("--input-wav", fifo), 1, "is a pipe", "fifo.wav"},
		{"truncated header", main("--input-wav", truncHdr), 1, "", "trunchdr.wav"},
		{"unsupported format", main("--input-wav", adpcmWAV), 1, "", "adpcm.wav"},
		{"zero channels", main("--input-wav", zeroChWAV), 1, "", "zerochannels.wav"},
		{"1 Hz input", main("--input-wav", oneHz), 1, "not an audio rate", "onehz.wav"},
		{"NaN input", main("--input-wav", nanWAV), 1, "is NaN", "nan.wav"},
		{"Inf input", main("--input-wav", infWAV), 1, "is +Inf", "inf.wav"},
		{"opus input", main("--input-wav", opus), 1, "Opus", "voice.opus"},
		{"truncated flac", main("--input-wav", flacTrunc), 1, "", "trunc.flac"},
		// The voice prompt.
		{"voice not found", main("--voice-prompt", "NOPE.pt"), 1, "NOPE.pt", ""},
		{"voice not a zip", main("--voice-prompt", notZip), 1, "not a zip", "NOTZIP.pt"},
		{"voice too wide", main("--voice-prompt", widePT), 1, "dimension 65", "WIDE.pt"},
		{"voice NaN", main("--voice-prompt", nanPT), 1, "holds NaN", "NANV.pt"},
		{"voice too many rows", main("--voice-prompt", longPT), 1, "5000 rows", "LONG.pt"},
		{"voice pickle attack", main("--voice-prompt", evilPT), 1, "refusing to load global os.system", "EVIL.pt"},
		{"voice wav empty", main("--voice-prompt", voiceEmpty), 1, "no audio samples", "voiceempty.wav"},
		{"voice wav NaN", main("--voice-prompt", nanWAV), 1, "is NaN", "nan.wav"},
		{"voice is a directory", main("--voice-prompt", dirInput), 1, "directory", "adir"},
		{"voice fifo", main("--voice-prompt", fifo), 1, "is a pipe", "fifo.wav"},
		// The tokenizer.
		{"missing tokenizer", main("--tokenizer", "$DIR/nope.model"), 1, "no such file", "nope.model"},
		{"tokenizer device", main("--tokenizer", "/dev/zero"), 1, "is a device", "/dev/zero"},
		{"tokenizer garbage", main("--tokenizer", tokGarbage), 1, "", "tok.model"},
		{"tokenizer vocabulary", main("--tokenizer", "testdata/tokenizers/char.model"), 1, "do not match", "char.model"},
		{"tokenizer directory", main("--tokenizer", dirInput), 1, "directory", "adir"},
		{"tokenizer fifo", main("--tokenizer", fifo), 1, "", "fifo.wav"},
		// The config.
		{"config unknown key", main("--config", cfgUnknown), 1, `did you mean "num_layers"`, "unknown.json"},
		{"config trailing data", main("--config", cfgTrailing), 1, "data after the config object", "trailing.json"},
		{"config null", main("--config", cfgNull), 1, "must be a JSON object", "null.json"},
		{"config huge dim", main("--config", cfgHuge), 1, "dimension above", "hugedim.json"},
		{"config huge delay", main("--config", cfgDelays), 1, "delays must be in", "delays.json"},
		{"config max_period 0", main("--config", cfgPeriod), 1, "max_period", "period.json"},
		{"config padding id", main("--config", cfgPad), 1, "existing_text_padding_id", "pad.json"},
		{"config device", main("--config", "/dev/zero"), 1, "is a device", "/dev/zero"},
		{"config missing", main("--config", "$DIR/nope.json"), 1, "no such file", "nope.json"},
		{"config vs weights", main("--config", "testdata/personaplex-1b.config.json"), 1, "the config expects", ""},
		// The weights.
		{"weights garbage", main("--moshi-weight", garbageModel), 1, "", "garbage.safetensors"},
		{"weights truncated", main("--moshi-weight", truncModel), 1, "", "trunc.safetensors"},
		{"weights lying offsets", main("--moshi-weight", lyingModel), 1, "", "lying.safetensors"},
		{"weights directory", main("--moshi-weight", dirInput), 1, "directory", "adir"},
		{"mimi garbage", main("--mimi-weight", garbageModel), 1, "", "garbage.safetensors"},
		{"weights not aligned", main("--moshi-weight", oddModel), 1, "does not start at a multiple of 2 bytes", "odd.safetensors"},
		{"mimi not aligned", main("--mimi-weight", oddMimi), 1, "does not start at a multiple of 4 bytes", "odd-mimi.safetensors"},
		{"mimi is the LM", main("--mimi-weight", tiny+"model.safetensors"), 1, "", "model.safetensors"},
		// The outputs.
		{"output is the input", main("--output-wav", tiny+"input.wav"), 2, "is an input", "input.wav"},
		{"output is the model", main("--output-text", tiny+"model.safetensors"), 2, "is an input", "model.safetensors"},
		{"output links the voice", func(dir, out string) []string {
			os.Link(tiny+"voices/TINYF0.pt", filepath.Join(dir, "hard.wav"))
			return main("--output-wav", "$DIR/hard.wav")(dir, out)
		}, 2, "is the input", "hard.wav"},
		{"output symlinks the tokenizer", func(dir, out string) []string {
			abs, _ := filepath.Abs(tiny + "tokenizer.model")
			os.Symlink(abs, filepath.Join(dir, "sym.json"))
			return main("--output-text", "$DIR/sym.json")(dir, out)
		}, 2, "is the input", "sym.json"},
		{"output is a device", main("--output-text", "/dev/null"), 2, "not a regular file", "/dev/null"},
		{"output read-only", func(dir, out string) []string {
			os.WriteFile(filepath.Join(dir, "ro.json"), []byte("keep"), 0o444)
			return main("--output-text", "$DIR/ro.json")(dir, out)
		}, 2, "read-only", "ro.json"},
		{"output folder missing", main("--output-wav", "$DIR/no/such/o.wav"), 2, "does not exist", "o.wav"},
		{"outputs the same", main("--output-text", "$OUT/out.wav"), 2, "given as two outputs", "out.wav"},
		{"output is a directory", main("--output-wav", dirInput), 2, "", "adir"},
		{"outputs locked by another run", func(dir, out string) []string {
			l, err := fileio.LockOutputs(filepath.Join(out, "out.wav"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Unlock)
			return main()(dir, out)
		}, 1, "another pp-offline run is writing this output", "out.wav"},
		// The command line (usage errors: exit 2).
		{"unknown flag", main("--input-wave", "x.wav"), 2, "did you mean --input-wav", ""},
		{"negative temperature", main("--temp-audio", "-1"), 2, "temp-audio", ""},
		{"top-k zero", main("--topk-text", "0"), 2, "topk-text", ""},
		{"negative threads", main("--threads", "-1"), 2, "threads", ""},
		{"output format", main("--output-format", "mp3"), 2, "output-format", ""},
		{"no GPU", main("--device", "cuda"), 1, "no usable GPU", ""},
		// Other commands.
		{"bench memory", func(dir, out string) []string {
			return []string{"bench", "--config", "testdata/personaplex-1b.config.json", "--memory-mib", "1048576", "--frames", "1"}
		}, 1, "not enough memory", ""},
		{"bench huge config", func(dir, out string) []string { return []string{"bench", "--config", cfgHuge} }, 1, "dimension above", "hugedim.json"},
		{"batch manifest unknown key", func(dir, out string) []string {
			m := filepath.Join(dir, "jobs.jsonl")
			os.WriteFile(m, []byte(`{"input_wav": "a.wav", "output_wav": "o.wav", "output_text": "o.json", "sed": 3}`+"\n"), 0o644)
			return []string{"batch", "--manifest", m, "--config", tiny + "config.json", "--moshi-weight", tiny + "model.safetensors",
				"--mimi-weight", tiny + "mimi.safetensors", "--tokenizer", tiny + "tokenizer.model"}
		}, 2, "sed", "jobs.jsonl"},
		{"batch manifest not JSON", func(dir, out string) []string {
			m := filepath.Join(dir, "jobs.jsonl")
			os.WriteFile(m, []byte("not json\n"), 0o644)
			return []string{"batch", "--manifest", m, "--config", tiny + "config.json", "--moshi-weight", tiny + "model.safetensors",
				"--mimi-weight", tiny + "mimi.safetensors", "--tokenizer", tiny + "tokenizer.model"}
		}, 2, "JSON", "jobs.jsonl"},
		{"codec decode garbage", func(dir, out string) []string {
			return []string{"codec", "decode", "--codes", garbageModel, "--output-wav", filepath.Join(out, "o.wav"), "--config", tiny + "config.json", "--mimi-weight", tiny + "mimi.safetensors"}
		}, 1, "", "garbage.safetensors"},
		{"compare missing", func(dir, out string) []string {
			return []string{"compare", "--reference", "$DIR/nope.wav", "--candidate", tiny + "input.wav"}
		}, 2, "nope.wav", ""},
		{"compare reports the same file", func(dir, out string) []string {
			return []string{"compare", "--reference", tiny + "input.wav", "--candidate", tiny + "input.wav",
				"--report", filepath.Join(out, "r.out"), "--junit", filepath.Join(out, "r.out")}
		}, 2, "are the same file", "r.out"},
		{"compare transcript fifo", func(dir, out string) []string {
			return []string{"compare", "--reference", tiny + "input.wav", "--candidate", tiny + "input.wav",
				"--reference-text", fifo, "--candidate-text", fifo}
		}, 2, "is a pipe", "fifo.wav"},
	}
	cases = append(cases, guardCases(t, src, fifo, dirInput)...)
	if len(cases) < 120 {
		t.Fatalf("only %d cases", len(cases))
	}
	before := treeSums(t, "testdata/tiny", src)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, out := t.TempDir(), t.TempDir()
			args := c.args(dir, out)
			had := map[string]bool{} // what the case put there itself (a lock it holds)
			if ents, _ := os.ReadDir(out); len(ents) > 0 {
				for _, e := range ents {
					had[e.Name()] = true
				}
			}
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "$DIR", dir)
			}
			inDir := treeSums(t, dir) // what the case made there: inputs too
			stderr, code := runLimitedEnv(t, badCaseEnv[c.name], args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			switch {
			case code != c.code:
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, stderr)
			case !strings.HasPrefix(last, "pp-offline: "):
				t.Fatalf("last line %q is not the error line:\n%s", last, stderr)
			case !strings.Contains(last, c.want):
				t.Fatalf("error line %q lacks %q", last, c.want)
			case c.names != "" && !strings.Contains(last, c.names):
				t.Fatalf("error line %q does not name %s", last, c.names)
			case strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic:") || strings.Contains(stderr, "fatal error"):
				t.Fatalf("a Go trace:\n%s", stderr)
			}
			var left []string
			ents, _ := os.ReadDir(out)
			for _, e := range ents {
				if !had[e.Name()] {
					left = append(left, e.Name())
				}
			}
			if len(left) > 0 {
				t.Fatalf("left behind in the output folder: %v", left)
			}
			for p, h := range inDir {
				if got, ok := treeSums(t, dir)[p]; !ok || got != h {
					t.Fatalf("input %s changed or removed", p)
				}
			}
			for _, d := range []string{dir, src, "testdata/tiny"} {
				filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
					if err == nil && (e.Name() == fileio.TempDir || strings.HasSuffix(e.Name(), ".lock")) && !had[e.Name()] {
						t.Errorf("temporary folder or lock left: %s", p)
					}
					return nil
				})
			}
		})
	}
	after := treeSums(t, "testdata/tiny", src)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("input %s changed", p)
		}
	}
}

// A checkpoint truncated while a job maps it ends the job with one line
// (the check before each step, or a fault recovered into an error), never
// SIGBUS and a Go trace.
func TestModelTruncatedDuringRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 5-minute input")
	}
	dir := t.TempDir()
	model, err := os.ReadFile(tiny + "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "model.safetensors")
	os.WriteFile(copyPath, model, 0o644)
	x := make([]float32, 24000*300)
	for i := range x {
		x[i] = float32(0.2 * math.Sin(float64(i)*0.01))
	}
	var b bytes.Buffer
	audio.EncodePCM16(&b, x, 24000)
	in := filepath.Join(dir, "long.wav")
	os.WriteFile(in, b.Bytes(), 0o644)
	out := t.TempDir()
	args := setFlag(setFlag(tinyArgs(out, "--greedy"), "--moshi-weight", copyPath), "--input-wav", in)
	cmd := exec.Command(binPath, args...)
	pr, pw, _ := os.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var stderr bytes.Buffer
	started := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		once := false
		for {
			n, err := pr.Read(buf)
			stderr.Write(buf[:n])
			if !once && bytes.Contains(stderr.Bytes(), []byte("prompt phases")) {
				once = true
				close(started)
			}
			if err != nil {
				if !once {
					close(started)
				}
				return
			}
		}
	}()
	<-started
	time.Sleep(300 * time.Millisecond)
	if err := os.Truncate(copyPath, int64(len(model)/3)); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	time.Sleep(50 * time.Millisecond)
	s := stderr.String()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "pp-offline: ") || !(strings.Contains(last, "shrank") || strings.Contains(last, "changed under the job")) {
		t.Fatalf("exit %d, last line %q", code, last)
	}
	if strings.Contains(s, "goroutine ") || strings.Contains(s, "SIGBUS") {
		t.Fatalf("a trace:\n%s", s)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("outputs left: %v", ents)
	}
}

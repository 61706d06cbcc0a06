package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// Package e2e holds the binary-level tests: they build the real binary and
// run it as users do, from the repository root (TestMain changes into it),
// so that paths read as in README's commands.

// exitUsage is the status README promises for a bad flag or value.
const exitUsage = 2

var binPath string

func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "pp-offline-e2e")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "pp-offline")
	// No test reaches the real hub or the user's cache (the hub tests set
	// their own environment).
	os.Setenv("HF_HUB_OFFLINE", "1")
	os.Setenv("HF_HOME", filepath.Join(dir, "hf"))
	os.Unsetenv("HF_HUB_CACHE")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic("building pp-offline: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const tiny = "testdata/tiny/"

func tinyArgs(outDir string, extra ...string) []string {
	args := []string{
		"--input-wav", tiny + "input.wav",
		"--voice-prompt", "TINYF0.pt", "--voice-prompt-dir", tiny + "voices",
		"--config", tiny + "config.json",
		"--moshi-weight", tiny + "model.safetensors",
		"--mimi-weight", tiny + "mimi.safetensors",
		"--tokenizer", tiny + "tokenizer.model",
		"--device", "cpu",
		"--output-wav", filepath.Join(outDir, "out.wav"),
		"--output-text", filepath.Join(outDir, "out.json"),
	}
	return append(args, extra...)
}

// setFlag replaces the value of flag in args (or appends it).
func setFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCmd(t, exec.Command(binPath, args...))
}

// runCmd runs cmd to its end and returns what it wrote and its exit
// status; a command that cannot start fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func readPCM(t *testing.T, path string) []float32 {
	t.Helper()
	x, err := audio.LoadMono(path, 24000)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func snrDB(ref, got []float32) float64 {
	var s, n float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		s += float64(ref[i]) * float64(ref[i])
		n += d * d
	}
	if n == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(s/n)
}

// Each fixture run: the JSON transcript is byte-identical to the reference's
// and the WAV matches the reference PCM with SNR >= 60 dB.
func TestEndToEndParity(t *testing.T) {
	refPCMFile, err := weights.Open(tiny + "expected/run_pt/output_pcm.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer refPCMFile.Close()
	pt, _ := refPCMFile.Get("pcm")
	refPCM := pt.Float32s()
	for _, sc := range []struct{ name, voice, model string }{
		{"run_pt", "TINYF0.pt", "model.safetensors"},
		{"run_wav", "TINYF0.wav", "model.safetensors"},
		{"run_dep8", "TINYF0.pt", "model-dep8.safetensors"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := tinyArgs(dir, "--greedy", "--quiet")
			args = setFlag(args, "--voice-prompt", sc.voice)
			args = setFlag(args, "--moshi-weight", tiny+sc.model)
			_, stderr, code := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "out.json"))
			want, _ := os.ReadFile(tiny + "expected/" + sc.name + "/output.json")
			if !bytes.Equal(got, want) {
				t.Fatalf("transcript differs:\n got %s\nwant %s", got, want)
			}
			wav := readPCM(t, filepath.Join(dir, "out.wav"))
			refWav := readPCM(t, tiny+"expected/"+sc.name+"/output.wav")
			if len(wav) != len(refWav) || len(wav) != 73200 {
				t.Fatalf("%d samples, reference %d", len(wav), len(refWav))
			}
			// run_pt, run_wav and run_dep8 are bit-identical in the reference.
			if snr := snrDB(refPCM, wav); snr < 60 {
				t.Fatalf("SNR vs reference PCM %.1f dB < 60", snr)
			} else {
				t.Logf("SNR vs reference PCM %.1f dB", snr)
			}
			raw, _ := os.ReadFile(filepath.Join(dir, "out.wav"))
			if len(raw) != 44+2*73200 || string(raw[:4]) != "RIFF" || binary.LittleEndian.Uint16(raw[20:]) != 1 {
				t.Fatalf("not the reference's 16-bit PCM layout")
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Fatalf("left %d files (temporaries?)", len(entries))
			}
		})
	}
}

func TestSeedDeterminism(t *testing.T) {
	outs := map[string][2][]byte{}
	for _, c := range []struct{ name, seed, threads string }{
		{"a", "7", "1"}, {"b", "7", "2"}, {"c", "7", "2"}, {"d", "8", "2"},
	} {
		dir := t.TempDir()
		_, stderr, code := run(t, tinyArgs(dir, "--seed", c.seed, "--threads", c.threads, "--quiet")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		w, _ := os.ReadFile(filepath.Join(dir, "out.wav"))
		j, _ := os.ReadFile(filepath.Join(dir, "out.json"))
		outs[c.name] = [2][]byte{w, j}
	}
	for _, n := range []string{"b", "c"} {
		if !bytes.Equal(outs["a"][0], outs[n][0]) || !bytes.Equal(outs["a"][1], outs[n][1]) {
			t.Fatalf("seed 7 run %s differs from run a (threads or repetition changed the output)", n)
		}
	}
	if bytes.Equal(outs["a"][1], outs["d"][1]) && bytes.Equal(outs["a"][0], outs["d"][0]) {
		t.Fatal("seeds 7 and 8 gave identical outputs")
	}
	greedy, _ := os.ReadFile(tiny + "expected/run_pt/output.json")
	if bytes.Equal(outs["a"][1], greedy) {
		t.Fatal("sampling gave the greedy transcript")
	}
}

func TestDrawnSeedIsLogged(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := run(t, tinyArgs(dir)...)
	if code != 0 || !strings.Contains(stderr, "pass --seed") {
		t.Fatalf("exit %d, log:\n%s", code, stderr)
	}
}

func TestEmptyTextPromptAndRichText(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := run(t, tinyArgs(dir, "--greedy", "--text-prompt", "", "--output-text-format", "rich", "--output-format", "float32")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "prompt phases (0 text tokens)") {
		t.Fatalf("text phase not skipped:\n%s", stderr)
	}
	var rt struct {
		Text   string
		Frames []struct {
			Time  float64
			Token int
			Piece string
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	if err := json.Unmarshal(data, &rt); err != nil {
		t.Fatal(err)
	}
	if len(rt.Frames) != 39 || rt.Frames[1].Time != 0.08 || rt.Frames[0].Piece != "PAD" {
		t.Fatalf("rich transcript %+v", rt.Frames[:2])
	}
	clip, err := audio.Read(filepath.Join(dir, "out.wav"))
	if err != nil || clip.Frames() != 73200 {
		t.Fatalf("float WAV: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "out.wav"))
	if binary.LittleEndian.Uint16(raw[20:]) != 3 {
		t.Fatal("--output-format float32 did not write an IEEE float WAV")
	}
}

// Bad input: one line naming the file, non-zero exit, no output left.
func TestErrorsLeaveNoOutput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.wav")
	var b bytes.Buffer
	audio.EncodePCM16(&b, nil, 24000)
	os.WriteFile(empty, b.Bytes(), 0o644)
	notWav := filepath.Join(t.TempDir(), "notwav.wav")
	os.WriteFile(notWav, []byte("hello, not a wav file at all........................"), 0o644)
	for _, c := range []struct {
		name string
		edit func([]string, string) []string
		want string
	}{
		{"missing input", func(a []string, d string) []string { return setFlag(a, "--input-wav", "nope.wav") }, "nope.wav: no such file"},
		{"empty input", func(a []string, d string) []string { return setFlag(a, "--input-wav", empty) }, "no audio samples"},
		{"not a wav", func(a []string, d string) []string { return setFlag(a, "--input-wav", notWav) }, "notwav.wav: "},
		{"voice not found", func(a []string, d string) []string { return setFlag(a, "--voice-prompt", "NOPE.pt") }, "TINYF0"},
		{"output dir", func(a []string, d string) []string {
			return setFlag(a, "--output-wav", filepath.Join(d, "missing", "o.wav"))
		}, "does not exist"},
		{"weights vs config", func(a []string, d string) []string {
			return setFlag(a, "--config", "testdata/personaplex-1b.config.json")
		}, "the config expects"},
		{"corrupt weights", func(a []string, d string) []string { return setFlag(a, "--moshi-weight", notWav) }, "notwav.wav: "},
		{"bad tokenizer", func(a []string, d string) []string { return setFlag(a, "--tokenizer", notWav) }, "notwav.wav: "},
		{"weights are a folder", func(a []string, d string) []string { return setFlag(a, "--moshi-weight", d) }, "is a directory (--moshi-weight wants a file)"},
		{"tokenizer vs model", func(a []string, d string) []string {
			return setFlag(a, "--tokenizer", "testdata/tokenizers/char.model")
		}, "char.model: the tokenizer has 184 pieces but the model testdata/tiny/model.safetensors has text_card 1000"},
		{"cuda", func(a []string, d string) []string { return setFlag(a, "--device", "cuda") }, "no usable GPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, stderr, code := run(t, c.edit(tinyArgs(dir, "--greedy"), dir)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code == 0 || !strings.Contains(last, c.want) || !strings.HasPrefix(last, "pp-offline: ") {
				t.Fatalf("exit %d, last line %q, want %q", code, last, c.want)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
				t.Fatalf("panicked:\n%s", stderr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Fatalf("left %d files behind", len(entries))
			}
		})
	}
}

// SIGINT stops the run at the next frame and leaves no output.
func TestInterruptLeavesNoOutput(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.wav")
	x := make([]float32, 24000*600) // 10 minutes: far longer than the test waits
	for i := range x {
		x[i] = float32(0.1 * math.Sin(float64(i)*0.05))
	}
	var b bytes.Buffer
	audio.EncodePCM16(&b, x, 24000)
	os.WriteFile(long, b.Bytes(), 0o644)
	outDir := t.TempDir()
	cmd := exec.Command(binPath, setFlag(tinyArgs(outDir, "--greedy"), "--input-wav", long)...)
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, stderr:\n%s", err, e.String())
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Fatalf("left %d files behind", len(entries))
	}
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "--version")
	if code != 0 || !strings.Contains(out, "commit") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

// A 48 kHz float WAV is resampled to 24 kHz; the output has the resampled
// input's length, as offline.py's (its length after load_audio).
func TestOtherSampleRateInput(t *testing.T) {
	x, err := audio.LoadMono(tiny+"input.wav", 24000)
	if err != nil {
		t.Fatal(err)
	}
	up, err := audio.Resample(x, 24000, 48000)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in48k.wav")
	var b bytes.Buffer
	audio.EncodeFloat32(&b, up, 48000)
	os.WriteFile(in, b.Bytes(), 0o644)
	want, _ := audio.LoadMono(in, 24000)
	dir := t.TempDir()
	if _, stderr, code := run(t, setFlag(tinyArgs(dir, "--greedy", "-q"), "--input-wav", in)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	out := readPCM(t, filepath.Join(dir, "out.wav"))
	if len(out) != len(want) {
		t.Fatalf("output %d samples, resampled input %d", len(out), len(want))
	}
}

// Without --config, a flat-schema config.json beside the weights is used; any
// other config.json there (a Hugging Face one, say) falls back to the
// built-in 7B, which the log says.
func TestConfigBesideWeights(t *testing.T) {
	wd, _ := os.Getwd()
	modelDir := t.TempDir()
	os.Symlink(filepath.Join(wd, tiny, "model.safetensors"), filepath.Join(modelDir, "model.safetensors"))
	cfg, _ := os.ReadFile(tiny + "config.json")
	os.WriteFile(filepath.Join(modelDir, "config.json"), cfg, 0o644)
	base := tinyArgs(t.TempDir(), "--greedy")
	args := []string{}
	for i := 0; i < len(base); i++ { // drop --config
		if base[i] == "--config" {
			i++
			continue
		}
		args = append(args, base[i])
	}
	args = setFlag(args, "--moshi-weight", filepath.Join(modelDir, "model.safetensors"))
	_, stderr, code := run(t, args...)
	if code != 0 || !strings.Contains(stderr, "(beside the weights)") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	os.WriteFile(filepath.Join(modelDir, "config.json"), []byte(`{"model_type": "personaplex", "architectures": ["X"]}`), 0o644)
	_, stderr, code = run(t, args...)
	if code == 0 || !strings.Contains(stderr, "built-in PersonaPlex 7B") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

package e2e

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/weights"
)

// pcm16 reads the samples of a 16-bit PCM mono WAV written with a 44-byte
// header (the layout pp-offline and the reference write).
func pcm16(t *testing.T, path string) []int16 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 44 || string(raw[:4]) != "RIFF" || string(raw[36:40]) != "data" || binary.LittleEndian.Uint16(raw[34:]) != 16 {
		t.Fatalf("%s: not a 44-byte-header 16-bit PCM WAV", path)
	}
	x := make([]int16, (len(raw)-44)/2)
	for i := range x {
		x[i] = int16(binary.LittleEndian.Uint16(raw[44+2*i:]))
	}
	return x
}

// What README says is exact, measured: on each fixture run the transcript
// is byte-identical to the reference's, and every sample of the WAV is
// within 1 LSB of the reference's 16-bit PCM (the figures README quotes are
// these logs).
func TestExactnessAgainstReference(t *testing.T) {
	for _, sc := range []struct{ name, voice, model string }{
		{"run_pt", "TINYF0.pt", "model.safetensors"},
		{"run_wav", "TINYF0.wav", "model.safetensors"},
		{"run_dep8", "TINYF0.pt", "model-dep8.safetensors"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := setFlag(setFlag(tinyArgs(dir, "--greedy", "--quiet"), "--voice-prompt", sc.voice), "--moshi-weight", tiny+sc.model)
			if _, stderr, code := run(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "out.json"))
			want, _ := os.ReadFile(tiny + "expected/" + sc.name + "/output.json")
			if !bytes.Equal(got, want) {
				t.Fatalf("transcript differs from the reference's")
			}
			a, b := pcm16(t, filepath.Join(dir, "out.wav")), pcm16(t, tiny+"expected/"+sc.name+"/output.wav")
			if len(a) != len(b) {
				t.Fatalf("%d samples, reference %d", len(a), len(b))
			}
			differ, maxDiff := 0, 0
			var sig, noise float64
			for i := range a {
				d := int(a[i]) - int(b[i])
				if d != 0 {
					differ++
					maxDiff = max(maxDiff, abs(d))
				}
				sig += float64(b[i]) * float64(b[i])
				noise += float64(d) * float64(d)
			}
			snr := math.Inf(1)
			if noise > 0 {
				snr = 10 * math.Log10(sig/noise)
			}
			t.Logf("%s: %d of %d samples differ, max |difference| %d LSB, SNR %.1f dB", sc.name, differ, len(a), maxDiff, snr)
			if maxDiff > 1 {
				t.Fatalf("a sample differs by %d LSB (README promises at most 1)", maxDiff)
			}
			if snr < 80 {
				t.Fatalf("SNR %.1f dB < 80 dB", snr)
			}
		})
	}
}

// The float samples before the 16-bit conversion: --output-format float32
// against the reference's float32 PCM of the same run. They differ in the
// last bits (float32 rounding in another summation order), which is what
// moves a few samples across an integer boundary of the 16-bit conversion.
func TestFloatOutputAgainstReference(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := run(t, tinyArgs(dir, "--greedy", "--quiet", "--output-format", "float32")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := weights.Open(tiny + "expected/run_pt/output_pcm.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pt, _ := f.Get("pcm")
	ref, got := pt.Float32s(), readPCM(t, filepath.Join(dir, "out.wav"))
	if len(got) != len(ref) {
		t.Fatalf("%d samples, reference %d", len(got), len(ref))
	}
	var maxDiff float64
	differ := 0
	for i := range ref {
		if d := math.Abs(float64(got[i]) - float64(ref[i])); d > 0 {
			differ++
			maxDiff = max(maxDiff, d)
		}
	}
	snr := snrDB(ref, got)
	t.Logf("float32: %d of %d samples differ, max |difference| %.2g (%.3f LSB of 16-bit), SNR %.1f dB", differ, len(ref), maxDiff, maxDiff*32767, snr)
	if maxDiff*32767 >= 1 || snr < 100 {
		t.Fatalf("float output further from the reference than float32 rounding: max %.3g, SNR %.1f dB", maxDiff, snr)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// --text-prompt-file gives the outputs of --text-prompt with the file's
// text (one final newline dropped); with both, or a bad file, one line.
func TestTextPromptFile(t *testing.T) {
	dir := t.TempDir()
	const prompt = "You enjoy having a good conversation. Ça va ?"
	p := filepath.Join(dir, "prompt.txt")
	os.WriteFile(p, []byte(prompt+"\n"), 0o644)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)
	if _, stderr, code := run(t, tinyArgs(a, "--greedy", "--quiet", "--text-prompt-file", p)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, tinyArgs(b, "--greedy", "--quiet", "--text-prompt", prompt)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, f := range []string{"out.wav", "out.json"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Fatalf("%s differs from the --text-prompt run", f)
		}
	}
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, bytes.Repeat([]byte("a"), 1<<20+1), 0o644)
	latin1 := filepath.Join(dir, "latin1.txt")
	os.WriteFile(latin1, []byte("\xc7a va"), 0o644)
	for _, tc := range []struct {
		extra []string
		code  int
		want  string
	}{
		{[]string{"--text-prompt-file", p, "--text-prompt", "x"}, exitUsage, "--text-prompt and --text-prompt-file exclude each other"},
		{[]string{"--text-prompt-file", big}, 1, "big.txt: a text prompt of more than 1 MiB"},
		{[]string{"--text-prompt-file", latin1}, 1, "latin1.txt: not UTF-8 text"},
		{[]string{"--text-prompt-file", filepath.Join(dir, "none.txt")}, 1, "none.txt: no such file"},
		{[]string{"--text-prompt-file", p, "--output-text", p}, exitUsage, "prompt.txt"},
	} {
		out := t.TempDir()
		_, stderr, code := run(t, tinyArgs(out, tc.extra...)...)
		if code != tc.code || strings.Count(stderr, "pp-offline: ") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.extra, code, stderr, tc.code, tc.want)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("%v: left %d files", tc.extra, len(entries))
		}
	}
	if b, _ := os.ReadFile(p); string(b) != prompt+"\n" {
		t.Fatal("the prompt file was written over")
	}
}

// --output-mix: a stereo 16-bit WAV, the user's input left and the agent's
// output right, sample for sample, the output's length. --output-format
// flac: the pcm16 samples losslessly, a stream flac -t accepts.
func TestOutputMixAndFLAC(t *testing.T) {
	dir := t.TempDir()
	mix := filepath.Join(dir, "mix.wav")
	if _, stderr, code := run(t, tinyArgs(dir, "--greedy", "--quiet", "--output-mix", mix)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, _ := os.ReadFile(mix)
	if len(raw) < 44 || binary.LittleEndian.Uint16(raw[22:]) != 2 || binary.LittleEndian.Uint32(raw[24:]) != 24000 || binary.LittleEndian.Uint16(raw[34:]) != 16 {
		t.Fatal("the mix is not a 24 kHz stereo 16-bit WAV")
	}
	clip, err := audio.Read(mix)
	if err != nil {
		t.Fatal(err)
	}
	agent, user := readPCM(t, filepath.Join(dir, "out.wav")), readPCM(t, tiny+"input.wav")
	if len(clip.Channels) != 2 || clip.Frames() != len(agent) {
		t.Fatalf("mix: %d channels of %d frames, output %d", len(clip.Channels), clip.Frames(), len(agent))
	}
	for i := range agent {
		var u float32
		if i < len(user) {
			u = user[i]
		}
		if clip.Channels[1][i] != agent[i] || clip.Channels[0][i] != u {
			t.Fatalf("mix frame %d: (%v, %v), want user %v, agent %v", i, clip.Channels[0][i], clip.Channels[1][i], u, agent[i])
		}
	}
	// The mix is an output like the others: never over an input or another output.
	other := t.TempDir()
	for _, bad := range []string{tiny + "input.wav", filepath.Join(other, "out.wav")} {
		_, stderr, code := run(t, tinyArgs(other, "--output-mix", bad)...)
		if code != exitUsage || strings.Count(stderr, "pp-offline: ") != 1 {
			t.Errorf("--output-mix %s: exit %d, %s", bad, code, stderr)
		}
	}

	fdir := t.TempDir()
	args := setFlag(tinyArgs(fdir, "--greedy", "--quiet", "--output-format", "flac"), "--output-wav", filepath.Join(fdir, "out.flac"))
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("flac: exit %d: %s", code, stderr)
	}
	got := readPCM(t, filepath.Join(fdir, "out.flac"))
	if len(got) != len(agent) {
		t.Fatalf("flac: %d samples, the WAV %d", len(got), len(agent))
	}
	for i := range got {
		if got[i] != agent[i] {
			t.Fatalf("flac sample %d: %v, the WAV has %v", i, got[i], agent[i])
		}
	}
	if b, _ := os.ReadFile(filepath.Join(fdir, "out.flac")); len(b) < 4 || string(b[:4]) != "fLaC" {
		t.Fatal("not a FLAC stream")
	}
	if _, err := exec.LookPath("flac"); err == nil {
		if out, err := exec.Command("flac", "-t", "-s", filepath.Join(fdir, "out.flac")).CombinedOutput(); err != nil {
			t.Fatalf("flac -t: %v\n%s", err, out)
		}
	}
}

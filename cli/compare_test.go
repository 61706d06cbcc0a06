package cli

import (
	"encoding/binary"
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pp-offline/pp-offline/audio"
)

const (
	cmpTestGoldenWAV  = "testdata/tiny/expected/run_pt/output.wav"
	cmpTestGoldenJSON = "testdata/tiny/expected/run_pt/output.json"
	cmpTestInputWAV   = "testdata/tiny/input.wav"
)

// cmpTestRun runs `pp-offline compare args…` through newApp().Run and
// returns the exit status main would use, stdout, and the error message
// (what goes to stderr).
func cmpTestRun(t *testing.T, args ...string) (code int, stdout, msg string) {
	t.Helper()
	code, stdout, _, msg = cmpTestRunErr(t, args...)
	return code, stdout, msg
}

// cmpTestWriteWAV writes x as 16-bit PCM mono (round(x·32768), so samples
// read from a 16-bit file are written back unchanged).
func cmpTestWriteWAV(t *testing.T, path string, x []float32, rate int) {
	t.Helper()
	b := make([]byte, 44+2*len(x))
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*len(x)))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(2*rate))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*len(x)))
	for i, v := range x {
		s := math.Max(-32768, math.Min(32767, math.Round(float64(v)*32768)))
		binary.LittleEndian.PutUint16(b[44+2*i:], uint16(int16(s)))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func cmpTestRead(t *testing.T, path string) []float32 {
	t.Helper()
	c, err := audio.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.Channels[0]
}

// cmpTestFixtures writes the candidate files used below into a temporary
// directory.
func cmpTestFixtures(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	x := cmpTestRead(t, cmpTestGoldenWAV)

	raw, err := os.ReadFile(cmpTestGoldenWAV)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p("copy.wav"), raw, 0o644)

	// −60 dB (re the RMS) white noise.
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	sigma := math.Sqrt(e/float64(len(x))) * 1e-3
	rng := rand.New(rand.NewPCG(60, 60))
	noisy := make([]float32, len(x))
	for i, v := range x {
		noisy[i] = v + float32(sigma*rng.NormFloat64())
	}
	cmpTestWriteWAV(t, p("noise60.wav"), noisy, 24000)

	shifted := make([]float32, len(x))
	copy(shifted[240:], x) // 10 ms late
	cmpTestWriteWAV(t, p("shift10ms.wav"), shifted, 24000)
	cmpTestWriteWAV(t, p("short.wav"), x[:len(x)-1920], 24000)
	cmpTestWriteWAV(t, p("rate16k.wav"), x, 16000)

	os.WriteFile(p("corrupt.wav"), []byte("RIFF\x10\x00\x00\x00WAVEjunkjunkjunk"), 0o644)
	os.WriteFile(p("truncated.wav"), raw[:1000], 0o644)
	os.WriteFile(p("notwav.wav"), []byte(`["PAD"]`), 0o644)

	var tokens []string
	gj, _ := os.ReadFile(cmpTestGoldenJSON)
	if err := json.Unmarshal(gj, &tokens); err != nil {
		t.Fatal(err)
	}
	tokens[5] = " changed"
	changed, _ := json.Marshal(tokens)
	os.WriteFile(p("changed.json"), changed, 0o644)
	os.WriteFile(p("bad.json"), []byte(`["PAD", " Hello"`), 0o644)
	os.WriteFile(p("numbers.json"), []byte(`[1, 2, 3]`), 0o644)
	os.WriteFile(p("object.json"), []byte(`{"text": ["PAD"]}`), 0o644)

	m := map[string]string{"dir": dir}
	for _, n := range []string{"copy.wav", "noise60.wav", "shift10ms.wav", "short.wav", "rate16k.wav",
		"corrupt.wav", "truncated.wav", "notwav.wav", "changed.json", "bad.json", "numbers.json", "object.json"} {
		m[n] = p(n)
	}
	return m
}

func TestCompareCLI(t *testing.T) {
	f := cmpTestFixtures(t)
	ref := []string{"--reference", cmpTestGoldenWAV}
	refText := []string{"--reference-text", cmpTestGoldenJSON}
	cat := func(a ...[]string) []string {
		var out []string
		for _, x := range a {
			out = append(out, x...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  string // substring of stdout
		message string // substrings of the error message, "|"-separated
	}{
		{"identical", cat(ref, []string{"--candidate", f["copy.wav"]}), 0, "verdict: EXACT", ""},
		{"identical with text", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", cmpTestGoldenJSON}), 0, "verdict: EXACT", ""},
		{"-60 dB noise", cat(ref, []string{"--candidate", f["noise60.wav"]}), 0, "verdict: EQUIVALENT", ""},
		{"-60 dB noise, strict SNR", cat(ref, []string{"--candidate", f["noise60.wav"], "--min-snr-db", "70"}), 1, "verdict: DIFFERENT", "SNR"},
		{"10 ms shift", cat(ref, []string{"--candidate", f["shift10ms.wav"]}), 1, "verdict: DIFFERENT", "shift10ms.wav|SNR|log-mel"},
		{"different signal", cat(ref, []string{"--candidate", cmpTestInputWAV}), 1, "verdict: DIFFERENT", "input.wav"},
		{"shorter", cat(ref, []string{"--candidate", f["short.wav"]}), 1, "length difference      -1920", "length differs"},
		{"changed token", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", f["changed.json"]}), 1, "first differing token  5", "edit distance 1"},
		{"changed token allowed", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", f["changed.json"], "--max-text-edits", "1"}), 0, "verdict: EQUIVALENT", ""},
		// Bad input: exit 2, one line naming the file.
		{"missing reference", []string{"--reference", "nope.wav", "--candidate", f["copy.wav"]}, 2, "", "reference WAV nope.wav does not exist"},
		{"missing candidate", cat(ref, []string{"--candidate", filepath.Join(f["dir"], "nope.wav")}), 2, "", "candidate WAV|nope.wav|does not exist"},
		{"corrupt candidate", cat(ref, []string{"--candidate", f["corrupt.wav"]}), 2, "", "cannot read candidate WAV|corrupt.wav"},
		{"truncated candidate", cat(ref, []string{"--candidate", f["truncated.wav"]}), 2, "", "truncated.wav|truncated data chunk"},
		{"not a WAV", []string{"--reference", f["notwav.wav"], "--candidate", f["copy.wav"]}, 2, "", "reference WAV|notwav.wav|not a WAV file"},
		{"sample rates differ", cat(ref, []string{"--candidate", f["rate16k.wav"]}), 2, "", "sample rates differ|24000 Hz|16000 Hz"},
		{"bad JSON", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", f["bad.json"]}), 2, "", "candidate transcript|bad.json|not a JSON list of strings"},
		{"JSON numbers", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", f["numbers.json"]}), 2, "", "numbers.json|not a JSON list of strings"},
		{"JSON object", cat(ref, []string{"--reference-text", f["object.json"], "--candidate", f["copy.wav"], "--candidate-text", cmpTestGoldenJSON}), 2, "", "reference transcript|object.json"},
		{"missing transcript", cat(ref, refText, []string{"--candidate", f["copy.wav"], "--candidate-text", "nope.json"}), 2, "", "candidate transcript nope.json does not exist"},
		{"one transcript only", cat(ref, refText, []string{"--candidate", f["copy.wav"]}), 2, "", "must be given together"},
		{"no candidate", ref, 2, "", "--reference and --candidate"},
		{"bad flag value", cat(ref, []string{"--candidate", f["copy.wav"], "--min-snr-db", "lots"}), 2, "", "min-snr-db"},
		{"unknown flag", cat(ref, []string{"--candidate", f["copy.wav"], "--frobnicate"}), 2, "", "frobnicate"},
		{"negative edits", cat(ref, []string{"--candidate", f["copy.wav"], "--max-text-edits", "-1"}), 2, "", "invalid thresholds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, msg := cmpTestRun(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; message %q\nstdout:\n%s", code, tc.code, msg, stdout)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if tc.message == "" {
				if msg != "" {
					t.Errorf("unexpected message %q", msg)
				}
				return
			}
			for _, s := range strings.Split(tc.message, "|") {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			if tc.code == 2 && stdout != "" {
				t.Errorf("bad input printed a table:\n%s", stdout)
			}
		})
	}
}

func TestCompareCLIReportAndPlot(t *testing.T) {
	f := cmpTestFixtures(t)
	report := filepath.Join(f["dir"], "r.json")
	plot := filepath.Join(f["dir"], "p.png")

	code, _, msg := cmpTestRun(t, "--reference", cmpTestGoldenWAV, "--candidate", f["copy.wav"],
		"--reference-text", cmpTestGoldenJSON, "--candidate-text", cmpTestGoldenJSON, "--report", report)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var r map[string]any
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, data)
	}
	au := r["audio"].(map[string]any)
	if r["verdict"] != "exact" || r["pass"] != true || au["snr_db"] != "+Inf" || au["sample_exact"] != true ||
		au["first_diff_frame"] != -1.0 || r["text"].(map[string]any)["edit_distance"] != 0.0 {
		t.Errorf("exact report: %s", data)
	}

	code, _, _ = cmpTestRun(t, "--reference", cmpTestGoldenWAV, "--candidate", f["shift10ms.wav"],
		"--report", report, "--plot", plot, "--max-mel-distance", "0.5")
	if code != 1 {
		t.Fatalf("shifted: exit %d", code)
	}
	data, _ = os.ReadFile(report)
	r = nil
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	au = r["audio"].(map[string]any)
	th := r["thresholds"].(map[string]any)
	if r["verdict"] != "different" || au["first_diff_frame"] != 0.0 || au["snr_db"].(float64) > 10 ||
		th["max_mel_distance_db"] != 0.5 || th["min_snr_db"] != 40.0 || len(au["frames_over_threshold"].([]any)) != 39 {
		t.Errorf("shifted report: %s", data)
	}
	pf, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 800 {
		t.Errorf("plot size %v", b)
	}
	ents, _ := os.ReadDir(f["dir"])
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}

	// An unwritable report path is bad input (exit 2), after the table.
	code, _, msg = cmpTestRun(t, "--reference", cmpTestGoldenWAV, "--candidate", f["copy.wav"],
		"--report", filepath.Join(f["dir"], "missing", "r.json"))
	if code != 2 || !strings.Contains(msg, "cannot write report") {
		t.Errorf("unwritable report: exit %d, %q", code, msg)
	}
}

// Every channel is compared: stereo against its own left channel as mono
// is a difference (the channel count), and a stereo file whose right
// channel differs is not exact either; the same stereo file is exact.
func TestCompareCLIChannels(t *testing.T) {
	dir := t.TempDir()
	const rate, n = 24000, 4800
	left, right := make([]float32, n), make([]float32, n)
	for i := range left {
		left[i] = float32(int16(3000*math.Sin(float64(i)*0.05))) / 32768
		right[i] = float32(int16(2000*math.Sin(float64(i)*0.11))) / 32768
	}
	stereo := func(path string, l, r []float32) {
		b := make([]byte, 44+4*n)
		copy(b, "RIFF")
		binary.LittleEndian.PutUint32(b[4:], uint32(36+4*n))
		copy(b[8:], "WAVEfmt ")
		binary.LittleEndian.PutUint32(b[16:], 16)
		binary.LittleEndian.PutUint16(b[20:], 1)
		binary.LittleEndian.PutUint16(b[22:], 2)
		binary.LittleEndian.PutUint32(b[24:], rate)
		binary.LittleEndian.PutUint32(b[28:], 4*rate)
		binary.LittleEndian.PutUint16(b[32:], 4)
		binary.LittleEndian.PutUint16(b[34:], 16)
		copy(b[36:], "data")
		binary.LittleEndian.PutUint32(b[40:], uint32(4*n))
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[44+4*i:], uint16(int16(math.Round(float64(l[i])*32768))))
			binary.LittleEndian.PutUint16(b[46+4*i:], uint16(int16(math.Round(float64(r[i])*32768))))
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, st2, mono := dir+"/st.wav", dir+"/st2.wav", dir+"/mono.wav"
	stereo(st, left, right)
	stereo(st2, left, left)
	cmpTestWriteWAV(t, mono, left, rate)
	if code, _, msg := cmpTestRun(t, "--reference", st, "--candidate", st); code != 0 {
		t.Fatalf("a stereo file against itself: exit %d: %s", code, msg)
	}
	code, _, msg := cmpTestRun(t, "--reference", st, "--candidate", mono)
	if code != compareExitDifferent || !strings.Contains(msg, "channel count differs") {
		t.Fatalf("stereo against mono: exit %d: %s", code, msg)
	}
	if code, _, msg := cmpTestRun(t, "--reference", st, "--candidate", st2); code != compareExitDifferent {
		t.Fatalf("stereo with another right channel: exit %d: %s", code, msg)
	}
}

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/hub/hubtest"
	"github.com/pp-offline/pp-offline/infer/job"
)

// tinyHub serves the tiny fixtures under the real repo's file names.
func tinyHub(t *testing.T) *hubtest.Server {
	t.Helper()
	read := func(name string) []byte {
		data, err := os.ReadFile(tiny + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	voices := map[string][]byte{}
	for _, v := range []string{"TINYF0.pt", "TINYF0.wav"} {
		voices[v] = read("voices/" + v)
	}
	s := hubtest.New(job.DefaultRepo, map[string][]byte{
		job.MoshiName:     read("model.safetensors"),
		job.MimiName:      read("mimi.safetensors"),
		job.TokenizerName: read("tokenizer.model"),
		"config.json":     read("config.json"),
		"voices.tgz":      hubtest.VoicesTGZ(voices),
	})
	s.SetAccess("hf_e2e", true)
	t.Cleanup(s.Close)
	return s
}

// hubEnv is the environment of a user with HF_HOME=home talking to s.
func hubEnv(s *hubtest.Server, home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HF_HOME="+home, "HF_ENDPOINT="+s.Endpoint(), "HF_TOKEN=hf_e2e")
	return append(env, extra...)
}

func runWithEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = env
	return runCmd(t, cmd)
}

// The users' command, with no model flags.
func hubArgs(outDir string) []string {
	return []string{"--input-wav", tiny + "input.wav", "--voice-prompt", "TINYF0.pt", "--greedy", "--device", "cpu",
		"--output-wav", filepath.Join(outDir, "out.wav"), "--output-text", filepath.Join(outDir, "out.json")}
}

// A fresh machine: the model files, config.json and voices.tgz are
// downloaded, voices/ extracted, and the run gives the transcript and audio
// of the run on the files given by path. The second run sends one request: the HEAD that revalidates the cached branch, as huggingface_hub does.
func TestHubColdCacheRunsLikeDirectPaths(t *testing.T) {
	s := tinyHub(t)
	home := t.TempDir()
	direct := t.TempDir()
	if _, stderr, code := run(t, tinyArgs(direct, "--greedy", "--quiet")...); code != 0 {
		t.Fatalf("direct run: exit %d: %s", code, stderr)
	}
	for i, want := range []string{"downloading", ""} {
		out := t.TempDir()
		before := len(s.Requests())
		_, stderr, code := runWithEnv(t, hubEnv(s, home), hubArgs(out)...)
		if code != 0 {
			t.Fatalf("run %d: exit %d:\n%s", i, code, stderr)
		}
		for _, f := range []string{"out.json", "out.wav"} {
			got, _ := os.ReadFile(filepath.Join(out, f))
			ref, _ := os.ReadFile(filepath.Join(direct, f))
			if len(got) == 0 || !bytes.Equal(got, ref) {
				t.Fatalf("run %d: %s differs from the direct-path run", i, f)
			}
		}
		if want != "" && !strings.Contains(stderr, want) || !strings.Contains(stderr, "(beside the weights)") {
			t.Fatalf("run %d log:\n%s", i, stderr)
		}
		t.Logf("run %d:\n%s", i, stderr)
		if n := len(s.Requests()) - before; i == 1 && n != 1 {
			t.Fatalf("warm cache: %d requests, want the one HEAD that revalidates the branch", n)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "hub", "models--nvidia--personaplex-7b-v1", "snapshots", s.Commit, "voices", "TINYF0.pt")); err != nil {
		t.Fatal(err)
	}
}

// The batch recipe: `pp-offline download` on a login node, then
// HF_HUB_OFFLINE=1 runs that send nothing; offline on an empty cache, the
// error lists every missing file.
func TestHubDownloadThenOffline(t *testing.T) {
	s := tinyHub(t)
	home := t.TempDir()
	out := t.TempDir()
	_, stderr, code := runWithEnv(t, hubEnv(s, home, "HF_HUB_OFFLINE=1"), hubArgs(out)...)
	last := strings.TrimSpace(stderr)
	if code == 0 || strings.Contains(last, "\n") || len(s.Requests()) != 0 {
		t.Fatalf("exit %d, %d requests:\n%s", code, len(s.Requests()), stderr)
	}
	for _, f := range []string{job.MoshiName, job.MimiName, job.TokenizerName, "voices.tgz"} {
		if !strings.Contains(last, f) {
			t.Fatalf("the offline error does not list %s: %s", f, last)
		}
	}
	t.Log(last)
	stdout, stderr, code := runWithEnv(t, hubEnv(s, home), "download", "--quiet")
	snapDir := filepath.Join(home, "hub", "models--nvidia--personaplex-7b-v1", "snapshots", s.Commit)
	if code != 0 || strings.TrimSpace(stdout) != snapDir || stderr != "" {
		t.Fatalf("download: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// What `huggingface-cli download` leaves: voices.tgz, no voices/.
	if err := os.RemoveAll(filepath.Join(snapDir, "voices")); err != nil {
		t.Fatal(err)
	}
	before := len(s.Requests())
	if _, stderr, code := runWithEnv(t, hubEnv(s, home, "HF_HUB_OFFLINE=1"), hubArgs(out)...); code != 0 || !strings.Contains(stderr, "extracted voices.tgz") {
		t.Fatalf("offline run: exit %d:\n%s", code, stderr)
	}
	if stdout, _, code := runWithEnv(t, hubEnv(s, home, "HF_HUB_OFFLINE=1"), "download"); code != 0 || strings.TrimSpace(stdout) != snapDir {
		t.Fatalf("offline download check: exit %d, %q", code, stdout)
	}
	if n := len(s.Requests()) - before; n != 0 {
		t.Fatalf("offline runs sent %d requests", n)
	}
}

// A gated repo whose licence the token's account has not accepted: one line
// that says where to accept it; no token at all: one line that says to set
// HF_TOKEN.
func TestHubGatedRefusal(t *testing.T) {
	s := tinyHub(t)
	s.SetAccess("hf_e2e", false)
	_, stderr, code := runWithEnv(t, hubEnv(s, t.TempDir()), hubArgs(t.TempDir())...)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if code == 0 || !strings.Contains(last, "403") || !strings.Contains(last, "accept its licence at "+s.Endpoint()+"/"+job.DefaultRepo) {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	s.SetAccess("hf_e2e", true)
	env := append(hubEnv(s, t.TempDir()), "HF_TOKEN=")
	_, stderr, code = runWithEnv(t, env, hubArgs(t.TempDir())...)
	lines = strings.Split(strings.TrimSpace(stderr), "\n")
	if last = lines[len(lines)-1]; code == 0 || !strings.Contains(last, "401") || !strings.Contains(last, "set HF_TOKEN") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// SIGINT during a download that hangs stops the run (exit 130), leaving the
// partial blob for the next run to resume.
func TestHubInterruptDuringDownload(t *testing.T) {
	s := tinyHub(t)
	s.Block(job.MoshiName, 100_000)
	home := t.TempDir()
	cmd := exec.Command(binPath, hubArgs(t.TempDir())...)
	cmd.Env = hubEnv(s, home)
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(home, "hub", "models--nvidia--personaplex-7b-v1", "blobs")
	for i := 0; ; i++ { // until the hanging transfer has written its first bytes
		if i == 6000 {
			cmd.Process.Kill()
			t.Fatalf("the download never started:\n%s", e.String())
		}
		if m, _ := filepath.Glob(filepath.Join(blobs, "*.incomplete")); len(m) == 1 {
			if st, err := os.Stat(m[0]); err == nil && st.Size() == 100_000 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(e.String(), "interrupted") {
		t.Fatalf("exit %v:\n%s", err, e.String())
	}
}

package voices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsEmbeddings reports whether path names saved voice-prompt embeddings (a
// `.pt` file) rather than audio to encode, the test offline.py makes with
// voice_prompt_path.endswith('.pt'). Unlike the reference the extension is
// matched case-insensitively (the reference would try to decode "X.PT" as
// audio and fail).
func IsEmbeddings(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".pt")
}

// voiceExts are the extensions listed as available voices.
var voiceExts = []string{".pt", ".wav"}

// Resolve finds the voice prompt file. Like offline.py, voicePrompt is a file
// name joined to voicePromptDir (os.path.join: an absolute voicePrompt is
// used as is); failing that, voicePrompt is also accepted as a path to a file
// on its own (relative to the working directory). When neither exists the
// one-line error lists the voices (.pt and .wav files) found in the
// directory.
func Resolve(voicePrompt, voicePromptDir string) (string, error) {
	if voicePrompt == "" {
		return "", errors.New("no voice prompt given")
	}
	var tried []string
	try := func(p string) (string, bool, error) {
		for _, t := range tried {
			if t == p {
				return "", false, nil
			}
		}
		tried = append(tried, p)
		st, err := os.Stat(p)
		if err != nil {
			return "", false, nil
		}
		if st.IsDir() {
			return "", false, fmt.Errorf("voice prompt %q is a directory, not a file", p)
		}
		return p, true, nil
	}
	if voicePromptDir != "" {
		cand := voicePrompt
		if !filepath.IsAbs(voicePrompt) {
			cand = filepath.Join(voicePromptDir, voicePrompt)
		}
		if p, ok, err := try(cand); ok || err != nil {
			return p, err
		}
	}
	if p, ok, err := try(voicePrompt); ok || err != nil {
		return p, err
	}

	if voicePromptDir == "" {
		return "", fmt.Errorf("voice prompt %q not found (no voice prompt directory given)", voicePrompt)
	}
	st, err := os.Stat(voicePromptDir)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("voice prompt %q not found: voice prompt directory %q does not exist", voicePrompt, voicePromptDir)
	}
	voices := List(voicePromptDir)
	avail := "it holds no .pt or .wav files"
	if len(voices) > 0 {
		const show = 40
		if len(voices) > show {
			avail = fmt.Sprintf("available: %s, … (%d more)", strings.Join(voices[:show], ", "), len(voices)-show)
		} else {
			avail = "available: " + strings.Join(voices, ", ")
		}
	}
	return "", fmt.Errorf("voice prompt %q not found in %q (tried %s); %s", voicePrompt, voicePromptDir, strings.Join(tried, ", "), avail)
}

// List returns the names of the voice prompt files (.pt and .wav, any case)
// directly inside dir, sorted; nil when dir cannot be read.
func List(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || e.Type()&fs.ModeType != 0 && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		ext := strings.ToLower(filepath.Ext(e.Name()))
		for _, x := range voiceExts {
			if ext == x {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out
}

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/hub"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/internal/fileio"
)

// The files of the Hugging Face repo beside the weights (loaders.py,
// offline.py): the model config and the voice prompts' archive, extracted
// into voices/ beside it.
const (
	configName    = "config.json"
	voicesArchive = "voices.tgz"
	voicesDir     = "voices"
)

// hubFlags select the repository the model files come from.
func hubFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "hf-repo", Value: job.DefaultRepo, Usage: "Hugging Face repo of the model files not given by flags: taken from the local hub cache, else downloaded (HF_TOKEN; HF_HUB_OFFLINE=1: never)"},
		&ucli.StringFlag{Name: "revision", Value: hub.DefaultRevision, Usage: "branch, tag or commit of --hf-repo"},
	}
}

// allHubFiles is everything the main job can take from the repo.
func allHubFiles() []hub.File {
	return []hub.File{{Name: job.MoshiName}, {Name: job.MimiName}, {Name: job.TokenizerName},
		{Name: configName, Optional: true}, {Name: voicesArchive}}
}

// hubSnapshot returns the snapshot of --hf-repo at --revision holding files:
// the local cache's when complete, else downloaded (with progress). When
// voices.tgz is among the files it is extracted into voices/ beside it.
// No files: no snapshot, nothing looked up.
func hubSnapshot(ctx context.Context, c *ucli.Context, log *logger, files []hub.File, fetch bool) (hub.Snapshot, error) {
	if len(files) == 0 {
		return hub.Snapshot{}, nil
	}
	dir, err := hub.CacheDir()
	if err != nil {
		return hub.Snapshot{}, err
	}
	client, err := hub.NewClient()
	if err != nil {
		return hub.Snapshot{}, err
	}
	client.UserAgent = "pp-offline/" + buildVersion
	prog := newDownloadProgress(c, log)
	if !c.Bool("quiet") {
		client.Logf = log.Infof
		client.Progress = prog.update
	}
	cache := hub.Cache{Dir: dir}
	repo, rev := c.String("hf-repo"), c.String("revision")
	var snap hub.Snapshot
	if fetch && !client.Offline {
		snap, err = client.Fetch(ctx, cache, repo, rev, files)
	} else {
		snap, err = client.Resolve(ctx, cache, repo, rev, files)
	}
	prog.finish()
	if err != nil {
		return snap, err
	}
	log.Infof("model files: %s at %s (commit %s) in %s", repo, rev, snap.Commit, snap.Dir)
	for _, f := range files {
		if f.Name == voicesArchive {
			arc := snap.Path(voicesArchive)
			dest := filepath.Join(snap.Dir, voicesDir)
			done, err := hub.ExtractOnce(arc, dest, hub.DefaultLimits)
			if err != nil {
				return snap, err
			}
			if done {
				log.Infof("extracted %s into %s", voicesArchive, dest)
			}
		}
	}
	return snap, nil
}

// givenFile checks a model file named by its flag.
func givenFile(path, flag string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %v", path, fileio.PathErr(err))
	}
	if st.IsDir() {
		return fmt.Errorf("%s: is a directory (%s wants a file)", path, flag)
	}
	return nil
}

// wantsVoiceDir tells whether the voice prompt is looked up in the repo's
// voices/: no --voice-prompt-dir, and not a path to an existing file (a bare
// name is joined to the folder first, as offline.py does).
func wantsVoiceDir(c *ucli.Context) bool {
	vp := c.String("voice-prompt")
	if c.String("voice-prompt-dir") != "" {
		return false
	}
	if strings.ContainsRune(vp, filepath.Separator) {
		if _, err := os.Stat(vp); err == nil {
			return false
		}
	}
	return true
}

// withSignals is a context that SIGINT/SIGTERM cancel; signalled names
// the signal that did (SIGINT if none was seen). A second signal exits at
// once (130 / 143). It is batch's handler without a grace period.
func withSignals() (ctx context.Context, stop func(), signalled func() os.Signal) {
	s := newBatchSignals(0, nil)
	return s.ctx, s.stop, s.signalled
}

// downloadProgress shows a transfer: a bar on a terminal, a log line every
// few seconds otherwise.
type downloadProgress struct {
	log  *logger
	tty  bool
	bar  *progressbar.ProgressBar
	file string
	last time.Time
}

func newDownloadProgress(c *ucli.Context, log *logger) *downloadProgress {
	if c.Bool("quiet") {
		return nil
	}
	return &downloadProgress{log: log, tty: isTerminal(log.w)}
}

func (p *downloadProgress) update(file string, done, total int64) {
	if p == nil {
		return
	}
	if file != p.file {
		p.finish()
		p.file, p.last = file, time.Now()
		if p.tty {
			p.bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(p.log.w),
				progressbar.OptionSetDescription(file),
				progressbar.OptionShowBytes(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())
			p.log.attachBar(p.bar)
		}
	}
	if p.bar != nil {
		p.bar.Set64(done)
		return
	}
	if time.Since(p.last) >= 5*time.Second || (done == total && done > 0) {
		p.last = time.Now()
		pct := ""
		if total > 0 {
			pct = fmt.Sprintf(" (%d%%)", done*100/total)
		}
		p.log.Infof("%s: %s of %s%s", file, hub.FormatBytes(done), hub.FormatBytes(total), pct)
	}
}

func (p *downloadProgress) finish() {
	if p != nil && p.bar != nil {
		p.log.attachBar(nil)
		p.bar.Finish()
		p.bar = nil
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	ucli "github.com/urfave/cli/v2"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/batchjob"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"github.com/pp-offline/pp-offline/voices"
)

func init() {
	register(&ucli.Command{
		Name:  "batch",
		Usage: "run many conversations with the weights loaded once: a JSONL manifest or a folder of WAVs; resumes, shards (Slurm, Kubernetes), reports",
		UsageText: "pp-offline batch --manifest jobs.jsonl [--report report.json] [--batch-size B] [--shard i/n] [model flags] [per-item defaults]\n" +
			"pp-offline batch --input-dir in/ --output-dir out/ [--recursive] --voice-prompt NATF2.pt [...]   (README: \"Batch jobs\")",
		Flags:        batchFlags(),
		Action:       runBatch,
		OnUsageError: func(_ *ucli.Context, err error, _ bool) error { return batchUsage{err} },
	})
}

// batchFlags: the main command's flags but its per-run files (a
// manifest's input_wav, output_wav, output_text and output_mix), and the
// batch's own.
func batchFlags() []ucli.Flag {
	var f []ucli.Flag
	for _, fl := range mainFlags() {
		switch fl.Names()[0] {
		case "input-wav", "output-wav", "output-text", "output-mix":
			continue
		}
		f = append(f, fl)
	}
	return append(f,
		&ucli.StringFlag{Name: "manifest", Usage: "JSONL file: one item a line (keys: " + strings.Join(batchjob.FieldNames(), ", ") + "); relative paths are relative to its folder"},
		&ucli.StringFlag{Name: "input-dir", Usage: "run every audio file of this folder: every file named as audio (.wav, .flac, .mp3, .ogg, …: one that does not decode fails as an item) and every other file whose content is audio the reader takes (instead of --manifest)"},
		&ucli.StringFlag{Name: "output-dir", Usage: "outputs of --input-dir: <dir>/<relative path>.wav (.flac with --output-format flac) and .json (with --manifest: for lines without output_wav / output_text)"},
		&ucli.BoolFlag{Name: "recursive", Usage: "with --input-dir: subfolders too"},
		&ucli.IntFlag{Name: "batch-size", Usage: "conversations run in lockstep (default: what the free memory holds, said in the log)"},
		&ucli.BoolFlag{Name: "force", Usage: "redo items whose outputs are already complete"},
		&ucli.StringFlag{Name: "report", Usage: "write a JSON summary (per item: status, reason, frames, seconds, seed) here, also when interrupted"},
		&ucli.StringFlag{Name: "shard", Usage: "run items whose index ≡ i (mod n), as i/n (default: from a Slurm array or a Kubernetes Indexed Job, else all)"},
		&ucli.DurationFlag{Name: "grace", Value: batchjob.DefaultGrace, Usage: "on a first SIGINT/SIGTERM, no new items start and the conversations in flight finish if the measured speed says they can within this time (default fits Slurm's --signal=B:TERM@120; 0: stop at once); a second signal stops at once"},
		&ucli.IntFlag{Name: "prompt-cache", Value: job.DefaultPromptCache, Usage: "post-prompt states the job keeps for items with the same voice and text prompt (their prompt phases run once; outputs identical; 0: none)"},
		&ucli.IntFlag{Name: "shard-count", Usage: "the number of shards: of a Slurm array (the task id is the shard, so reruns of some tasks run their shards) or a Kubernetes Indexed Job (with JOB_COMPLETION_INDEX; default $" + batchjob.ShardEnv + ")"},
	)
}

// maxPromptCache bounds --prompt-cache (the states are also bounded in
// bytes by the job).
const maxPromptCache = 64

// batchUsage is a bad command line or manifest: exit 2, before any model loads.
type batchUsage struct{ err error }

func (e batchUsage) Error() string { return e.err.Error() }
func (e batchUsage) ExitCode() int { return 2 }

// batchFailed: some items failed (the others were written).
type batchFailed struct{ failed, total int }

func (e batchFailed) Error() string {
	return fmt.Sprintf("%d of %d items failed (each is named above; the others were written)", e.failed, e.total)
}
func (e batchFailed) ExitCode() int { return 1 }

func runBatch(c *ucli.Context) error {
	if c.NArg() > 0 {
		return batchUsage{fmt.Errorf("unexpected argument %q (see pp-offline batch --help)", c.Args().First())}
	}
	log := &logger{quiet: c.Bool("quiet"), w: c.App.ErrWriter}
	manifest, inDir, outDir := c.String("manifest"), c.String("input-dir"), c.String("output-dir")
	def := batchjob.Settings{
		VoicePrompt: c.String("voice-prompt"), TextPrompt: c.String("text-prompt"), Seed: c.Int64("seed"),
		TempAudio: c.Float64("temp-audio"), TempText: c.Float64("temp-text"),
		TopKAudio: c.Int("topk-audio"), TopKText: c.Int("topk-text"), Greedy: c.Bool("greedy"),
		OutputFormat: c.String("output-format"), OutputTextFormat: c.String("output-text-format"),
	}
	if c.IsSet("text-prompt") && c.IsSet("text-prompt-file") {
		return batchUsage{errors.New("--text-prompt and --text-prompt-file exclude each other: give one")}
	}
	readPrompt := readTextPrompt
	if p := c.String("text-prompt-file"); p != "" {
		// The default of every item (a line's text_prompt replaces it),
		// read now: a bad one is the flag's error, not a line's.
		text, err := readTextPrompt(p)
		if err != nil {
			return batchUsage{fmt.Errorf("--text-prompt-file %v", err)}
		}
		def.TextPrompt, def.TextPromptFile = "", p
		readPrompt = func(q string) (string, error) {
			if q == p {
				return text, nil
			}
			return readTextPrompt(q)
		}
	}
	var items []*batchjob.Item
	var err error
	switch {
	case (manifest == "") == (inDir == ""):
		if c.NumFlags() == 0 {
			return ucli.ShowSubcommandHelp(c)
		}
		return batchUsage{errors.New("give --manifest jobs.jsonl or --input-dir in/ --output-dir out/")}
	case c.Int("batch-size") < 0 || (c.IsSet("batch-size") && c.Int("batch-size") == 0) || c.Int("batch-size") > batchjob.MaxBatchFlag:
		return batchUsage{fmt.Errorf("--batch-size must be from 1 to %d, not %d", batchjob.MaxBatchFlag, c.Int("batch-size"))}
	case c.Int64("seed") < -1:
		return batchUsage{fmt.Errorf("--seed must be -1 (draw one) or ≥ 0, not %d", c.Int64("seed"))}
	case c.Duration("grace") < 0 || c.Duration("grace") > batchjob.MaxGrace:
		return batchUsage{fmt.Errorf("--grace must be from 0 to %s, not %s", batchjob.MaxGrace, c.Duration("grace"))}
	case c.Int("shard-count") < 0 || c.Int("shard-count") > batchjob.MaxItems:
		return batchUsage{fmt.Errorf("--shard-count must be from 1 to %d, not %d", batchjob.MaxItems, c.Int("shard-count"))}
	case c.Int("prompt-cache") < 0 || c.Int("prompt-cache") > maxPromptCache:
		return batchUsage{fmt.Errorf("--prompt-cache must be from 0 to %d, not %d", maxPromptCache, c.Int("prompt-cache"))}
	}
	// The per-item defaults follow the main command's rules (a manifest's
	// fields the same: batchjob.ReadManifest).
	if err := checkSampling(c); err != nil {
		return batchUsage{err}
	}
	if err := batchjob.CheckDefaults(def); err != nil {
		return batchUsage{err}
	}
	if manifest != "" {
		items, err = batchjob.ReadManifest(manifest, def, outDir)
	} else if outDir == "" {
		err = errors.New("--input-dir needs --output-dir")
	} else {
		var skipped []string
		// Every file named as audio, and every other file whose content
		// the reader takes (natively or through ffmpeg); the others are
		// listed as skipped.
		accept := func(head []byte) bool { return audio.Sniff(head) != "" }
		items, skipped, err = batchjob.ListDirAccept(inDir, outDir, c.Bool("recursive"), def, accept)
		if err == nil && len(skipped) > 0 {
			log.Infof("--input-dir: skipping %s (not audio the reader takes)", batchjob.SkippedList(skipped, 5))
		}
	}
	if err != nil {
		return batchUsage{err}
	}
	ins := map[string]string{} // other files the run reads: no output may be one
	for _, f := range []string{"config", "moshi-weight", "mimi-weight", "tokenizer"} {
		if p := c.String(f); p != "" {
			ins["--"+f] = p
		}
	}
	// Without --config the config.json beside the weights is read when it
	// exists: an input too (beside the hub's weights, it is checked once
	// they are found: run).
	if c.String("config") == "" && c.String("moshi-weight") != "" {
		if p := besideConfig(c.String("moshi-weight")); fileExists(p) {
			ins["the config beside --moshi-weight"] = p
		}
	}
	shard, err := batchjob.FindShard(c.String("shard"), c.Int("shard-count"), os.Getenv)
	if err != nil {
		return batchUsage{err}
	}
	outs := map[string]string{}
	reportPath := c.String("report")
	if reportPath != "" {
		outs["--report"] = reportPath
	}
	if err := batchjob.Check(items, manifest, ins, outs); err != nil {
		return batchUsage{err}
	}
	// Text prompt files are read now, by the main command's reader: a bad
	// one is refused before any model loads, naming its line.
	if err := batchjob.LoadTextPrompts(items, manifest, readPrompt); err != nil {
		return batchUsage{err}
	}
	if reportPath != "" {
		if err := fileio.CheckOutput(reportPath); err != nil {
			return batchUsage{fmt.Errorf("--report %v", err)}
		}
		// One report per shard: another shard's report is never replaced
		// (after it, by its content; while it runs, by its hold on the file).
		if err := batchjob.CheckReportShard(reportPath, shard); err != nil {
			return batchUsage{err}
		}
		lock, err := fileio.LockOutputs(reportPath)
		if err != nil {
			return batchUsage{fmt.Errorf("--report: %v (shards need a report file each)", err)}
		}
		defer lock.Unlock()
	}
	mine := shard.Select(items)
	log.Infof("shard %s (%s): %d of %d items", shard, shard.Source, len(mine), len(items))
	if removed, err := batchjob.CleanStale(mine); err != nil {
		return err
	} else if len(removed) > 0 {
		log.Infof("removed %d temporary files of an interrupted run (e.g. %s)", len(removed), removed[0])
	}
	if err := batchjob.PrepareOutputs(mine); err != nil {
		return batchUsage{err}
	}

	b := &batchRun{c: c, log: log, manifest: manifest, items: mine, report: batchjob.NewReport(mine), reportPath: reportPath}
	b.report.Manifest, b.report.InputDir, b.report.Shard, b.report.ShardSource = manifest, inDir, shard.String(), shard.Source
	return b.run()
}

// batchRun is one `pp-offline batch` job after its checks.
type batchRun struct {
	c          *ucli.Context
	log        *logger
	manifest   string
	items      []*batchjob.Item // this shard's
	report     *batchjob.Report
	reportPath string
	prog       *batchProgress
	fps        map[int]*batchjob.Fingerprint // what makes each item run, written with its outputs

	lastReport time.Time
}

func (b *batchRun) writeReport(final bool) error {
	if b.reportPath == "" {
		return nil
	}
	b.lastReport = time.Now()
	return b.report.Write(b.reportPath, final)
}

// queue resolves each item's voice (each distinct one once; an item whose
// voice is not found fails alone) and its fingerprint, and returns the
// items to run: one whose outputs are complete is skipped only when its
// fingerprint is the one it would be made with now (skipped counts them).
func (b *batchRun) queue(opts job.Options, voiceDir string, complete []bool) (queue []*job.Item, skipped int) {
	log := b.log
	// Voices: each distinct one resolved once; an item whose voice is not
	// found fails alone. An item whose outputs are complete is skipped only
	// when its fingerprint is the one it would be made with now.
	type voice struct {
		path string
		err  error
	}
	resolved := map[string]voice{}
	var redo []string
	redoWhy := map[string]string{}
	seedBase := time.Now().UnixNano()
	model := b.modelIdentity(opts)
	b.fps = map[int]*batchjob.Fingerprint{}
	for i, it := range b.items {
		key := fmt.Sprint(it.VoiceIsPath, "\x00", it.VoicePrompt)
		v, ok := resolved[key]
		if !ok {
			v.path, v.err = b.resolveVoice(it, voiceDir)
			resolved[key] = v
			if v.err == nil {
				log.Infof("voice prompt: %s", v.path)
			}
		}
		if v.err == nil {
			// A named pipe would block the job; the voice is an input.
			v.err = fileio.CheckInput(v.path)
		}
		if v.err != nil {
			b.failed(i, v.err)
			continue
		}
		fp := model
		fp.Input, fp.Voice, fp.TextPrompt = batchjob.IdentifyFile(it.InputWAV), batchjob.IdentifyFile(v.path), batchjob.HashString(it.TextPrompt)
		fp.Seed, fp.Greedy, fp.TempAudio, fp.TempText, fp.TopKAudio, fp.TopKText = it.Seed, it.Greedy, it.TempAudio, it.TempText, it.TopKAudio, it.TopKText
		fp.OutputFormat, fp.OutputTextFormat = it.OutputFormat, it.OutputTextFormat
		if it.OutputMix != "" {
			fp.OutputMix = it.OutputMix
			if r, err := filepath.Rel(filepath.Dir(it.OutputWAV), it.OutputMix); err == nil {
				fp.OutputMix = r
			}
		}
		b.fps[i] = &fp
		if complete[i] {
			why := batchjob.Stale(it, &fp)
			if why == "" {
				b.report.Set(i, batchjob.StatusSkipped, "outputs complete, made with the same settings", 0, 0, nil)
				skipped++
				continue
			}
			redo = append(redo, it.OutputWAV)
			redoWhy[it.OutputWAV] = why
		}
		seed := it.Seed
		if seed == -1 {
			seed = (seedBase + int64(it.Index)*0x9E3779B97F4A7C1) & (1<<53 - 1)
		}
		queue = append(queue, &job.Item{InputWAV: it.InputWAV, VoicePrompt: v.path, TextPrompt: it.TextPrompt,
			Greedy: it.Greedy, TempAudio: it.TempAudio, TempText: it.TempText, TopKAudio: it.TopKAudio, TopKText: it.TopKText,
			Seed: seed, Tag: i})
	}
	if skipped > 0 {
		log.Infof("skipping %d items whose outputs are complete and were made with these settings (--force redoes them)", skipped)
	}
	for _, l := range batchjob.RedoLines(redo, redoWhy, 5) {
		log.Infof("%s", l)
	}
	return queue, skipped
}

// fail ends the job on an error that stops it all; the report says so.
func (b *batchRun) fail(err error) error {
	b.report.Error = err.Error()
	if werr := b.writeReport(true); werr != nil {
		b.log.Warnf("report: %v", werr)
	}
	return err
}

func (b *batchRun) run() error {
	c, log := b.c, b.log
	force := c.Bool("force")
	complete := make([]bool, len(b.items))
	for i, it := range b.items {
		if !force {
			complete[i], _ = batchjob.Complete(it)
		}
	}
	sig := newBatchSignals(c.Duration("grace"), log)
	defer sig.stop()
	ctx := sig.ctx
	withVoices := c.String("voice-prompt-dir") == ""
	if withVoices {
		withVoices = false
		for _, it := range b.items {
			if !it.VoiceIsPath && !fileExists(it.VoicePrompt) && !fileExists(b.besideManifest(it.VoicePrompt)) {
				withVoices = true
			}
		}
	}
	// The model files are resolved before anything is skipped: they are
	// part of what made an output (its fingerprint).
	opts, voiceDir, err := jobOptions(ctx, c, log, withVoices)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return b.interrupted(sig.signalled(), "no output written (a download resumes where it stopped)")
		}
		return b.fail(err)
	}
	if dir := c.String("voice-prompt-dir"); dir != "" {
		voiceDir = dir
	}
	if opts.PromptCache = c.Int("prompt-cache"); opts.PromptCache == 0 {
		opts.PromptCache = -1 // none: job.Options' 0 is the default
	}
	// The model files may come from the hub's cache: known only now.
	fileio.AddInputs(opts.MoshiWeight, opts.MimiWeight, opts.Tokenizer, configFile(c, opts.MoshiWeight))

	queue, skipped := b.queue(opts, voiceDir, complete)
	if len(queue) == 0 {
		if skipped == len(b.items) {
			log.Infof("nothing to do")
		}
		return b.finished()
	}
	if !c.IsSet("threads") {
		// GOMAXPROCS honours the container's CPU quota (cgroup) since Go 1.25.
		opts.Device.Threads = runtime.GOMAXPROCS(0)
		log.Infof("threads %d (GOMAXPROCS: the CPUs this process may use, cgroup quota included; %d online)", opts.Device.Threads, runtime.NumCPU())
	}

	// Every file read is registered now (voices by name included): no
	// output may be one, checked before the model loads.
	for _, q := range queue {
		i := q.Tag.(int)
		if err := batchjob.CheckResolved(b.items[i:i+1], b.manifest); err != nil {
			return b.usage(err)
		}
	}
	if b.reportPath != "" {
		if err := fileio.CheckTarget(b.reportPath); err != nil {
			return b.usage(fmt.Errorf("--report %v", err))
		}
	}
	opts.BatchSize = min(c.Int("batch-size"), max(len(queue), 1))
	if opts.BatchSize == 0 {
		var why string
		opts.BatchSize, why = batchjob.ChooseBatch(batchjob.HostMemory(), fileSize(opts.MoshiWeight)+fileSize(opts.MimiWeight), opts.Config, len(queue), opts.Device.KVElemBytes())
		log.Infof("%s (--batch-size sets it)", why)
	} else {
		log.Infof("batch size %d (--batch-size)", opts.BatchSize)
	}
	b.report.BatchSize = opts.BatchSize

	var total float64
	for _, it := range queue {
		if s, err := batchjob.WAVSeconds(it.InputWAV, false); err == nil {
			total += s
		}
	}
	b.prog = newBatchProgress(c, log, len(b.items), b.report, total)
	if b.prog != nil {
		opts.Progress = b.prog
		defer b.prog.stop()
	}
	sig.running()
	grace := job.Graceful{Stop: sig.stopC, Finish: sig.finish}
	err = job.RunItemsGraceful(ctx, opts, grace, job.Items(queue...), b.done)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, job.ErrStopped) {
			n := b.report.CountsNow()
			return b.interrupted(sig.signalled(), fmt.Sprintf("%d items written, %d not finished (none half-written): rerun to resume", n.OK, n.NotRun))
		}
		return b.fail(err)
	}
	return b.finished()
}

// usage ends the job on a usage error found once the files are resolved
// (exit 2, nothing run); the report is not written (it may be the bad file).
func (b *batchRun) usage(err error) error {
	if b.prog != nil {
		b.prog.stop()
	}
	return batchUsage{err}
}

// finished ends a job that ran to its end: exit 0, or 1 when items failed.
func (b *batchRun) finished() error {
	if b.prog != nil {
		b.prog.stop()
	}
	n := b.report.CountsNow()
	if err := b.writeReport(true); err != nil {
		return err
	}
	b.log.Infof("done: %d ok, %d skipped, %d failed of %d items", n.OK, n.Skipped, n.Failed, len(b.items))
	if n.Failed > 0 {
		return batchFailed{n.Failed, len(b.items)}
	}
	return nil
}

func (b *batchRun) interrupted(sig os.Signal, what string) error {
	if b.prog != nil {
		b.prog.stop()
	}
	b.report.Interrupted = sig.String()
	if err := b.writeReport(true); err != nil {
		b.log.Warnf("report: %v", err)
	}
	return interrupted{sig: sig, what: what}
}

func (b *batchRun) besideManifest(name string) string {
	if b.manifest == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(b.manifest), name)
}

// resolveVoice: a path from the manifest as it is; a name in the voice
// prompt folder, else beside the manifest, else as a path.
func (b *batchRun) resolveVoice(it *batchjob.Item, dir string) (string, error) {
	if it.VoiceIsPath {
		return voices.Resolve(it.VoicePrompt, "")
	}
	p, err := voices.Resolve(it.VoicePrompt, dir)
	if err != nil && it.Line > 0 && fileExists(b.besideManifest(it.VoicePrompt)) {
		return b.besideManifest(it.VoicePrompt), nil
	}
	return p, err
}

func (b *batchRun) failed(i int, err error) {
	it := b.items[i]
	reason := strings.ReplaceAll(err.Error(), "\n", " ")
	b.report.Set(i, batchjob.StatusFailed, reason, 0, 0, nil)
	if b.prog != nil {
		b.prog.itemDone(fmt.Sprintf("failed %s: %s", it.Where(b.manifest), reason), true)
	} else { // --quiet still shows errors
		b.log.Errorf("failed %s: %s", it.Where(b.manifest), reason)
	}
}

// done writes one finished item's outputs (whole files, renamed into place).
func (b *batchRun) done(r job.ItemResult) {
	i := r.Item.Tag.(int)
	it := b.items[i]
	if r.Err == nil {
		wav, text, err := encodeOutputs(r.Result, it.OutputFormat, it.OutputTextFormat)
		fpPath := batchjob.FingerprintPath(it.OutputWAV)
		files := []fileio.File{{Path: it.OutputWAV, Data: wav}, {Path: it.OutputText, Data: text}}
		if err == nil && it.OutputMix != "" {
			var mix []byte
			mix, err = encodeMix(it.InputWAV, r.Result)
			files = append(files, fileio.File{Path: it.OutputMix, Data: mix})
		}
		var lock *fileio.Lock
		if err == nil {
			// Locked while written: another job writing the same item
			// cannot interleave its renames with ours (a mixed set).
			paths := []string{fpPath}
			for _, f := range files {
				paths = append(paths, f.Path)
			}
			lock, err = fileio.LockOutputs(paths...)
		}
		if err == nil {
			// The old fingerprint goes first and the new one is written
			// last, with the outputs' sizes and times as they landed: a
			// fingerprint on disk always describes the outputs beside it
			// (a kill in between leaves none: redone), and outputs that
			// anything rewrites later are redone too (batchjob.Stale).
			if err = fileio.CheckTarget(fpPath); err == nil {
				if rerr := os.Remove(fpPath); rerr != nil && !os.IsNotExist(rerr) {
					err = fmt.Errorf("%s: %v", fpPath, fileio.PathErr(rerr))
				}
			}
			if err == nil {
				err = fileio.WriteAllAtomic(files...)
			}
			if err == nil {
				if err = fileio.WriteAllAtomic(fileio.File{Path: fpPath, Data: b.fps[i].WithOutputs(it).Encode()}); err != nil {
					// A failed item leaves nothing of itself (a full disk).
					for _, f := range files {
						os.Remove(f.Path)
					}
				}
			}
			lock.Unlock()
		}
		r.Err = err
	}
	if r.Err != nil {
		b.failed(i, r.Err)
	} else {
		seed := r.Item.Seed
		secs := float64(len(r.Result.PCM)) / float64(r.Result.SampleRate)
		b.report.Set(i, batchjob.StatusOK, "", len(r.Result.Pieces), secs, &seed)
		b.prog.itemDone(fmt.Sprintf("ok %s → %s (%d frames, %.1f s)", it.Where(b.manifest), it.OutputWAV, len(r.Result.Pieces), secs), false)
	}
	if time.Since(b.lastReport) >= 30*time.Second {
		if err := b.writeReport(false); err != nil {
			b.log.Warnf("report: %v", err)
		}
	}
}

// encodeOutputs encodes a result as the audio and transcript of the given
// formats (--output-format: pcm16, float32 or flac, by encodeAudio;
// --output-text-format).
func encodeOutputs(res *job.Result, wavFormat, textFormat string) (wav, text []byte, err error) {
	var textBuf bytes.Buffer
	if wav, err = encodeAudio(res.PCM, res.SampleRate, wavFormat); err != nil {
		return nil, nil, err
	}
	if textFormat == "rich" {
		err = writeRichText(&textBuf, res)
	} else {
		err = writeTextList(&textBuf, res.Pieces)
	}
	return wav, textBuf.Bytes(), err
}

// modelIdentity is the part of every item's fingerprint that the job's
// flags and model files give.
func (b *batchRun) modelIdentity(o job.Options) batchjob.Fingerprint {
	cfg, _ := json.Marshal(o.Config)
	dtype := o.Device.ComputeDType
	if dtype == "" {
		dtype = "f32"
	}
	return batchjob.Fingerprint{Version: versionString(), Model: batchjob.IdentifyFile(o.MoshiWeight),
		Mimi: batchjob.IdentifyFile(o.MimiWeight), Tokenizer: batchjob.IdentifyFile(o.Tokenizer),
		Config: batchjob.HashString(string(cfg)), Weights: o.Quantize, Compute: dtype, KV: kvFingerprint(o.Device)}
}

// kvFingerprint is a fingerprint's KV field for --kv-dtype: "" for float32
// (the default, and what fingerprints from before the flag mean), else
// "bf16".
func kvFingerprint(d job.DeviceOptions) string {
	if d.KVElemBytes() == 2 {
		return "bf16"
	}
	return ""
}

// batchSignals is the batch's SIGINT/SIGTERM handling. Before the items
// run, the first signal cancels at once (nothing is in flight). Once they
// run, it closes stopC (no new item starts) and asks, through finish,
// whether the conversations in flight can end within the grace period
// (batchjob.GraceFits on the measured step time); the context is
// cancelled when they cannot, or when the grace period is over. A second
// signal exits at once (130 / 143). withSignals is this handler with no
// grace period.
type batchSignals struct {
	ctx    context.Context
	cancel context.CancelFunc
	stopC  chan struct{}
	grace  time.Duration
	log    *logger
	sigc   chan os.Signal

	mu      sync.Mutex
	got     os.Signal
	at      time.Time
	run     bool
	stopped sync.Once
}

func newBatchSignals(grace time.Duration, log *logger) *batchSignals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &batchSignals{ctx: ctx, cancel: cancel, stopC: make(chan struct{}), grace: grace, log: log, sigc: make(chan os.Signal, 2)}
	signal.Notify(s.sigc, os.Interrupt, syscall.SIGTERM)
	go s.loop()
	return s
}

func (s *batchSignals) loop() {
	var first os.Signal
	select {
	case sg, ok := <-s.sigc:
		if !ok {
			return
		}
		first = sg
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	s.got, s.at = first, time.Now()
	graceful := s.run && s.grace > 0
	s.mu.Unlock()
	if graceful {
		s.log.Infof("%v: no new items start (a second signal stops at once)", first)
		close(s.stopC)
		time.AfterFunc(s.grace, func() {
			if s.ctx.Err() == nil {
				s.log.Infof("the grace period (--grace %s) is over: stopping now", s.grace)
				s.cancel()
			}
		})
	} else {
		s.cancel()
	}
	if sg, ok := <-s.sigc; ok {
		code := 130
		if sg == syscall.SIGTERM {
			code = 143
		}
		fmt.Fprintf(os.Stderr, "pp-offline: %v again: stopped at once\n", sg)
		os.Exit(code)
	}
}

// running marks the items as started: from now on a first signal is graceful.
func (s *batchSignals) running() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run = true
}

// finish is job.Graceful's Finish: whether the conversations in flight
// can end within the grace period left.
func (s *batchSignals) finish(inFlight, frames int, step time.Duration) bool {
	s.mu.Lock()
	left := s.grace - time.Since(s.at)
	s.mu.Unlock()
	ok, why := batchjob.GraceFits(inFlight, frames, step, left)
	s.log.Infof("%s", why)
	return ok
}

// signalled is the first signal received (SIGINT when none was).
func (s *batchSignals) signalled() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		return os.Interrupt
	}
	return s.got
}

func (s *batchSignals) stop() {
	s.stopped.Do(func() {
		signal.Stop(s.sigc)
		s.cancel()
		close(s.sigc)
	})
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// batchProgress reports the whole batch: on a terminal one bar (items done
// / failed / skipped, audio seconds, aggregate real-time factor, ETA);
// otherwise a timestamped line per finished item and every 30 s.
type batchProgress struct {
	mu        sync.Mutex
	log       *logger
	bar       *progressbar.ProgressBar
	report    *batchjob.Report
	items     int
	total     float64 // audio seconds to run
	frameSecs float64
	frames    int
	start     time.Time // first frame
	loaded    bool
	quit      chan struct{}
	stopOnce  sync.Once
}

func newBatchProgress(c *ucli.Context, log *logger, items int, rep *batchjob.Report, total float64) *batchProgress {
	if c.Bool("quiet") {
		return nil
	}
	p := &batchProgress{log: log, report: rep, items: items, total: total, quit: make(chan struct{})}
	if isTerminal(log.w) {
		p.bar = progressbar.NewOptions(max(1, int(total*10)),
			progressbar.OptionSetWriter(log.w),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
		log.attachBar(p.bar) // cleared before every log line
	} else {
		go func() {
			t := time.NewTicker(30 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					p.mu.Lock()
					p.line(p.status())
					p.mu.Unlock()
				case <-p.quit:
					return
				}
			}
		}()
	}
	return p
}

func (p *batchProgress) stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() {
		close(p.quit)
		if p.bar != nil {
			p.log.attachBar(nil)
			p.bar.Finish()
		}
	})
}

// line writes one timestamped log line.
func (p *batchProgress) line(msg string) {
	p.log.Infof("%s", msg)
}

// status is the batch's state in one line (p.mu held).
func (p *batchProgress) status() string {
	n := p.report.CountsNow()
	done := min(float64(p.frames)*p.frameSecs, p.total) // the last frame of an item is padded
	s := fmt.Sprintf("%d/%d items: %d ok, %d failed, %d skipped; %.1f/%.1f s of audio", n.OK+n.Failed+n.Skipped, p.items, n.OK, n.Failed, n.Skipped, done, p.total)
	if done > 0 {
		el := time.Since(p.start).Seconds()
		s += fmt.Sprintf(", real-time factor %.2f", el/done)
		if left := p.total - done; left > 0 {
			s += ", ETA " + time.Duration(left*el/done*1e9).Round(time.Second).String()
		}
	}
	return s
}

// itemDone reports a finished item (warn: a failure).
func (p *batchProgress) itemDone(msg string, warn bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		if warn {
			p.log.Warnf("%s", msg) // the logger clears the bar first
		}
		p.updateBar()
		return
	}
	if warn {
		p.log.Warnf("%s; %s", msg, p.status())
		return
	}
	p.line(msg + "; " + p.status())
}

func (p *batchProgress) updateBar() {
	p.bar.Describe(p.status())
	p.bar.Set(int(float64(p.frames) * p.frameSecs * 10))
}

// Phase implements job.Progress: the loading phases are logged, the
// per-item ones are not.
func (p *batchProgress) Phase(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded && strings.HasPrefix(name, "loading") {
		p.log.Infof("%s", name)
	}
}

// Start implements job.Progress: an item joins the batch.
func (p *batchProgress) Start(_ int, frameSecs float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		p.loaded, p.start = true, time.Now()
	}
	p.frameSecs = frameSecs
}

// Frame implements job.Progress: one more frame of one conversation.
func (p *batchProgress) Frame(int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frames++
	if p.bar != nil && p.frames%8 == 0 {
		p.updateBar()
	}
}

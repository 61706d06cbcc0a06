package cli

import (
	"context"
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func init() {
	register(&ucli.Command{
		Name:      "download",
		Usage:     "fetch the model files of --hf-repo into the Hugging Face cache, for runs without network",
		UsageText: "pp-offline download [--hf-repo R] [--revision V]",
		Description: "Asks the hub which commit --revision names now and makes every file the main job takes\n" +
			"from the repo present in the Hugging Face cache, laid out as huggingface_hub does (blobs,\n" +
			"snapshots/<commit>, refs/<revision>), then extracts voices.tgz into voices/ beside it. Prints\n" +
			"the snapshot folder. The gated model needs its licence accepted and HF_TOKEN set (or the token\n" +
			"file of `huggingface-cli login`). With HF_HUB_OFFLINE=1 it sends nothing and checks that the\n" +
			"cache is complete. Run it on a login node, then run the job on workers with HF_HUB_OFFLINE=1.",
		Flags:  append(hubFlags(), &ucli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "log errors only"}),
		Action: runDownload,
	})
}

func runDownload(c *ucli.Context) error {
	if c.NArg() > 0 {
		return unexpectedArgs(c, "download")
	}
	log := newLogger(c)
	ctx, stop, signalled := withSignals()
	defer stop()
	snap, err := hubSnapshot(ctx, c, log, allHubFiles(), true)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{sig: signalled(), what: "the download resumes where it stopped when run again"}
		}
		return err
	}
	_, err = fmt.Fprintln(c.App.Writer, snap.Dir)
	return err
}

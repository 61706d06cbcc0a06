//go:build !unix

package audio

import (
	"io"
	"os/exec"
)

// ffmpegInput feeds the input on stdin.
func ffmpegInput(cmd *exec.Cmd, r io.ReaderAt, size int64) string {
	return ffmpegStdin(cmd, r, size)
}

// killGroup: cancellation kills the process (the default).
func killGroup(cmd *exec.Cmd) {}

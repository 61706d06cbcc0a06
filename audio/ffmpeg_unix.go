//go:build unix

package audio

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// ffmpegInput hands the input to the child: an open file as descriptor 3
// (read by ffmpeg as /dev/fd/3, seekable, so MP4 files with their index at
// the end work), anything else on stdin.
func ffmpegInput(cmd *exec.Cmd, r io.ReaderAt, size int64) string {
	if f, ok := r.(*os.File); ok && (runtime.GOOS == "linux" || runtime.GOOS == "darwin") {
		cmd.ExtraFiles = []*os.File{f}
		return "file:/dev/fd/3"
	}
	return ffmpegStdin(cmd, r, size)
}

// killGroup runs the child in a process group of its own and makes the
// command's cancellation kill the whole group, so that a wrapper script's
// children go too.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

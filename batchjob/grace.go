package batchjob

import (
	"fmt"
	"time"
)

// DefaultGrace is --grace's default: Slurm's `--signal=B:TERM@120` sends
// SIGTERM 120 s before the time limit; 100 s of finishing leaves 20 s to
// write the outputs and the report before the limit's own SIGTERM (a
// second signal: at once) and SIGKILL.
const DefaultGrace = 100 * time.Second

// MaxGrace bounds --grace.
const MaxGrace = 24 * time.Hour

// GraceFits decides, on a first SIGINT/SIGTERM, whether the conversations
// in flight can finish in the grace period left: the longest of them has
// frames to run at step a frame (the measured mean). The estimate gets a
// margin (a quarter more, plus 2 s for the writes); with no step timed yet
// nothing can be estimated and nothing is finished. why says it in words
// for the log.
func GraceFits(inFlight, frames int, step, left time.Duration) (ok bool, why string) {
	if step <= 0 {
		return false, fmt.Sprintf("stopping now: no step of the %d conversations in flight was timed yet, so their end cannot be estimated", inFlight)
	}
	need := time.Duration(frames) * step
	if need/time.Duration(max(frames, 1)) != step { // overflow: certainly too long
		need = MaxGrace * 2
	}
	padded := need + need/4 + 2*time.Second
	if padded > left {
		return false, fmt.Sprintf("stopping now: the %d conversations in flight need about %s (%d frames at %s a step), more than the %s of the grace period left (--grace)", inFlight, need.Round(time.Millisecond), frames, step.Round(time.Microsecond), left.Round(time.Second))
	}
	return true, fmt.Sprintf("finishing the %d conversations in flight: about %s (%d frames at %s a step), within the grace period (%s left; a second signal stops at once)", inFlight, need.Round(time.Millisecond), frames, step.Round(time.Microsecond), left.Round(time.Second))
}

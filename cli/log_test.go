package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/internal/suggest"
)

func TestClosest(t *testing.T) {
	names := []string{"input-wav", "output-wav", "output-text", "temp-audio", "temp-text", "greedy", "seed", "help"}
	for in, want := range map[string]string{
		"input-wave": "input-wav", "inptu-wav": "input-wav", "output-txt": "output-text", "gredy": "greedy",
		"temp": "", "sed": "seed", "x": "", "outputwav": "output-wav", "input": "input-wav", "help": "",
	} {
		if got := suggest.Closest(in, names); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// Off a terminal every log line carries the time; progress lines the ETA.
func TestLogTimestampsAndETA(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := &logger{w: &buf, stamp: true, now: func() time.Time { return clock }}
	p := &progress{log: log}
	p.Start(100, 0.08)
	clock = clock.Add(6 * time.Second)
	p.Frame(25) // 25 frames (2 s of audio) in 6 s: RTF 3, 75 frames to go: 18 s
	clock = clock.Add(18 * time.Second)
	p.Frame(100)
	p.Finish()
	want := "2026-01-02T03:04:11.000Z [info] frame 25/100 (25%), 6.0 s elapsed, real-time factor 3.00, ETA 18.0 s\n" +
		"2026-01-02T03:04:29.000Z [info] frame 100/100 (100%), 24.0 s elapsed, real-time factor 3.00, ETA 0 s\n"
	if buf.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	(&logger{w: &buf}).Infof("x %d", 1)
	if buf.String() != "[info] x 1\n" {
		t.Fatalf("terminal log line %q", buf.String())
	}
}

// On a terminal the bar is replaced by a summary line that stays.
func TestProgressBarLeavesSummary(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := &logger{w: &buf, now: func() time.Time { return clock }}
	p := &progress{log: log, tty: true}
	p.Start(50, 0.08)
	for i := 1; i <= 50; i++ {
		clock = clock.Add(40 * time.Millisecond)
		p.Frame(i)
	}
	p.Finish()
	out := buf.String()
	const want = "[info] 50/50 frames in 2.0 s, real-time factor 0.50\n"
	if !strings.HasSuffix(out, want) {
		t.Fatalf("output ends %q, want the summary %q", out[max(0, len(out)-120):], want)
	}
}

func TestFmtSeconds(t *testing.T) {
	for s, want := range map[float64]string{0: "0.0 s", 59.94: "59.9 s", 65: "1 min 05 s", 3725: "1 h 02 min"} {
		if got := fmtSeconds(s); got != want {
			t.Errorf("fmtSeconds(%v) = %q, want %q", s, got, want)
		}
	}
}

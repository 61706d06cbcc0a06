package cli

import (
	"bytes"
	"log"
	"runtime"
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
	(&logger{w: &buf, plain: true}).Infof("x %d", 1)
	if buf.String() != "[info] x 1\n" {
		t.Fatalf("terminal log line %q", buf.String())
	}
}

// On a terminal the bar is replaced by a summary line that stays.
func TestProgressBarLeavesSummary(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := &logger{w: &buf, plain: true, now: func() time.Time { return clock }}
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

// Off a terminal a logger made anywhere (not only by newLogger) stamps its
// lines, in UTC to the millisecond whatever the local zone.
func TestLogStampIsUTCMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	zone := time.FixedZone("CET", 3600)
	log := &logger{w: &buf, now: func() time.Time { return time.Date(2026, 1, 2, 4, 4, 5, 123456789, zone) }}
	log.Infof("a %d", 1)
	log.Warnf("b")
	want := "2026-01-02T03:04:05.123Z [info] a 1\n2026-01-02T03:04:05.123Z [warn] b\n"
	if buf.String() != want {
		t.Fatalf("log:\n%q\nwant:\n%q", buf.String(), want)
	}
}

// A warning is said once per job: the same warning again (the job layer's
// voice warning, once per batch item) is dropped; another one is said.
func TestWarningOncePerJob(t *testing.T) {
	var buf bytes.Buffer
	log := &logger{w: &buf, plain: true}
	for range 3 {
		log.Infof("warning: %s: the prompt phases (%d steps) are longer than the context", "v.pt", 94)
		log.Warnf("report: %v", "disk full")
		log.Infof("item done")
	}
	log.Warnf("report: %v", "read-only")
	want := "[warn] v.pt: the prompt phases (94 steps) are longer than the context\n[warn] report: disk full\n[info] item done\n" +
		"[info] item done\n[info] item done\n[warn] report: read-only\n"
	if buf.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// On a terminal the bar is cleared before a warning is written, so the
// warning starts its own line instead of landing on the bar.
func TestBarClearedBeforeAWarning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("progressbar clears the line with a bare \\r on Windows: a warning shorter than the bar leaves its tail")
	}
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := &logger{w: &buf, plain: true, now: func() time.Time { return clock }}
	p := &progress{log: log, tty: true}
	p.Start(50, 0.08)
	for i := 1; i <= 10; i++ {
		clock = clock.Add(40 * time.Millisecond)
		p.Frame(i)
	}
	p.Frame(11)
	drawn := buf.Len()
	if drawn == 0 || !strings.Contains(buf.String(), "frames") {
		t.Fatalf("no bar drawn: %q", buf.String())
	}
	log.Warnf("voice too long")
	out := buf.String()[drawn:]
	i := strings.Index(out, "[warn] voice too long\n")
	if i < 0 {
		t.Fatalf("no warning after the bar: %q", out)
	}
	if clear := out[:i]; !strings.HasPrefix(clear, "\r") || strings.Trim(clear, "\r ") != "" || !strings.HasSuffix(clear, "\r") || len(clear) < 3 {
		t.Fatalf("bar not cleared before the warning: %q", out[:i])
	}
	p.Finish()
	if !strings.HasSuffix(buf.String(), "[info] 11/50 frames in 0.4 s, real-time factor 0.45\n") {
		t.Fatalf("no summary after the bar: %q", buf.String()[drawn:])
	}
}

// The standard library's log lines (net/http's "Unsolicited response …"
// with a server's raw bytes) come out as one warning line of the log
// format, quoted and cut, never binary on stderr.
func TestStdLogOneQuotedLine(t *testing.T) {
	var b bytes.Buffer
	l := &logger{w: &b, stamp: true, now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 123e6, time.UTC) }}
	std := log.New(stdLog{l}, "", 0)
	std.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=<nil>", "\x00\x01binary\nbody"+strings.Repeat("x", 500))
	std.Print("raw \x00\xff bytes\nsecond line")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for _, ln := range lines {
		if !strings.HasPrefix(ln, "2026-01-02T03:04:05.123Z [warn] go: ") || len(ln) > 600 {
			t.Errorf("line %q", ln)
		}
		for _, r := range ln {
			if r < 0x20 || r == 0x7f {
				t.Errorf("control character in %q", ln)
			}
		}
	}
	if !strings.Contains(lines[1], `\x00`) {
		t.Errorf("raw bytes not quoted: %q", lines[1])
	}
}

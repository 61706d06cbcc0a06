package cli

import (
	"strconv"
	"strings"
	"unicode"
)

// stdLog takes what Go's standard library prints through the log package
// (net/http: "Unsolicited response received on idle HTTP channel starting
// with" and the server's raw bytes, when a server sends more than its
// Content-Length) and logs it as one warning line of the program's own
// format, its bytes quoted and cut: an unattended run's log stays one line
// a record, parseable, with no binary in it.
type stdLog struct{ l *logger }

// maxStdLog bounds one such line (the library quotes up to 1 KiB of body).
const maxStdLog = 300

func (s stdLog) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	if len(msg) > maxStdLog {
		msg = msg[:maxStdLog] + "…"
	}
	if strings.ContainsFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }) {
		msg = strconv.QuoteToASCII(msg)
	}
	s.l.printf("[warn]", "go: %s", msg)
	return len(p), nil
}

package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

// cmpTestRunErr runs `pp-offline compare args…` through newApp().Run and
// returns the exit status main would use, stdout, stderr and the error
// message (main's last line on stderr).
func cmpTestRunErr(t *testing.T, args ...string) (code int, stdout, stderr, msg string) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	// urfave/cli's default handler would print the message and call
	// os.Exit itself; keep the test process alive and let exitCode decide.
	app.ExitErrHandler = func(*ucli.Context, error) {}
	err := app.Run(append([]string{"pp-offline", "compare"}, args...))
	if err != nil {
		code, msg = exitCode(err), err.Error()
	}
	return code, out.String(), errOut.String(), msg
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(to), 0o755)
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompareJSONAndQuiet(t *testing.T) {
	f := cmpTestFixtures(t)
	code, stdout, msg := cmpTestRun(t, "--reference", cmpTestGoldenWAV, "--candidate", f["noise60.wav"], "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json stdout is not JSON: %v\n%s", err, stdout)
	}
	if r["verdict"] != "equivalent" || r["candidate"] != f["noise60.wav"] {
		t.Fatalf("report %v", r)
	}
	for _, c := range []struct {
		cand string
		code int
	}{{f["copy.wav"], 0}, {f["shift10ms.wav"], 1}, {f["corrupt.wav"], 2}} {
		code, stdout, msg := cmpTestRun(t, "--reference", cmpTestGoldenWAV, "--candidate", c.cand, "-q")
		if code != c.code || stdout != "" {
			t.Fatalf("-q %s: exit %d, stdout %q", c.cand, code, stdout)
		}
		if (code == 0) != (msg == "") {
			t.Fatalf("-q %s: exit %d, message %q", c.cand, code, msg)
		}
	}
}

// goldens builds a reference and a candidate directory of outputs:
// a/ exact (WAV and transcript), b/ shifted (different), c/ equal WAV with
// one transcript token changed (different), and extra files per test.
func goldens(t *testing.T) (ref, cand string) {
	t.Helper()
	f := cmpTestFixtures(t)
	root := t.TempDir()
	ref, cand = filepath.Join(root, "ref"), filepath.Join(root, "cand")
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "a", "out.wav"))
	copyFile(t, cmpTestGoldenJSON, filepath.Join(ref, "a", "out.json"))
	copyFile(t, cmpTestGoldenWAV, filepath.Join(cand, "a", "out.wav"))
	copyFile(t, cmpTestGoldenJSON, filepath.Join(cand, "a", "out.json"))
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "b", "Agent.wav"))
	copyFile(t, f["shift10ms.wav"], filepath.Join(cand, "b", "Agent.wav"))
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "c", "agent.wav"))
	copyFile(t, cmpTestGoldenJSON, filepath.Join(ref, "c", "transcript.json"))
	copyFile(t, cmpTestGoldenWAV, filepath.Join(cand, "c", "agent.wav"))
	copyFile(t, f["changed.json"], filepath.Join(cand, "c", "transcript.json"))
	return ref, cand
}

func TestCompareDirectories(t *testing.T) {
	ref, cand := goldens(t)
	junit := filepath.Join(t.TempDir(), "junit.xml")
	report := filepath.Join(t.TempDir(), "report.json")
	code, stdout, _, msg := cmpTestRunErr(t, "--reference", ref, "--candidate", cand, "--junit", junit, "--report", report)
	if code != 1 || msg != "compare: 2 of 3 pairs differ ("+cand+" vs "+ref+")" {
		t.Fatalf("exit %d, %q\n%s", code, msg, stdout)
	}
	for _, want := range []string{"a/out.wav", "EXACT", "b/Agent.wav", "DIFFERENT", "c/agent.wav", "transcript edit distance 1",
		"3 pairs: 1 exact, 0 equivalent, 2 different, 0 errors; 0 files on one side only"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	var rep struct {
		Pass    bool
		Summary dirSummary
		Pairs   []map[string]any
	}
	data, _ := os.ReadFile(report)
	if err := json.Unmarshal(data, &rep); err != nil || rep.Pass || rep.Summary.Different != 2 || len(rep.Pairs) != 3 {
		t.Fatalf("report (%v): %s", err, data)
	}
	if rep.Pairs[2]["name"] != "c/agent.wav" || rep.Pairs[2]["candidate_text"] != filepath.Join(cand, "c", "transcript.json") {
		t.Fatalf("c/transcript.json was not compared: %s", data)
	}

	// A file on one side only: listed, exit 2, still one JUnit file.
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "d", "out.wav"))
	copyFile(t, cmpTestGoldenWAV, filepath.Join(cand, "e.wav"))
	code, stdout, stderr, msg := cmpTestRunErr(t, "--reference", ref, "--candidate", cand, "--junit", junit)
	if code != 2 || msg != "compare: e.wav is missing from the reference directory" ||
		stderr != "pp-offline: compare: d/out.wav is missing from the candidate directory\n" {
		t.Fatalf("exit %d, message %q, stderr %q", code, msg, stderr)
	}
	if !strings.Contains(stdout, "d/out.wav  MISSING") && !strings.Contains(stdout, "MISSING") {
		t.Errorf("summary does not list the missing files:\n%s", stdout)
	}
	s := parseJUnit(t, junit)
	if len(s.Suites) != 1 || s.Suites[0].Tests != 5 || s.Suites[0].Errors != 2 || s.Suites[0].Failures != 2 {
		t.Fatalf("JUnit counts %+v", s.Suites)
	}

	// Only equal pairs: exit 0; -q prints nothing.
	os.RemoveAll(filepath.Join(ref, "b"))
	os.RemoveAll(filepath.Join(cand, "b"))
	os.RemoveAll(filepath.Join(ref, "c"))
	os.RemoveAll(filepath.Join(cand, "c"))
	os.RemoveAll(filepath.Join(ref, "d"))
	os.Remove(filepath.Join(cand, "e.wav"))
	code, stdout, stderr, msg = cmpTestRunErr(t, "--reference", ref, "--candidate", cand, "-q")
	if code != 0 || stdout != "" || stderr != "" || msg != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q, %q", code, stdout, stderr, msg)
	}
	code, _, _, msg = cmpTestRunErr(t, "--reference", ref, "--candidate", cmpTestGoldenWAV)
	if code != 2 || !strings.Contains(msg, "both files or both directories") {
		t.Fatalf("dir vs file: exit %d, %q", code, msg)
	}
}

type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Time     string `xml:"time,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			ClassName string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
		SystemOut *string `xml:"system-out"`
		SystemErr *string `xml:"system-err"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, path string) junitDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d junitDoc
	if err := xml.Unmarshal(data, &d); err != nil {
		t.Fatalf("JUnit is not XML: %v\n%s", err, data)
	}
	return d
}

// The JUnit file's structure: one test case per pair, the failure message
// is the verdict's reasons, files on one side only are errors.
func TestCompareJUnitStructure(t *testing.T) {
	ref, cand := goldens(t)
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "z", "only-ref.wav"))
	junit := filepath.Join(t.TempDir(), "junit.xml")
	code, _, _, _ := cmpTestRunErr(t, "--reference", ref, "--candidate", cand, "--junit", junit)
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	d := parseJUnit(t, junit)
	if len(d.Suites) != 1 {
		t.Fatalf("%d suites", len(d.Suites))
	}
	s := d.Suites[0]
	if s.Tests != len(s.Cases) || s.Tests != 4 || s.Failures != 2 || s.Errors != 1 || s.SystemOut == nil || s.SystemErr == nil {
		t.Fatalf("suite %+v", s)
	}
	byName := map[string]int{}
	for i, c := range s.Cases {
		byName[c.Name] = i
		if c.ClassName == "" || c.Time == "" {
			t.Errorf("case %s lacks classname/time", c.Name)
		}
	}
	a, b, c, z := s.Cases[byName["a/out.wav"]], s.Cases[byName["b/Agent.wav"]], s.Cases[byName["c/agent.wav"]], s.Cases[byName["z/only-ref.wav"]]
	if a.Failure != nil || a.Error != nil {
		t.Errorf("exact pair failed: %+v", a)
	}
	if b.Failure == nil || !strings.HasPrefix(b.Failure.Message, "SNR ") || !strings.Contains(b.Failure.Message, "; log-mel distance") ||
		b.Failure.Type != "different" || !strings.Contains(b.Failure.Text, "verdict: DIFFERENT") {
		t.Errorf("shifted pair: %+v", b.Failure)
	}
	if c.Failure == nil || c.Failure.Message != "transcript edit distance 1 > 0 (first difference at token 5)" {
		t.Errorf("changed transcript: %+v", c.Failure)
	}
	if z.Error == nil || z.Error.Message != "z/only-ref.wav is missing from the candidate directory" {
		t.Errorf("missing file: %+v", z.Error)
	}

	// One pair (file mode) is one test case named by the candidate.
	code, _, _, _ = cmpTestRunErr(t, "--reference", cmpTestGoldenWAV, "--candidate", filepath.Join(cand, "b", "Agent.wav"), "--junit", junit)
	d = parseJUnit(t, junit)
	if code != 1 || len(d.Suites[0].Cases) != 1 || d.Suites[0].Cases[0].Failure == nil {
		t.Fatalf("file mode: exit %d, %+v", code, d)
	}
}

// The JUnit output validates against the Ant JUnit schema with xmllint (a
// real consumer of the schema), which is told apart from a broken document.
func TestCompareJUnitValidatesAgainstXSD(t *testing.T) {
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Skip("xmllint not installed (Debian: libxml2-utils)")
	}
	ref, cand := goldens(t)
	copyFile(t, cmpTestGoldenWAV, filepath.Join(ref, "z", "only-ref.wav"))
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	cmpTestRunErr(t, "--reference", ref, "--candidate", cand, "--junit", junit)
	xsd := "testdata/junit/JUnit.xsd"
	if out, err := exec.Command("xmllint", "--noout", "--schema", xsd, junit).CombinedOutput(); err != nil {
		data, _ := os.ReadFile(junit)
		t.Fatalf("xmllint: %v\n%s\n%s", err, out, data)
	}
	single := filepath.Join(dir, "single.xml")
	cmpTestRunErr(t, "--reference", cmpTestGoldenWAV, "--candidate", cmpTestGoldenWAV, "--junit", single)
	if out, err := exec.Command("xmllint", "--noout", "--schema", xsd, single).CombinedOutput(); err != nil {
		t.Fatalf("xmllint (one pair): %v\n%s", err, out)
	}
	data, _ := os.ReadFile(junit)
	bad := filepath.Join(dir, "bad.xml")
	os.WriteFile(bad, bytes.Replace(data, []byte(` hostname="`), []byte(` host="`), 1), 0o644)
	if err := exec.Command("xmllint", "--noout", "--schema", xsd, bad).Run(); err == nil {
		t.Fatal("xmllint accepted a testsuite without hostname: the check checks nothing")
	}
}

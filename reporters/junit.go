package reporters

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/planrun/planrun/results"
)

func init() {
	Register("junit", JUnit{})
}

// JUnit writes base.junit.xml so that CI systems show a plan's asserts as
// tests: a testsuite per run, a testcase per assert, and a testcase "run"
// that fails when the run itself failed or was interrupted.
type JUnit struct{}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

// junitText keeps line breaks readable (CDATA) where chardata would
// escape them.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// Write renders res to base.junit.xml.
func (JUnit) Write(res *results.Result, base string) (string, error) {
	data, err := JUnitXML(res)
	if err != nil {
		return "", err
	}
	path := base + ".junit.xml"
	return path, os.WriteFile(path, data, 0o644)
}

// JUnitXML is the JUnit document for res.
func JUnitXML(res *results.Result) ([]byte, error) {
	doc := junitSuites{Name: res.Plan, Time: seconds(res.Finished.Sub(res.Started).Seconds())}
	for i := range res.Runs {
		s := junitRun(res, &res.Runs[i])
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Suites = append(doc.Suites, s)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding JUnit XML: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func junitRun(res *results.Result, run *results.Run) junitSuite {
	name := res.Plan
	if run.Label != "" {
		name += " [" + run.Label + "]"
	}
	class := strings.ReplaceAll(name, ".", "_")
	s := junitSuite{Name: name, Time: seconds(run.Finished.Sub(run.Started).Seconds()), Hostname: res.Environment.Host}
	if !run.Started.IsZero() {
		s.Timestamp = run.Started.UTC().Format("2006-01-02T15:04:05")
	}
	keys := make([]string, 0, len(run.Combination))
	for k := range run.Combination {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.Properties = append(s.Properties, junitProperty{Name: k, Value: run.Combination[k]})
	}

	rc := junitCase{Name: "run", ClassName: class, Time: s.Time}
	if run.Status == results.Failed || run.Status == results.Interrupted {
		msg := run.Error
		if msg == "" {
			msg = "the run " + run.Status
		}
		text := msg
		if run.FailedStep != "" && !strings.HasPrefix(msg, run.FailedStep) {
			text = "at " + run.FailedStep + ": " + msg
		}
		rc.Error = &junitProblem{Message: xmlSafe(msg), Type: run.Status, Text: xmlSafe(text)}
		s.Errors++
	}
	s.Cases = append(s.Cases, rc)

	seen := map[string]int{}
	for _, a := range run.Asserts {
		c := junitCase{Name: assertName(a, seen), ClassName: class, Time: "0"}
		if !a.Passed {
			msg := a.Detail
			if msg == "" {
				msg = "the expression is false"
			}
			text := fmt.Sprintf("%s: assert %s", a.Step, a.Expr)
			if a.Message != "" {
				text = a.Message + "\n" + text
			}
			c.Failure = &junitProblem{Message: xmlSafe(msg), Type: "assert", Text: xmlSafe(text + "\n" + msg)}
			s.Failures++
		}
		s.Cases = append(s.Cases, c)
	}
	s.Tests = len(s.Cases)
	var out []string
	for _, w := range run.Warnings {
		out = append(out, "warning: "+w)
	}
	if len(out) > 0 {
		s.SystemOut = &junitText{Text: xmlSafe(strings.Join(out, "\n"))}
	}
	return s
}

// assertName names an assert's testcase by its message or expression, which
// stay the same across runs (a line number would not), numbering repeats.
func assertName(a results.Assert, seen map[string]int) string {
	name := a.Message
	if name == "" {
		name = a.Expr
	}
	seen[name]++
	if n := seen[name]; n > 1 {
		name = fmt.Sprintf("%s (%d)", name, n)
	}
	return name
}

// xmlSafe drops characters XML 1.0 cannot hold, which a broker's error
// message may carry.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF {
			return r
		}
		return -1
	}, s)
}

func seconds(s float64) string { return F(max(s, 0), 3) }

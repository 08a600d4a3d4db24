// Package yamldecode decodes plan files strictly: every YAML value is checked
// against the Go type it fills, unknown keys are errors, variables are
// interpolated, and every error carries file:line:col from the YAML node.
package yamldecode

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem at one place in a plan file.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

func (e Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors collects every problem of a plan so a user sees them all at once.
type Errors struct {
	File string
	List []Error
}

// At records a problem at a node's position (n may be nil for file-level problems).
func (es *Errors) At(n *yaml.Node, format string, args ...any) {
	e := Error{File: es.File, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	es.List = append(es.List, e)
}

// Len is the number of problems so far.
func (es *Errors) Len() int { return len(es.List) }

// Err returns nil when there are no problems, else the sorted list as one error.
func (es *Errors) Err() error {
	if len(es.List) == 0 {
		return nil
	}
	sort.SliceStable(es.List, func(i, j int) bool {
		a, b := es.List[i], es.List[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	// A value that is wrong for several reasons at one place is said once.
	out := es.List[:0]
	for i, e := range es.List {
		if i > 0 && e == es.List[i-1] {
			continue
		}
		out = append(out, e)
	}
	es.List = out
	return &ListError{List: append([]Error(nil), out...)}
}

// ListError is the error type returned for an invalid plan.
type ListError struct{ List []Error }

func (l *ListError) Error() string {
	lines := make([]string, len(l.List))
	for i, e := range l.List {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Suggest returns ` (did you mean "x"?)` when a known name is close to got.
func Suggest(got string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(got), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || best == got {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parserProblems are the messages of yaml.v3's parser (not its scanner).
// It reports their line counted from 0, one line early: the line of the
// collection being parsed (the one that opens an unclosed { } or [ ]), or
// of the problem when that collection starts on the first line, and no
// line when both are on the first line. Scanner errors count from 1.
var parserProblems = []string{
	"did not find expected ',' or '}'",
	"did not find expected ',' or ']'",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected node content",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

// syntaxPrefixes start the messages of yaml.v3's scanner and parser; other
// messages of yaml.Unmarshal (an unknown anchor) have no place.
var syntaxPrefixes = []string{"found ", "did not find ", "could not find ", "mapping ", "block sequence ", "exceeded "}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// SyntaxError turns an error of yaml.Unmarshal over data into an Error at
// file:line:col. yaml.v3 gives no column, and the line of a parser error
// one early (see parserProblems): the line is corrected, and the column is
// that of the opening bracket of an unclosed flow collection, or of the
// line's first character for a block collection.
func SyntaxError(file string, data []byte, err error) Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	e := Error{File: file, Msg: "not valid YAML: " + msg}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	parser := slices.Contains(parserProblems, msg)
	switch {
	case parser:
		// A problem at the end of the file (a collection never closed) is
		// on the line after the last: said at the last.
		e.Line = min(line+1, len(lines))
	case line > 0:
		e.Line = line
	case slices.ContainsFunc(syntaxPrefixes, func(p string) bool { return strings.HasPrefix(msg, p) }):
		e.Line = 1 // the marks yaml.v3 did not print are on the first line
	default:
		return e
	}
	e.Col = 1
	if !parser || e.Line < 1 || e.Line > len(lines) {
		return e
	}
	text := []rune(lines[e.Line-1])
	open := map[string]rune{"did not find expected ',' or '}'": '{', "did not find expected ',' or ']'": '['}[msg]
	if i := slices.Index(text, open); open != 0 && i >= 0 {
		e.Col = i + 1
	} else if i := slices.IndexFunc(text, func(r rune) bool { return r != ' ' && r != '\t' }); i >= 0 {
		e.Col = i + 1
	}
	return e
}

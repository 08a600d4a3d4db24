// Package reporters turns a saved result into files people read: markdown
// tables, JSON, and whatever else registers itself here.
package reporters

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/planrun/planrun/results"
)

// Reporter writes one kind of output for a result. base is the path
// without extension the plan asked for ("results/kafka-perf").
type Reporter interface {
	Write(res *results.Result, base string) (path string, err error)
}

var (
	mu       sync.RWMutex
	registry = map[string]Reporter{}
)

// Register makes a reporter available to plans (report: formats:) by name.
func Register(name string, r Reporter) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("reporters: %q registered twice", name))
	}
	registry[name] = r
}

// Lookup finds a reporter by name.
func Lookup(name string) (Reporter, bool) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := registry[name]
	return r, ok
}

// Names lists registered reporters.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Table renders a markdown table with tablewriter: numbers right-aligned
// (n/a, a figure not measured, among them), text left-aligned, so columns of figures line up as in the vendors' tables.
func Table(w io.Writer, header []string, rows [][]string) {
	aligns := make([]tw.Align, len(header))
	for c, num := range numericColumns(header, rows) {
		aligns[c] = tw.AlignLeft
		if num {
			aligns[c] = tw.AlignRight
		}
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{Global: tw.AlignLeft, PerColumn: aligns}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight, PerColumn: aligns}),
	)
	h := make([]any, len(header))
	for i, c := range header {
		h[i] = c
	}
	t.Header(h...)
	for _, r := range rows {
		cells := make([]any, len(r))
		for i, c := range r {
			cells[i] = strings.ReplaceAll(c, "|", "\\|")
		}
		_ = t.Append(cells...)
	}
	_ = t.Render()
}

// numericColumns says which columns hold only numbers (or n/a, or
// nothing): those are right-aligned, so that figures line up.
func numericColumns(header []string, rows [][]string) []bool {
	num := make([]bool, len(header))
	for c := range header {
		num[c] = true
		for _, r := range rows {
			if c < len(r) && r[c] != "" && r[c] != "n/a" && !numeric(r[c]) {
				num[c] = false
				break
			}
		}
	}
	return num
}

// numeric reports whether a cell holds a number (with an optional unit
// suffix such as "11B" or "1KB" counting as text).
func numeric(s string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil
}

// Transpose turns columns into rows: the first column's values become the
// headings, every other column a row.
func Transpose(header []string, rows [][]string) ([]string, [][]string) {
	if len(header) == 0 {
		return header, rows
	}
	nh := []string{header[0]}
	for _, r := range rows {
		nh = append(nh, r[0])
	}
	var nr [][]string
	for c := 1; c < len(header); c++ {
		row := []string{header[c]}
		for _, r := range rows {
			if c < len(r) {
				row = append(row, r[c])
			} else {
				row = append(row, "")
			}
		}
		nr = append(nr, row)
	}
	return nh, nr
}

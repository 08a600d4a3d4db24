package plan

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/yamldecode"
)

// ReportSpec is a plan's report section.
type ReportSpec struct {
	Title    string      `yaml:"title" doc:"heading of the report (default: the plan's name)"`
	Markdown string      `yaml:"markdown" default:"{name}.md" doc:"markdown file to write, relative to --out; {name} is the plan's name"`
	JSON     string      `yaml:"json" default:"{name}.json" doc:"JSON file with everything measured, relative to --out"`
	Tables   []TableSpec `yaml:"tables" doc:"tables of your own, besides the standard per-phase table"`
	Series   *bool       `yaml:"series" default:"true" doc:"keep per-second series in the JSON file"`
	Formats  []string    `yaml:"formats" doc:"extra outputs: chart (a PNG per run: rates, backlog and p99 latency over time, phases marked, linked from the markdown), csv (the per-second series; -extra.csv for collector figures), junit (JUnit XML, one test case per assert, for CI)"`
}

// TableSpec is a table whose cells are expressions.
type TableSpec struct {
	Title     string       `yaml:"title" default:"Table N (its position)" doc:"heading of the table"`
	Rows      string       `yaml:"rows" default:"phases" doc:"phases (a row per phase, per run in a matrix) or runs (a row per matrix combination); planrun adds the leading columns itself: the matrix variables' values in a matrix plan, and the phase name with rows: phases"`
	Phases    []string     `yaml:"phases" doc:"with rows: phases, only these phases"`
	Transpose bool         `yaml:"transpose" doc:"rows become columns: one row per column expression (the first column, headed figure, names them), one column per phase or run, headed by the run's matrix values and the phase, or value for the one run of a plan without a matrix (like the vendors' table 7)"`
	Columns   []ColumnSpec `yaml:"columns" required:"true" doc:"the table's columns, in order"`
}

// ColumnSpec is one column of a table.
type ColumnSpec struct {
	Name   string    `yaml:"name" required:"true" doc:"column heading"`
	Value  expr.Expr `yaml:"value" required:"true" doc:"expression evaluated for each row"`
	Format string    `yaml:"format" default:"2 decimals, whole numbers as integers" doc:"printf format for numbers, such as %.1f"`
}

func (p *Plan) decodeReport(d *yamldecode.Decoder) {
	n := p.keys["report"]
	if n != nil {
		d.Decode(n, &p.Report, "report")
	}
	for _, f := range p.Report.Formats {
		if p.formats != nil && !contains(p.formats, f) {
			d.Errs.At(n, "report: formats: no reporter %q%s; known: %s", f, yamldecode.Suggest(f, p.formats), strings.Join(p.formats, ", "))
		}
	}
	if p.Report.Markdown == "" {
		p.Report.Markdown = "{name}.md"
	}
	if p.Report.JSON == "" {
		p.Report.JSON = "{name}.json"
	}
	for i, t := range p.Report.Tables {
		node := tableNode(n, i)
		switch t.Rows {
		case "":
			p.Report.Tables[i].Rows = "phases"
		case "phases", "runs":
		default:
			d.Errs.At(node, "report table %d: rows must be phases or runs, got %q", i+1, t.Rows)
		}
		for _, c := range t.Columns {
			if c.Format != "" {
				if err := expr.CheckFormat(c.Format, c.Value.Kind()); err != "" {
					d.Errs.At(node, "report table %d column %q: format %q %s", i+1, c.Name, c.Format, err)
				}
			}
		}
		for _, ph := range t.Phases {
			if !contains(p.Scope.Phases, ph) {
				d.Errs.At(node, "report table %d: no step starts phase %q%s; phases are: %s", i+1, ph, yamldecode.Suggest(ph, p.Scope.Phases), strings.Join(p.Scope.Phases, ", "))
			}
		}
	}
}

// tableNode finds the YAML node of table i for error positions.
func tableNode(report *yaml.Node, i int) *yaml.Node {
	if report == nil || report.Kind != yaml.MappingNode {
		return report
	}
	for j := 0; j+1 < len(report.Content); j += 2 {
		if report.Content[j].Value == "tables" {
			if t := report.Content[j+1]; t.Kind == yaml.SequenceNode && i < len(t.Content) {
				return t.Content[i]
			}
		}
	}
	return report
}

// FileName expands {name} in a report path.
func (p *Plan) FileName(pattern string) string {
	return strings.ReplaceAll(pattern, "{name}", p.Name)
}

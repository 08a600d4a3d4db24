package docs

import (
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/units"
)

type inner struct {
	On bool `yaml:"on" doc:"switch"`
}

type sample struct {
	Name    string        `yaml:"name" required:"true" doc:"a name"`
	Wait    time.Duration `yaml:"wait" default:"1s" doc:"how long"`
	Size    units.Size    `yaml:"size" doc:"how big"`
	Secret  string        `yaml:"secret" secret:"true" doc:"a password"`
	Inner   inner         `yaml:"inner" doc:"nested"`
	List    []string      `yaml:"list" doc:"names"`
	skipped int
	NoTag   int
}

func TestFields(t *testing.T) {
	fs := Fields(&sample{skipped: 1}) // unexported fields are no keys
	var got []string
	for _, f := range flatten("", fs) {
		got = append(got, f.Key+":"+f.Type+":"+defaultOf(f))
	}
	want := "name:string:required wait:duration:1s size:size: secret:string: inner:mapping: inner.on:bool: list:list of strings:"
	if strings.Join(got, " ") != want {
		t.Errorf("fields\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	var b strings.Builder
	Markdown(&b, Section{Fields: fs})
	if !strings.Contains(b.String(), "| `secret` | string |  | a password (a secret: never printed, redacted in every output) |") {
		t.Errorf("markdown lacks the secret row:\n%s", b.String())
	}
}

func TestUpdateReadmeErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"<!-- generated: plan report keys -->\nno end\n", "has no"},
		{"<!-- generated: plan nothing keys -->\n<!-- end generated -->\n", `nothing called "plan nothing"`},
		{"<!-- generated: plan report target -->\n<!-- end generated -->\n", "has no target keys"},
	} {
		if _, err := UpdateReadme(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("UpdateReadme(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
	out, err := UpdateReadme("a\n<!-- generated: plan report keys -->\nstale\n<!-- end generated -->\nb\n")
	if err != nil || !strings.Contains(out, "| `title` |") || strings.Contains(out, "stale") || !strings.HasSuffix(out, "<!-- end generated -->\nb\n") {
		t.Errorf("UpdateReadme = %q, %v", out, err)
	}
}

// The plan reference names each key's type as a plan writes it and its
// real default.
func TestPlanReferenceTypes(t *testing.T) {
	got := map[string]Field{}
	for _, f := range flatten("", Fields(plan.TopLevel{})) {
		got[f.Key] = f
	}
	for _, f := range flatten("", Fields(plan.WorkloadGeneric{})) {
		got["workloads.NAME."+f.Key] = f
	}
	for _, tc := range []struct{ key, typ, def string }{
		{"steps", "list of steps", "required"},
		{"targets", "name: mapping", ""},
		{"workloads", "name: mapping", ""},
		{"collectors", "name: mapping", ""},
		{"report.tables.title", "string", "Table N (its position)"},
		{"workloads.NAME.on", "all, number or list of numbers", "all"},
	} {
		f, ok := got[tc.key]
		if !ok {
			t.Errorf("no key %s", tc.key)
			continue
		}
		if f.Type != tc.typ || defaultOf(f) != tc.def {
			t.Errorf("%s: type %q default %q, want %q and %q", tc.key, f.Type, defaultOf(f), tc.typ, tc.def)
		}
	}
}

package docs

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/planrun/planrun/drivers"

	"github.com/planrun/planrun/yamldecode"
)

func suggest(got string, known []string) string { return yamldecode.Suggest(got, known) }

// flatten lists nested keys as parent.child rows.
func flatten(prefix string, fs []Field) []Field {
	var out []Field
	for _, f := range fs {
		f.Key = prefix + f.Key
		out = append(out, f)
		if len(f.Fields) > 0 {
			out = append(out, flatten(f.Key+".", f.Fields)...)
		}
	}
	return out
}

func defaultOf(f Field) string {
	switch {
	case f.Required:
		return "required"
	case f.Default != "":
		return f.Default
	}
	return ""
}

func meaning(f Field) string {
	m := f.Doc
	if f.Secret {
		m += " (a secret: never printed, redacted in every output)"
	}
	return m
}

// Text writes a component as `planrun explain` shows it.
func Text(w io.Writer, c Component) {
	fmt.Fprintf(w, "%s %s", c.Kind, c.Name)
	if c.Doc != "" {
		fmt.Fprintf(w, ": %s", c.Doc)
	}
	fmt.Fprintln(w)
	if c.Capabilities != nil {
		fmt.Fprintf(w, "\ncapabilities (checked by the driver conformance suite): %s\n", c.Capabilities)
	}
	for _, s := range c.Sections {
		title := s.Name + " keys"
		if s.Name == "keys" {
			title = "keys"
		}
		fmt.Fprintf(w, "\n%s, under %s\n", title, s.Where)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tTYPE\tDEFAULT\tMEANING")
		for _, f := range flatten("", s.Fields) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Key, f.Type, defaultOf(f), meaning(f))
		}
		_ = tw.Flush()
	}
}

// List writes the index `planrun explain` prints without a name.
func List(w io.Writer) {
	byKind := map[string][]string{}
	var kinds []string
	for _, c := range Components() {
		if _, ok := byKind[c.Kind]; !ok {
			kinds = append(kinds, c.Kind)
		}
		byKind[c.Kind] = append(byKind[c.Kind], c.Name)
	}
	fmt.Fprintln(w, "planrun explain NAME (or KIND NAME) describes a part of a plan and every key it takes:")
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-10s %s\n", k, strings.Join(byKind[k], ", "))
	}
}

// Markdown writes a section as a README reference table.
func Markdown(w io.Writer, s Section) {
	fmt.Fprintln(w, "| key | type | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range flatten("", s.Fields) {
		def := defaultOf(f)
		if def != "" && def != "required" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", f.Key, f.Type, def, strings.ReplaceAll(meaning(f), "|", "\\|"))
	}
}

// CapabilityMatrix writes the drivers' declared capabilities as a README
// table, one row per driver, then what each column promises.
func CapabilityMatrix(w io.Writer) {
	list := drivers.CapabilityList()
	fmt.Fprint(w, "| driver |")
	for _, c := range list {
		fmt.Fprintf(w, " %s |", c.Column)
	}
	fmt.Fprint(w, "\n|---|")
	for range list {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, name := range drivers.Names() {
		caps, _ := drivers.CapabilitiesOf(name)
		fmt.Fprintf(w, "| `%s` |", name)
		for _, c := range list {
			mark := "no"
			if caps.Has(c.Field) {
				mark = "yes"
			}
			fmt.Fprintf(w, " %s |", mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, c := range list {
		fmt.Fprintf(w, "- **%s**: %s\n", c.Column, c.Doc)
	}
}

// marker opens a generated table in the README: <!-- generated: KIND NAME SECTION -->.
var marker = regexp.MustCompile(`(?m)^<!-- generated: (\S+) (\S+) (\S+) -->\n`)

const endMarker = "<!-- end generated -->\n"

// UpdateReadme rewrites every generated table of a README from the
// components, leaving everything else as it is.
func UpdateReadme(readme string) (string, error) {
	var b strings.Builder
	rest := readme
	for {
		loc := marker.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			return b.String(), nil
		}
		m := marker.FindStringSubmatch(rest[loc[0]:])
		b.WriteString(rest[:loc[1]])
		rest = rest[loc[1]:]
		end := strings.Index(rest, endMarker)
		if end < 0 {
			return "", fmt.Errorf("README: %q has no %q after it", strings.TrimSpace(m[0]), strings.TrimSpace(endMarker))
		}
		if m[1] == "drivers" && m[2] == "capabilities" && m[3] == "matrix" {
			CapabilityMatrix(&b)
			b.WriteString(endMarker)
			rest = rest[end+len(endMarker):]
			continue
		}
		cs, err := Find([]string{m[1], m[2]})
		if err != nil {
			return "", fmt.Errorf("README: %s: %w", strings.TrimSpace(m[0]), err)
		}
		s, ok := cs[0].Section(m[3])
		if !ok {
			return "", fmt.Errorf("README: %s: %s %s has no %s keys", strings.TrimSpace(m[0]), m[1], m[2], m[3])
		}
		Markdown(&b, s)
		b.WriteString(endMarker)
		rest = rest[end+len(endMarker):]
	}
}

package collectors

import (
	"fmt"
	"strings"
)

// selector picks series from a scrape: a metric name and exact label values,
// written like PromQL: name{label="value",...}.
type selector struct {
	name   string
	labels [][2]string // name, value
	text   string
}

func (s selector) String() string { return s.text }

// parseSelector reads name or name{label="value",...}. Only exact matches
// are supported: a scrape is summed per figure, not queried.
func parseSelector(text string) (selector, error) {
	sel := selector{text: strings.TrimSpace(text)}
	s := sel.text
	i := 0
	for i < len(s) && isNameByte(s[i], i == 0, true) {
		i++
	}
	if i == 0 {
		return sel, fmt.Errorf("selector %q must start with a metric name, such as process_cpu_seconds_total{job=\"broker\"}", text)
	}
	sel.name = s[:i]
	rest := strings.TrimSpace(s[i:])
	if rest == "" {
		return sel, nil
	}
	if rest[0] != '{' || !strings.HasSuffix(rest, "}") {
		return sel, fmt.Errorf("selector %q: after the metric name comes {label=\"value\",...} or nothing", text)
	}
	body := rest[1 : len(rest)-1]
	for {
		body = strings.TrimLeft(body, " \t")
		if body == "" {
			break
		}
		j := 0
		for j < len(body) && isNameByte(body[j], j == 0, false) {
			j++
		}
		if j == 0 {
			return sel, fmt.Errorf("selector %q: expected a label name at %q", text, body)
		}
		label := body[:j]
		body = strings.TrimLeft(body[j:], " \t")
		if !strings.HasPrefix(body, "=") || strings.HasPrefix(body, "=~") {
			return sel, fmt.Errorf("selector %q: label %s needs =\"value\"; only exact matches are supported (no !=, =~ or !~)", text, label)
		}
		body = strings.TrimLeft(body[1:], " \t")
		val, n, err := unquote(body)
		if err != nil {
			return sel, fmt.Errorf("selector %q: label %s: %v", text, label, err)
		}
		for _, l := range sel.labels {
			if l[0] == label {
				return sel, fmt.Errorf("selector %q: label %s given twice", text, label)
			}
		}
		sel.labels = append(sel.labels, [2]string{label, val})
		body = strings.TrimLeft(body[n:], " \t")
		if body == "" {
			break
		}
		if body[0] != ',' {
			return sel, fmt.Errorf("selector %q: expected , or } at %q", text, body)
		}
		body = body[1:]
	}
	return sel, nil
}

func isNameByte(c byte, first, colon bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c == ':':
		return colon
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// unquote reads a double-quoted value with the exposition format's escapes
// (\\, \" and \n) and returns it with the number of bytes consumed.
func unquote(s string) (string, int, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", 0, fmt.Errorf("value must be in double quotes")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unfinished escape")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case '\\', '"':
				b.WriteByte(s[i])
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("missing closing quote")
}

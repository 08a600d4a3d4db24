package kube

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeSection is the README's Kubernetes subsection.
func readmeSection(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n### Kubernetes\n")
	if i < 0 {
		t.Fatal("README has no Kubernetes subsection")
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestReadmeCommands: every `planrun kube` command line in the README's
// Kubernetes subsection parses with the flags the commands accept.
func TestReadmeCommands(t *testing.T) {
	sec := strings.ReplaceAll(readmeSection(t), "\\\n", " ")
	n := 0
	for _, line := range strings.Split(sec, "\n") {
		_, cmd, ok := strings.Cut(line, "planrun kube ")
		if !ok || strings.HasPrefix(line, "|") || strings.Contains(line, "`planrun kube") {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, " >")
		args := strings.Fields(cmd)
		n++
		var o options
		var fs *flag.FlagSet
		switch args[0] {
		case "run", "render":
			fs = newFlags(args[0], &o, io.Discard)
		case "unpack":
			fs = flag.NewFlagSet("unpack", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.String("out", "", "")
		default:
			t.Errorf("README: unknown command in %q", line)
			continue
		}
		pos, err := parseInterspersed(fs, args[1:])
		if err != nil {
			t.Errorf("README: %q: %v", line, err)
		}
		if want := map[string]int{"run": 1, "render": 1, "unpack": 0}[args[0]]; len(pos) != want {
			t.Errorf("README: %q: %d arguments besides flags, want %d", line, len(pos), want)
		}
	}
	if n < 3 {
		t.Errorf("found %d planrun kube command lines in the README, want run, render and unpack", n)
	}
}

// TestReadmeFlagTable: the README's flag table names every flag of run
// and render, and no other.
func TestReadmeFlagTable(t *testing.T) {
	var o options
	fs := newFlags("run", &o, io.Discard)
	want := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { want[f.Name] = true })
	got := map[string]bool{}
	for _, line := range strings.Split(readmeSection(t), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first, _, _ := strings.Cut(line[1:], "|")
		for _, m := range regexp.MustCompile("`--([a-z-]+)").FindAllStringSubmatch(first, -1) {
			got[m[1]] = true
		}
	}
	for f := range want {
		if !got[f] {
			t.Errorf("README's flag table lacks --%s", f)
		}
	}
	for f := range got {
		if !want[f] {
			t.Errorf("README's flag table names --%s, which kube run does not accept", f)
		}
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// .ci/run stops when .ci/services.sh fails, before any test runs: the
// tests that need its brokers must not run (or skip) without them. The
// script runs in a copy of .ci with a services.sh that fails and a go
// command that only notes what it was asked.
func TestCIStopsWhenServicesFail(t *testing.T) {
	script, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	log := filepath.Join(dir, "go.log")
	for path, body := range map[string]string{
		".ci/run":         string(script),
		".ci/services.sh": "echo 'services: error: redis-server did not start' >&2\nexit 1\n",
		"bin/go":          "#!/bin/sh\necho \"go $*\" >>" + log + "\n",
		"bin/gofmt":       "#!/bin/sh\n",
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(dir, ".ci/run"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	ran, _ := os.ReadFile(log)
	if err == nil {
		t.Errorf(".ci/run passed although services.sh failed:\n%s", out)
	}
	if strings.Contains(string(ran), "go test") || strings.Contains(string(ran), "go vet") {
		t.Errorf(".ci/run went on after services.sh failed; go was run as:\n%s", ran)
	}
	if !strings.Contains(string(out), "services.sh failed") {
		t.Errorf(".ci/run does not say why it stopped:\n%s", out)
	}
}

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/planrun/planrun/engine/enginetest"
)

// readmeExample returns the README's YAML example whose first line is
// `name: <name>`.
func readmeExample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(data), "```yaml\n")[1:] {
		if strings.HasPrefix(block, "name: "+name+"\n") {
			return block[:strings.Index(block, "```")]
		}
	}
	t.Fatalf("README has no example named %s", name)
	return ""
}

// The README's lossy-broker example: received counts duplicates, distinct
// counts each message once, and distinct = acked - lost.
func TestReadmeLossyBrokerDistinct(t *testing.T) {
	res := enginetest.Execute(t, readmeExample(t, "lossy-broker"))
	m := res.Runs[0].Metrics
	p, c := m.Workloads["producer"], m.Workloads["consumer"]
	if p.Acked != 1000 || c.Lost != 100 || c.Duplicates != 128 {
		t.Fatalf("acked %d, lost %d, duplicates %d: want 1000, 100, 128", p.Acked, c.Lost, c.Duplicates)
	}
	if c.Distinct != p.Acked-c.Lost || c.Distinct != 900 {
		t.Errorf("distinct %d, want acked %d - lost %d = 900", c.Distinct, p.Acked, c.Lost)
	}
	if c.Received != c.Distinct+c.Duplicates || c.Received != 1028 {
		t.Errorf("received %d, want distinct %d + duplicates %d = 1028", c.Received, c.Distinct, c.Duplicates)
	}
}

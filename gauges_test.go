package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	embeddedmqtt "github.com/planrun/planrun/embedded/mqtt"
)

// A phase that ends with stop: all reports the connections its clients
// held, not the ones left after the stop closed them: in the result, the
// series file replayed and the report's driver figures.
func TestPhaseGaugesBeforeStopAll(t *testing.T) {
	broker, err := embeddedmqtt.Start(embeddedmqtt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "hold.yaml")
	const clients = 20
	planText := fmt.Sprintf(`name: hold
targets:
  mq: { driver: mqtt, url: "%s" }
workloads:
  fleet:
    connect: { clients: %d }
progress: 0s
steps:
  - start: fleet
    phase: hold
  - wait: fleet.gauges.connected == %d
    timeout: 30s
  - sleep: 1500ms
  - stop: all
`, broker.URL(), clients, clients)
	if err := os.WriteFile(file, []byte(planText), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"run", "--quiet", "--out", dir, file}, io.Discard, io.Discard); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	res := loadResult(t, dir, "hold")
	m := res.Runs[0].Metrics
	if len(m.Phases) != 1 || m.Phases[0].Name != "hold" {
		t.Fatalf("phases %v", m.PhaseNames())
	}
	if g := m.Phases[0].Workloads["fleet"].Gauges; g["connected"] != clients {
		t.Errorf("phase hold gauges %v: want connected %d", g, clients)
	}
	if g := m.Workloads["fleet"].Gauges; g["connected"] != clients {
		t.Errorf("run gauges %v: want connected %d", g, clients)
	}
	md, err := os.ReadFile(filepath.Join(dir, "hold.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("connected %d", clients); !strings.Contains(string(md), want) {
		t.Errorf("the report's driver figures lack %q:\n%s", want, md)
	}
	out := t.TempDir()
	if code := run([]string{"report", "--from-series", "--out", out, filepath.Join(dir, "hold.series.jsonl")}, io.Discard, io.Discard); code != exitOK {
		t.Fatalf("report --from-series: exit %d", code)
	}
	replayed := loadResult(t, out, "hold")
	if g := replayed.Runs[0].Metrics.Phases[0].Workloads["fleet"].Gauges; g["connected"] != clients {
		t.Errorf("replayed phase gauges %v: want connected %d", g, clients)
	}
}

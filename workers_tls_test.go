package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkersOverTLS makes certificates with planrun certs, runs a plan
// over two workers with TLS on the control channel and checks the merged
// counts are exact; a conductor without certificates is refused.
func TestWorkersOverTLS(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	var out, errOut strings.Builder
	if code := run([]string{"certs", certDir, "--ip", "127.0.0.1"}, &out, &errOut); code != exitOK {
		t.Fatalf("certs: exit %d: %s", code, errOut.String())
	}
	for name, want := range map[string]os.FileMode{"ca.crt": 0o644, "worker.crt": 0o644, "worker.key": 0o600, "conductor.crt": 0o644, "conductor.key": 0o600} {
		fi, err := os.Stat(filepath.Join(certDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&^want != 0 {
			t.Errorf("%s has mode %v, want at most %v", name, fi.Mode().Perm(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(certDir, "ca.key")); err == nil {
		t.Errorf("planrun certs kept the CA's key")
	}
	if code := run([]string{"certs", certDir}, io.Discard, io.Discard); code == exitOK {
		t.Errorf("planrun certs overwrote a folder of certificates")
	}
	p := func(n string) string { return filepath.Join(certDir, n) }
	addrs, _ := startWorkers(t, 2, "PLANRUN_TLS_CERT="+p("worker.crt"), "PLANRUN_TLS_KEY="+p("worker.key"), "PLANRUN_TLS_CA="+p("ca.crt"))

	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleetPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	code := run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, &errOut)
	if code != exitRunFailure || !strings.Contains(errOut.String(), "worker 0 ("+addrs[0]+")") || !strings.Contains(errOut.String(), "give the conductor its own") {
		t.Fatalf("a conductor without TLS: exit %d, stderr %q: want exit 3 naming the worker and the fix", code, errOut.String())
	}

	errOut.Reset()
	code = run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir,
		"--tls-cert", p("conductor.crt"), "--tls-key", p("conductor.key"), "--tls-ca", p("ca.crt"), file}, io.Discard, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	res := loadResult(t, dir, "fleet")
	st := res.Runs[0].Metrics.Workloads["producer"]
	if st.Sent != 6000 || st.Acked != 6000 || st.Latency.Count != 6000 || st.Failed != 0 {
		t.Errorf("sent %d, acked %d, failed %d, latencies %d: want 6000 sent, acked and measured", st.Sent, st.Acked, st.Failed, st.Latency.Count)
	}
	if n := len(res.Runs[0].Workers); n != 2 {
		t.Fatalf("%d workers in the result, want 2", n)
	}
	for _, w := range res.Runs[0].Workers {
		if w.Lost || w.ReceivedBytes == 0 || w.SentBytes == 0 {
			t.Errorf("worker %d: lost %v, control traffic %d bytes in, %d out", w.Index, w.Lost, w.ReceivedBytes, w.SentBytes)
		}
	}
}

func TestWorkerRefusesPlainListenBeyondLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		var errOut strings.Builder
		code := run([]string{"worker", "--listen", addr}, io.Discard, &errOut)
		if code != exitBadPlan || !strings.Contains(errOut.String(), "without TLS") || !strings.Contains(errOut.String(), "--insecure") {
			t.Errorf("worker --listen %s: exit %d, stderr %q: want exit 2 naming TLS and --insecure", addr, code, errOut.String())
		}
	}
	var errOut strings.Builder
	if code := run([]string{"worker", "--listen", "127.0.0.1:0", "--tls-cert", "w.crt"}, io.Discard, &errOut); code != exitBadPlan || !strings.Contains(errOut.String(), "together") {
		t.Errorf("--tls-cert alone: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleetPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"run", "--workers", "127.0.0.1:1", "--tls-server-name", "w1", "--out", t.TempDir(), file}, io.Discard, &errOut); code != exitBadPlan || !strings.Contains(errOut.String(), "--tls-server-name needs") {
		t.Errorf("--tls-server-name alone: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"certs", t.TempDir(), "--ip", "worker-1"}, io.Discard, &errOut); code != exitBadPlan || !strings.Contains(errOut.String(), "--dns") {
		t.Errorf("certs --ip with a name: exit %d, stderr %q", code, errOut.String())
	}
}

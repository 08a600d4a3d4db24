package certs

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", data)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerate(t *testing.T) {
	s, err := Generate(Options{Names: []string{"w1.example"}, IPs: []net.IP{net.ParseIP("10.0.0.11")}, Valid: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ca, worker, conductor := parse(t, s.CA), parse(t, s.WorkerCert), parse(t, s.ConductorCert)
	if !ca.IsCA || !ca.MaxPathLenZero || worker.IsCA || conductor.IsCA {
		t.Errorf("CA flags: ca %v (path len zero %v), worker %v, conductor %v", ca.IsCA, ca.MaxPathLenZero, worker.IsCA, conductor.IsCA)
	}
	if d := worker.NotAfter.Sub(worker.NotBefore); d != 48*time.Hour {
		t.Errorf("worker certificate valid %s, want 48h", d)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range []string{ServerName, "w1.example", "10.0.0.11"} {
		if _, err := worker.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("worker certificate for %s: %v", name, err)
		}
	}
	if _, err := worker.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.12"}); err == nil {
		t.Errorf("worker certificate valid for an address it was not made for")
	}
	if _, err := worker.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("worker certificate serves as a client certificate")
	}
	if _, err := conductor.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("conductor certificate: %v", err)
	}
	if _, err := conductor.Verify(x509.VerifyOptions{Roots: pool, DNSName: ServerName}); err == nil {
		t.Errorf("conductor certificate serves as a worker's")
	}
	for name, key := range map[string][]byte{"worker": s.WorkerKey, "conductor": s.ConductorKey} {
		b, _ := pem.Decode(key)
		if b == nil || b.Type != "PRIVATE KEY" {
			t.Fatalf("%s key is not PKCS#8 PEM", name)
		}
	}
	other, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(other.CA, s.CA) || parse(t, other.CA).Subject.CommonName == ca.Subject.CommonName {
		t.Errorf("two runs of Generate made the same CA")
	}
}

func TestWrite(t *testing.T) {
	s, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "certs")
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		private := strings.HasSuffix(e.Name(), ".key")
		if private && fi.Mode().Perm() != 0o600 || !private && fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s has mode %v", e.Name(), fi.Mode().Perm())
		}
	}
	if want := []string{CAFile, ConductorCertFile, ConductorKeyFile, WorkerCertFile, WorkerKeyFile}; !slices.Equal(names, want) {
		t.Errorf("wrote %v, want %v (no CA key)", names, want)
	}
	before, _ := os.ReadFile(filepath.Join(dir, WorkerKeyFile))
	if err := s.Write(dir); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("writing over certificates: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, WorkerKeyFile)); !slices.Equal(before, after) {
		t.Errorf("the worker key was overwritten")
	}
}

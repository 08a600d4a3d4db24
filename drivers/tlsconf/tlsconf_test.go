package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "planrun test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	c := &Config{CAFile: cert, CertFile: cert, KeyFile: key}
	if !c.Given() || c.Check() != nil {
		t.Fatalf("Given() = %v, Check() = %v", c.Given(), c.Check())
	}
	tc, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
		t.Fatalf("loaded %+v", tc)
	}
	if (&Config{}).Given() {
		t.Error("an empty section counts as given")
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Config{CertFile: "c.pem"}).Check(); err == nil || !strings.Contains(err.Error(), "tls.cert_file and tls.key_file go together") {
		t.Errorf("cert without key: %v", err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{CAFile: filepath.Join(dir, "missing.pem")}, "tls.ca_file: open "},
		{Config{CAFile: notPEM}, "holds no PEM certificate"},
		{Config{CertFile: notPEM, KeyFile: notPEM}, "tls.cert_file/key_file: "},
	} {
		if _, err := tc.c.Load(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
}

// Package certs makes the certificates of planrun's control channel: a CA
// of its own, one server certificate every worker presents and one client
// certificate the conductor presents, all ECDSA P-256 (crypto/x509). The
// CA's private key signs them and is then forgotten: nothing else can be
// signed by that CA, and no file or Secret ever holds its key.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServerName is the name every worker certificate carries and the
// conductor checks by default: workers are dialled by address, which may
// differ from the names the certificate can know in advance.
const ServerName = "planrun-worker"

// File names in a certificate folder, also the keys of a Kubernetes Secret.
const (
	CAFile            = "ca.crt"
	WorkerCertFile    = "worker.crt"
	WorkerKeyFile     = "worker.key"
	ConductorCertFile = "conductor.crt"
	ConductorKeyFile  = "conductor.key"
)

// Options say what the worker certificate is for and how long all last.
type Options struct {
	// Names are extra DNS names of the worker certificate, IPs its IP
	// addresses (besides ServerName, which it always has).
	Names []string
	IPs   []net.IP
	// Valid is how long the certificates last (default one year).
	Valid time.Duration
}

// Set is a CA certificate and the two key pairs it signed, PEM encoded.
type Set struct {
	CA                          []byte
	WorkerCert, WorkerKey       []byte
	ConductorCert, ConductorKey []byte
}

// Generate makes a CA, signs a worker and a conductor certificate with it,
// and discards the CA's key.
func Generate(o Options) (*Set, error) {
	if o.Valid <= 0 {
		o.Valid = 365 * 24 * time.Hour
	}
	now := time.Now().Add(-5 * time.Minute) // some slack for clocks behind this one
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "planrun control CA " + serial.Text(16)[:8]},
		NotBefore: now, NotAfter: now.Add(o.Valid),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("making the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	s := &Set{CA: pemCert(caDER)}
	leaf := func(cn string, usage x509.ExtKeyUsage, names []string, ips []net.IP) (cert, key []byte, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("making the %s key: %w", cn, err)
		}
		serial, err := serialNumber()
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
			NotBefore: now, NotAfter: now.Add(o.Valid),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames:    names, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("signing the %s certificate: %w", cn, err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, nil, err
		}
		return pemCert(der), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
	}
	names := append([]string{ServerName}, o.Names...)
	if s.WorkerCert, s.WorkerKey, err = leaf(ServerName, x509.ExtKeyUsageServerAuth, names, o.IPs); err != nil {
		return nil, err
	}
	if s.ConductorCert, s.ConductorKey, err = leaf("planrun-conductor", x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return nil, err
	}
	return s, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Files are the set's files by name (CAFile, WorkerCertFile, ...).
func (s *Set) Files() map[string][]byte {
	return map[string][]byte{
		CAFile: s.CA, WorkerCertFile: s.WorkerCert, WorkerKeyFile: s.WorkerKey,
		ConductorCertFile: s.ConductorCert, ConductorKeyFile: s.ConductorKey,
	}
}

// Write puts the set's files in dir (created 0700 if missing): keys 0600,
// certificates 0644. It overwrites nothing: a file already there is an
// error and nothing is written.
func (s *Set) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := s.Files()
	var exist []string
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			exist = append(exist, name)
		}
	}
	if len(exist) > 0 {
		return fmt.Errorf("%s already holds %v: remove them or give another folder", dir, exist)
	}
	var errs []error
	for _, name := range []string{CAFile, WorkerCertFile, WorkerKeyFile, ConductorCertFile, ConductorKeyFile} {
		mode := os.FileMode(0o644)
		if name == WorkerKeyFile || name == ConductorKeyFile {
			mode = 0o600
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = f.Write(files[name])
		errs = append(errs, err, f.Close())
	}
	return errors.Join(errs...)
}

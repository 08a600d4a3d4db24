// Package tlsconf is the part of a driver's tls: section that says what to
// trust and what to present, shared so every driver reads it alike. Whether
// TLS is used at all is the driver's own setting (a URL scheme, a switch).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Config holds certificate files and the verification opt-out. Errors name
// the keys under tls. and leave the driver's name to the caller.
type Config struct {
	CAFile             string `yaml:"ca_file" doc:"PEM file of CA certificates to trust instead of the system pool."`
	CertFile           string `yaml:"cert_file" doc:"PEM client certificate for mutual TLS (with key_file)."`
	KeyFile            string `yaml:"key_file" doc:"PEM private key of cert_file."`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" doc:"Accept any broker certificate (testing only)."`
}

// Given reports whether any setting is made.
func (c *Config) Given() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.InsecureSkipVerify
}

// Check reports settings that cannot work together, without reading files.
func (c *Config) Check() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("tls.cert_file and tls.key_file go together; give both or neither")
	}
	return nil
}

// Load reads the files into a client TLS config.
func (c *Config) Load() (*tls.Config, error) {
	// InsecureSkipVerify is an explicit opt-in for test brokers.
	tc := &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Package tlsconf is the part of a driver's tls: section that says what to
// trust and what to present, shared so every driver reads it alike. Whether
// TLS is used at all is the driver's own setting (a URL scheme, a switch).
package tlsconf

import "errors"

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

package yamldecode

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type files struct {
	CAFile string `yaml:"ca_file"`
}

type withInline struct {
	Enabled bool  `yaml:"enabled"`
	Files   files `yaml:",inline"`
}

// Keys of an inline struct are the parent's: decoded in place, listed among
// the known keys, and an unknown key is still an error.
func TestInlineKeys(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("enabled: true\nca_file: ca.pem\n"), &doc); err != nil {
		t.Fatal(err)
	}
	d := NewDecoder("p.yaml", nil)
	var v withInline
	d.Decode(doc.Content[0], &v, "tls")
	if err := d.Errs.Err(); err != nil || !v.Enabled || v.Files.CAFile != "ca.pem" {
		t.Fatalf("decoded %+v, %v", v, err)
	}
	if got := strings.Join(Fields(withInline{}), ","); got != "enabled,ca_file" {
		t.Errorf("Fields = %s", got)
	}
	if err := yaml.Unmarshal([]byte("ca_fil: x\n"), &doc); err != nil {
		t.Fatal(err)
	}
	d = NewDecoder("p.yaml", nil)
	d.Decode(doc.Content[0], &v, "tls")
	if err := d.Errs.Err(); err == nil || !strings.Contains(err.Error(), `1:1: unknown key "ca_fil" in tls (did you mean "ca_file"?); known: enabled, ca_file`) {
		t.Errorf("error = %v", err)
	}
}

package kube

import (
	"bytes"
	"fmt"
	"io"
	"regexp"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// noise is what a typed object marshals to that says nothing.
var noise = regexp.MustCompile(`(?m)^\s*creationTimestamp: null\n|^status: \{\}\n`)

// Render writes the run's objects as one multi-document YAML stream, for
// users who apply them with their own tooling. The token Secret is not
// written: its value would end up in files and repositories; the header
// says how to create it.
func Render(w io.Writer, s Spec, m *Manifests) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# planrun run %s: %d workers and a conductor in namespace %s.\n", s.RunID, s.Workers, s.Namespace)
	fmt.Fprintf(&b, "# Create the token Secret first; its value is not written here:\n")
	fmt.Fprintf(&b, "#   kubectl -n %s create secret generic %s --from-literal=%s=\"$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')\"\n", s.Namespace, m.Secret.Name, TokenKey)
	fmt.Fprintf(&b, "#   kubectl -n %s label secret %s %s=%s\n", s.Namespace, m.Secret.Name, RunLabel, s.RunID)
	fmt.Fprintf(&b, "# The report comes back in the conductor's log:\n")
	fmt.Fprintf(&b, "#   kubectl -n %s logs -f job/%s | planrun kube unpack --out reports\n", s.Namespace, m.Conductor.Name)
	fmt.Fprintf(&b, "# Delete everything afterwards:\n")
	fmt.Fprintf(&b, "#   kubectl -n %s delete job,service,configmap,secret -l %s=%s\n", s.Namespace, RunLabel, s.RunID)
	for _, o := range []runtime.Object{m.ConfigMap, m.Service, m.Workers, m.Conductor} {
		y, err := yaml.Marshal(o)
		if err != nil {
			return fmt.Errorf("rendering %T: %w", o, err)
		}
		b.WriteString("---\n")
		b.Write(noise.ReplaceAll(y, nil))
	}
	_, err := w.Write(b.Bytes())
	return err
}

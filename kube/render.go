package kube

import (
	"bytes"
	"fmt"
	"io"
	"regexp"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/planrun/planrun/cluster/certs"
)

// noise is what a typed object marshals to that says nothing.
var noise = regexp.MustCompile(`(?m)^\s*creationTimestamp: null\n|^status: \{\}\n`)

// Render writes the run's objects as one multi-document YAML stream, for
// users who apply them with their own tooling. The token Secret is not
// written: its token and keys would end up in files and repositories; the
// header says how to create it.
func Render(w io.Writer, s Spec, m *Manifests) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# planrun run %s: %d workers and a conductor in namespace %s.\n", s.RunID, s.Workers, s.Namespace)
	token := fmt.Sprintf("--from-literal=%s=\"$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')\"", TokenKey)
	if s.Insecure {
		fmt.Fprintf(&b, "# Create the token Secret first; its value is not written here:\n")
		fmt.Fprintf(&b, "#   kubectl -n %s create secret generic %s %s\n", s.Namespace, m.Secret.Name, token)
	} else {
		// The pods mount the certificates and keys from the Secret, under
		// the file names planrun certs writes.
		dir := s.Name() + "-certs"
		fmt.Fprintf(&b, "# Create the Secret first, with the token and the control channel's TLS certificates\n")
		fmt.Fprintf(&b, "# (%s, %s, %s, %s, %s); its values are not written here:\n",
			certs.CAFile, certs.WorkerCertFile, certs.WorkerKeyFile, certs.ConductorCertFile, certs.ConductorKeyFile)
		fmt.Fprintf(&b, "#   planrun certs %s\n", dir)
		fmt.Fprintf(&b, "#   kubectl -n %s create secret generic %s %s --from-file=%s\n", s.Namespace, m.Secret.Name, token, dir)
		fmt.Fprintf(&b, "#   rm -r %s   # the Secret holds them now; the CA's key was never written\n", dir)
	}
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

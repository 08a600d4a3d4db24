package kube

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/planrun/planrun/cluster/certs"
)

// TestSecretHoldsNoCAKey: the Secret kube run creates, as YAML, holds the
// token, the CA's certificate and the two key pairs it signed, and no key
// of the CA; each pod mounts only its own key pair and the CA's
// certificate, and is started with them.
func TestSecretHoldsNoCAKey(t *testing.T) {
	m, err := Prepare(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(m.Secret)
	if err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := yaml.UnmarshalStrict(y, &sec); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range sec.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"ca.crt", "conductor.crt", "conductor.key", "token", "worker.crt", "worker.key"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("Secret keys %v, want %v", keys, want)
	}
	caBlock, _ := pem.Decode(sec.Data[certs.CAFile])
	if caBlock == nil {
		t.Fatal("ca.crt is not PEM")
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("ca.crt: %v, CA %v", err, ca != nil && ca.IsCA)
	}
	caPub := ca.PublicKey.(*ecdsa.PublicKey)
	privateKeys := 0
	for k, v := range sec.Data {
		for rest := v; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if !strings.Contains(b.Type, "PRIVATE KEY") {
				continue
			}
			privateKeys++
			key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if key.(*ecdsa.PrivateKey).PublicKey.Equal(caPub) {
				t.Errorf("%s is the CA's private key", k)
			}
		}
	}
	if privateKeys != 2 {
		t.Errorf("%d private keys in the Secret, want 2 (worker and conductor)", privateKeys)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, c := range []struct {
		file  string
		usage x509.ExtKeyUsage
		name  string
	}{{certs.WorkerCertFile, x509.ExtKeyUsageServerAuth, certs.ServerName}, {certs.ConductorCertFile, x509.ExtKeyUsageClientAuth, ""}} {
		b, _ := pem.Decode(sec.Data[c.file])
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: c.name, KeyUsages: []x509.ExtKeyUsage{c.usage}}); err != nil {
			t.Errorf("%s: %v", c.file, err)
		}
	}

	for _, pod := range []struct {
		spec      corev1.PodSpec
		cert, key string
	}{
		{m.Workers.Spec.Template.Spec, certs.WorkerCertFile, certs.WorkerKeyFile},
		{m.Conductor.Spec.Template.Spec, certs.ConductorCertFile, certs.ConductorKeyFile},
	} {
		var items []string
		for _, v := range pod.spec.Volumes {
			if v.Secret != nil {
				for _, it := range v.Secret.Items {
					items = append(items, it.Key)
				}
			}
		}
		sort.Strings(items)
		want := []string{certs.CAFile, pod.cert, pod.key}
		sort.Strings(want)
		if !reflect.DeepEqual(items, want) {
			t.Errorf("pod mounts %v from the Secret, want %v", items, want)
		}
		args := pod.spec.Containers[0].Args
		for _, a := range []string{"--tls-cert", TLSDir + "/" + pod.cert, "--tls-key", TLSDir + "/" + pod.key, "--tls-ca", TLSDir + "/" + certs.CAFile} {
			if !slices.Contains(args, a) {
				t.Errorf("pod args %v lack %s", args, a)
			}
		}
		if slices.Contains(args, "--insecure") {
			t.Errorf("pod args %v have --insecure", args)
		}
	}
}

// TestRenderTLS: the rendered stream holds no key and no Secret, says how
// to make the Secret with planrun certs, and its Jobs mount it; with
// --insecure there are no certificates and the workers are told so.
func TestRenderTLS(t *testing.T) {
	s := testSpec()
	m, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, s, m); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"planrun certs planrun-t1-certs", "create secret generic planrun-t1-token", "--from-file=planrun-t1-certs"} {
		if !strings.Contains(out, want) {
			t.Errorf("render header lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "kind: Secret") {
		t.Errorf("render printed key material or the Secret")
	}
	workers := splitDocs(out)[2]
	if !strings.Contains(workers, "secretName: planrun-t1-token") || !strings.Contains(workers, "/tls/worker.key") {
		t.Errorf("the worker Job does not mount its key from the Secret:\n%s", workers)
	}

	s.Insecure = true
	m, err = Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if args := m.Workers.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--insecure") || slices.Contains(args, "--tls-cert") {
		t.Errorf("--insecure worker args %v", args)
	}
	if args := m.Conductor.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--tls-cert") {
		t.Errorf("--insecure conductor args %v", args)
	}
	pm, err := Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(pm.Secret.Data) != 1 {
		t.Errorf("--insecure Secret has %d keys, want the token only", len(pm.Secret.Data))
	}
}

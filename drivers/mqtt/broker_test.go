package mqtt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
	embedded "github.com/planrun/planrun/embedded/mqtt"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "planrun test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, caFile
}

func TestTLS(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		cert, caFile := selfSigned(t, t.TempDir())
		b, err := embedded.Start(embedded.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if !strings.HasPrefix(b.URL(), "ssl://") {
			t.Fatalf("URL() = %s", b.URL())
		}
		tg := mustOpen(t, &TargetConfig{Client: cl, URL: b.URL(), TLS: tlsconf.Config{CAFile: caFile}, SourceAddrs: []string{"127.0.0.1"}})
		if !strings.Contains(tg.Describe(), "tls") {
			t.Errorf("Describe() = %q", tg.Describe())
		}
		qos1Counts(t, tg, 200)
		mustOpen(t, &TargetConfig{Client: cl, URL: b.URL(), TLS: tlsconf.Config{InsecureSkipVerify: true}})
		if _, err := Driver.Open(testCtx(t, 10*time.Second), variant(&TargetConfig{Client: cl, URL: b.URL()})); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("open without trusting the broker's certificate: %v", err)
		}
	})
}

func TestProtocol31(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		if cl == clientLean5 {
			t.Skip("the test sets protocol_version: 3")
		}
		tg := mustOpen(t, &TargetConfig{Client: cl, URL: Embedded, ProtocolVersion: 3})
		if !strings.Contains(tg.Describe(), "MQTT 3.1,") && !strings.HasSuffix(tg.Describe(), "MQTT 3.1)") {
			t.Errorf("Describe() = %q", tg.Describe())
		}
		qos1Counts(t, tg, 200)
	})
}

// TestReconnect restarts the broker under a fleet, a producer and a
// consumer: the clients come back by themselves, the gauges say so, and the
// consumer subscribes again.
func TestReconnect(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		b1, err := embedded.Start(embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		addr := b1.Addr()
		// The waits below only guard against a hang: on a busy machine a
		// connection attempt, and so the back-off after it, takes longer.
		tg := mustOpen(t, &TargetConfig{Client: cl, URL: "tcp://" + addr, ConnectTimeout: 30 * time.Second})
		conns, err := tg.Connect(testCtx(t, 2*time.Minute), drivers.ConnectSpec{Workload: "fleet"}, &ProduceOptions{Clients: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer conns.Close()
		topic := unique("planrun/reconnect")
		c := newConsumer(t, tg, topic, "g", "c", nil)
		col := collect(t, c)
		p := newProducer(t, tg, topic, 1, &ProduceOptions{Clients: 1})
		eventually(t, time.Minute, "5 connected", func() bool { return conns.Gauges()["connected"] == 5 })

		// Restart at once: paho backs off further after each failed attempt.
		_ = b1.Close()
		b2, err := embedded.Start(embedded.Options{Addr: addr})
		if err != nil {
			t.Fatalf("restart the broker on %s: %v", addr, err)
		}
		defer b2.Close()
		eventually(t, 2*time.Minute, "clients to reconnect", func() bool {
			return conns.Gauges()["reconnects"] == 5 && conns.Gauges()["connected"] == 5 &&
				c.(*Consumer).Gauges()["reconnects"] == 1 && c.(*Consumer).Gauges()["connected"] == 1 &&
				p.(*Producer).Gauges()["reconnects"] == 1 && p.(*Producer).Gauges()["connected"] == 1
		})
		// The consumer subscribed again: a message published now arrives. The
		// resubscription runs right after the reconnect, so retry until it lands.
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; col.n.Load() == 0; i++ {
			if time.Now().After(deadline) {
				t.Fatal("no message after the broker restart")
			}
			if err := p.Send(testCtx(t, 5*time.Second), &drivers.Message{Topic: topic, Value: []byte(fmt.Sprint("after-", i))}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

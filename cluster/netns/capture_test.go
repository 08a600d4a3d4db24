package netns_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// capture records the control connections of the worker in h with tcpdump
// on its namespace's link (eth0), from now until the returned function is
// called; that function returns what the connections carried. tcpdump
// keeps root (-Z root): dropping it would clear the signal that ends it
// with the test process.
func (n *network) capture(t *testing.T, h *host) func() *payload {
	t.Helper()
	file := filepath.Join(n.dir, strings.ReplaceAll(t.Name(), "/", "-")+".pcap")
	p := n.start(t, h, "tcpdump", nil, "listening on", "tcpdump", "-i", "eth0", "-Z", "root", "-n", "--immediate-mode", "-U", "-s", "0", "-w", file,
		"tcp", "port", fmt.Sprint(controlPort))
	return func() *payload {
		t.Helper()
		p.stop()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := tcpPayload(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Logf("captured %d bytes (%d of TCP payload) on %s's link", len(data), pl.size(), h.name)
		if pl.size() == 0 {
			t.Fatalf("the capture of %s's control connection is empty; tcpdump said:\n%s", h.name, p.out)
		}
		return pl
	}
}

// payload is what a capture's TCP segments carried, each direction of each
// connection in the order captured, so that a string split over two
// segments is found too.
type payload struct {
	raw     []byte
	streams map[string]*bytes.Buffer
}

func (p *payload) size() int {
	n := 0
	for _, b := range p.streams {
		n += b.Len()
	}
	return n
}

func (p *payload) contains(s string) bool {
	if bytes.Contains(p.raw, []byte(s)) {
		return true
	}
	for _, b := range p.streams {
		if bytes.Contains(b.Bytes(), []byte(s)) {
			return true
		}
	}
	return false
}

// startsWith reports whether every stream begins with prefix.
func (p *payload) startsWith(prefix []byte) bool {
	for _, b := range p.streams {
		if !bytes.HasPrefix(b.Bytes(), prefix) {
			return false
		}
	}
	return len(p.streams) > 0
}

// tcpPayload reads a pcap file of Ethernet frames (tcpdump -w) and gathers
// the TCP payload of its IPv4 packets by direction.
func tcpPayload(data []byte) (*payload, error) {
	if len(data) < 24 {
		return nil, fmt.Errorf("%d bytes: not a pcap file", len(data))
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(data) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("not a pcap file (magic %x)", data[:4])
	}
	if lt := bo.Uint32(data[20:]); lt != 1 {
		return nil, fmt.Errorf("link type %d, want Ethernet (1)", lt)
	}
	p := &payload{raw: data, streams: map[string]*bytes.Buffer{}}
	for rest := data[24:]; len(rest) >= 16; {
		n := int(bo.Uint32(rest[8:]))
		if len(rest) < 16+n {
			break // cut short by the end of the capture
		}
		frame := rest[16 : 16+n]
		rest = rest[16+n:]
		if len(frame) < 14+20 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
			continue
		}
		ip := frame[14:]
		ihl, total := int(ip[0]&0x0f)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if ip[9] != 6 || total > len(ip) || ihl+20 > total {
			continue
		}
		tcp := ip[ihl:total]
		off := int(tcp[12]>>4) * 4
		if off > len(tcp) || off == len(tcp) {
			continue
		}
		key := fmt.Sprintf("%d.%d.%d.%d:%d>%d.%d.%d.%d:%d", ip[12], ip[13], ip[14], ip[15], binary.BigEndian.Uint16(tcp[0:]),
			ip[16], ip[17], ip[18], ip[19], binary.BigEndian.Uint16(tcp[2:]))
		if p.streams[key] == nil {
			p.streams[key] = &bytes.Buffer{}
		}
		p.streams[key].Write(tcp[off:])
	}
	return p, nil
}

// delayed puts a toxiproxy in the root namespace in front of the worker at
// addr that delays what the conductor sends it (upstream) by d, and
// returns the proxy's address, for the conductor.
func delayed(t *testing.T, addr string, d time.Duration) string {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(srv, "worker", "127.0.0.1:0", addr)
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Stop)
	toxic := fmt.Sprintf(`{"name": "delay", "type": "latency", "stream": "upstream", "toxicity": 1, "attributes": {"latency": %d}}`, d.Milliseconds())
	if _, err := px.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
		t.Fatal(err)
	}
	return px.Listen
}

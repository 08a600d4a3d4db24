package netfault

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echo serves one line back per line on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	return time.Since(start)
}

// A fault laid over the link delays every round trip by at least its
// latency, on connections open before it and after; a cut closes them and
// refuses new ones; restoring brings the listener back on its address.
func TestLinkFaults(t *testing.T) {
	up := echo(t)
	l := New(Condition{})
	defer l.Close()
	addr, err := l.Route(up)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := l.Route(up); again != addr {
		t.Fatalf("a second route for %s is %s, the first %s", up, again, addr)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip(t, c, r)

	if err := l.Set(Fault{Condition: Condition{Latency: 150 * time.Millisecond, Jitter: 10 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d := roundTrip(t, c, r); d < 140*time.Millisecond {
			t.Errorf("round trip %s with 150ms ±10ms latency on an open connection", d)
		}
	}
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if d := roundTrip(t, c2, bufio.NewReader(c2)); d < 140*time.Millisecond {
		t.Errorf("round trip %s with 150ms ±10ms latency on a new connection", d)
	}

	// A reset closes a connection as soon as data crosses it, an open
	// one as well as a new one.
	if err := l.Set(Fault{Reset: true}); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []net.Conn{c2, dial(t, addr)} {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write([]byte("ping\n"))
		if n, err := conn.Read(make([]byte, 8)); err == nil {
			t.Errorf("a connection through a reset link read %d bytes", n)
		}
	}

	if err := l.Set(Fault{Cut: true}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("a connection open through a cut link still reads")
	}
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing a cut link: %v, want connection refused", err)
	}

	if err := l.Set(Fault{}); err != nil {
		t.Fatal(err)
	}
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialing the restored link: %v", err)
	}
	defer c3.Close()
	roundTrip(t, c3, bufio.NewReader(c3))
}

func TestParseBandwidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bandwidth
		err  bool
	}{
		{in: "1MB/s", want: 1_000_000},
		{in: "250kB/s", want: 250_000},
		{in: "1MiB/s", want: 1 << 20},
		{in: "8Mbit/s", want: 1_000_000},
		{in: "100kbit/s", want: 12_500},
		{in: "1MB", err: true},
		{in: "fast/s", err: true},
	} {
		got, err := ParseBandwidth(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBandwidth(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
	if s := Bandwidth(1_000_000).String(); s != "1MB/s" {
		t.Errorf("1MB/s prints as %s", s)
	}
}

func TestConditionCheck(t *testing.T) {
	for _, tc := range []struct {
		c  Condition
		ok bool
	}{
		{Condition{Latency: 200 * time.Millisecond, Jitter: 20 * time.Millisecond}, true},
		{Condition{Jitter: 20 * time.Millisecond}, false},
		{Condition{Latency: 10 * time.Millisecond, Jitter: 20 * time.Millisecond}, false},
		{Condition{Latency: 1500 * time.Microsecond}, false},
		{Condition{Bandwidth: 1500}, false},
		{Condition{Bandwidth: 1_000_000}, true},
	} {
		if err := tc.c.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

package units

import (
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want Size
		err  bool
	}{
		{"200B", 200, false},
		{"1KB", 1000, false},
		{"1KiB", 1024, false},
		{"1kB", 1000, false},
		{"100GB", 100e9, false},
		{"1.5GiB", 3 << 29, false},
		{"256MiB", 256 << 20, false},
		{"1024", 1024, false},
		{"", 0, true},
		{"-1KB", 0, true},
		{"1XB", 0, true},
		{"KB", 0, true},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err != nil) != c.err {
			t.Errorf("ParseSize(%q) error = %v, want error %v", c.in, err, c.err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseSize(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestSizeStringRoundTrip(t *testing.T) {
	for _, s := range []Size{0, 1, 1000, 1024, 1500, 100e9, 3 << 29, 256 << 20, 1e6 + 1} {
		back, err := ParseSize(s.String())
		if err != nil || back != s {
			t.Errorf("%d -> %q -> %d, %v", s, s.String(), back, err)
		}
	}
}

func TestValue(t *testing.T) {
	type inner struct {
		P99 float64 `json:"p99"`
		Max float64
	}
	for _, c := range []struct {
		in   any
		want string
	}{
		{42.0, "42"},
		{5062.5, "5062.5"},
		{73.21234567, "73.2123"},
		{1.5e7, "15000000"},
		{1234567.5, "1234567.5"},
		{math.NaN(), "n/a"},
		{"abc", "abc"},
		{"", `""`},
		{"a b", `"a b"`},
		{true, "true"},
		{nil, "none"},
		{[]any{"a", 2.0}, "a, 2"},
		{map[string]any{"exit": 0.0, "pid": 3345.0, "running": false, "signal": "", "stdout": "ok"}, `exit=0 pid=3345 running=false signal="" stdout=ok`},
		{map[string]float64{"rate": 5000, "failed_rate": 5062.5}, "failed_rate=5062.5 rate=5000"},
		{map[string]any{"b": map[string]any{"y": 1.0, "x": "v"}, "a": []any{1.0, 2.0}}, "a=[1, 2] b.x=v b.y=1"},
		{inner{P99: 3.5, Max: 9}, "max=9 p99=3.5"},
		{&inner{P99: 1}, "max=0 p99=1"},
		{[]any{map[string]any{"a": 1.0}}, "{a=1}"},
		{map[string]float64{}, "none"},
	} {
		got := Value(c.in)
		if got != c.want {
			t.Errorf("Value(%#v) = %s, want %s", c.in, got, c.want)
		}
		if strings.Contains(got, "map[") {
			t.Errorf("Value(%#v) = %s: Go syntax", c.in, got)
		}
	}
}

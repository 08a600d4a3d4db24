package units

import "testing"

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

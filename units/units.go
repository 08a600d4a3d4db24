// Package units parses and prints the sizes and rates plans and reports use.
// MB means 10^6 bytes and MiB 2^20 bytes, everywhere.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. In a plan it is written with a unit: 200B, 1KB
// (1000 bytes), 1KiB (1024 bytes), 100GB, 1.5GiB. A bare number is bytes.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"kB", 1e3}, {"B", 1},
}

// ParseSize reads a size such as "1KiB" or "100GB".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size; want a number with a unit such as 1KiB, 200B or 100GB")
	}
	mult := 1.0
	num := t
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			num = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad size %q; want a number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(math.Round(b)), nil
}

// String prints the size exactly when it is a whole number of a binary or
// decimal unit, else in bytes, so it parses back to the same value.
func (s Size) String() string {
	n := int64(s)
	if n == 0 {
		return "0B"
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// MB converts bytes to decimal megabytes (10^6 bytes).
func MB(bytes float64) float64 { return bytes / 1e6 }

// Human prints a byte count in decimal units with two decimals (reports say MB = 10^6 bytes).
func Human(bytes float64) string {
	switch {
	case bytes >= 1e12:
		return fmt.Sprintf("%.2f TB", bytes/1e12)
	case bytes >= 1e9:
		return fmt.Sprintf("%.2f GB", bytes/1e9)
	case bytes >= 1e6:
		return fmt.Sprintf("%.2f MB", bytes/1e6)
	case bytes >= 1e3:
		return fmt.Sprintf("%.2f KB", bytes/1e3)
	}
	return fmt.Sprintf("%.0f B", bytes)
}

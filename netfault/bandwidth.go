package netfault

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/yamldecode"
)

// Bandwidth is a data rate in bytes per second. A plan writes it as a size
// per second, 1MB/s (10^6 bytes/s), 250kB/s, 1MiB/s, or in bits, 8Mbit/s
// (10^6 bytes/s), 100kbit/s, 1Gbit/s.
type Bandwidth int64

var bitUnits = []struct {
	suffix string
	mult   float64
}{{"kbit", 1e3}, {"Kbit", 1e3}, {"Mbit", 1e6}, {"Gbit", 1e9}, {"bit", 1}}

// ParseBandwidth reads a bandwidth such as 1MB/s or 10Mbit/s.
func ParseBandwidth(s string) (Bandwidth, error) {
	t := strings.TrimSpace(s)
	num, ok := strings.CutSuffix(t, "/s")
	if !ok {
		return 0, fmt.Errorf("bandwidth %q needs a rate unit: a size per second such as 1MB/s (10^6 bytes/s) or 250kB/s, or bits such as 10Mbit/s", s)
	}
	for _, u := range bitUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return 0, fmt.Errorf("bad bandwidth %q; write it like 10Mbit/s or 1MB/s", s)
			}
			return Bandwidth(math.Round(v * u.mult / 8)), nil
		}
	}
	sz, err := units.ParseSize(num)
	if err != nil {
		return 0, fmt.Errorf("bad bandwidth %q: %v", s, err)
	}
	return Bandwidth(sz), nil
}

// String prints the rate so that it parses back to the same value.
func (b Bandwidth) String() string { return units.Size(b).String() + "/s" }

// PlanType names the type in `planrun explain` and the README.
func (Bandwidth) PlanType() string { return "bandwidth" }

// PlanAlternatives is the shape of the value, for the plan schema.
func (Bandwidth) PlanAlternatives() []any { return []any{""} }

// UnmarshalPlan reads a bandwidth.
func (b *Bandwidth) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	s, ok := d.Scalar(n, "bandwidth")
	if !ok {
		return
	}
	v, err := ParseBandwidth(s)
	if err != nil {
		d.Errs.At(n, "%v", err)
		return
	}
	*b = v
}

package drivers

import (
	"reflect"
	"strings"
)

// Capabilities are what a driver declares it can do. The driver
// conformance suite (drivers/drivertest) runs the checks that follow from
// them and checks that the driver's targets match them; `planrun explain`
// and the README's capability matrix print them. Each field's doc tag
// says what the capability promises; its matrix tag is the column
// heading.
type Capabilities struct {
	Consume bool `matrix:"consume" doc:"consumers receive what producers sent, counted by message identity (lost and duplicates)"`
	// Positions: a consumer group's position outlives its consumers.
	Positions   bool `matrix:"committed positions" doc:"a stopped consumer's group keeps its position (mqtt: a persistent session): started again, it receives what was sent meanwhile and nothing twice; without it, what is sent while no consumer is attached is not delivered to it"`
	Restart     bool `matrix:"broker restart" doc:"clients survive a broker stopped and started mid-run: disconnected and reconnected events, an outage on the record, and loss counted exactly"`
	Relay       bool `matrix:"relay" doc:"a relay reads from and publishes to it"`
	Credentials bool `matrix:"credentials" doc:"the target takes a user and password; wrong ones fail at open with an error that names the target and never the password"`
	Embedded    bool `matrix:"embedded broker" doc:"the target can run its broker in process, so plans run on one machine (embedded brokers speak the real protocol; memory has none)"`
	Lag         bool `matrix:"lag" doc:"the broker says how far a consumer group is behind (backlog in reports and expressions)"`
	Topics      bool `matrix:"topics" doc:"topics are created with a partition or queue count (a target's topics:)"`
	Connect     bool `matrix:"connect" doc:"the connect workload holds idle connections"`
	Probe       bool `matrix:"probe" doc:"the probe step asks the target a one-off question"`
}

// Capable is a Driver that declares its capabilities. Drivers made with
// Define declare them by passing Capabilities to Define.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what the driver registered under name declares,
// and whether it declares anything.
func CapabilitiesOf(name string) (Capabilities, bool) {
	d, ok := Lookup(name)
	if !ok {
		return Capabilities{}, false
	}
	c, ok := d.(Capable)
	if !ok {
		return Capabilities{}, false
	}
	return c.Capabilities(), true
}

// Capability is one field of Capabilities, as the manual names it.
type Capability struct {
	Field  string // the Go field name
	Column string // the matrix heading
	Doc    string
}

// CapabilityList lists the fields of Capabilities in declaration order.
func CapabilityList() []Capability {
	t := reflect.TypeOf(Capabilities{})
	out := make([]Capability, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, Capability{Field: f.Name, Column: f.Tag.Get("matrix"), Doc: f.Tag.Get("doc")})
	}
	return out
}

// Has reports whether c has the capability of the field named field.
func (c Capabilities) Has(field string) bool {
	return reflect.ValueOf(c).FieldByName(field).Bool()
}

// String lists the capabilities c has, by their matrix headings.
func (c Capabilities) String() string {
	var on []string
	for _, f := range CapabilityList() {
		if c.Has(f.Field) {
			on = append(on, f.Column)
		}
	}
	if len(on) == 0 {
		return "none declared"
	}
	return strings.Join(on, ", ")
}

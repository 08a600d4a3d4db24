package workloads

import (
	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// eventSink records a driver's connection events in a workload's recorder.
// A workload with several driver consumers (or a relay's two sides) gives
// each its own base, so their client indexes stay apart, and instances
// scales each one's connection count to the workload's.
type eventSink struct {
	rec       *metrics.Recorder
	base      int
	instances int
}

// sideStride separates the client indexes of one workload's driver
// consumers and producers; a fleet is far smaller.
const sideStride = 1 << 24

func newSink(rec *metrics.Recorder, base, instances int) drivers.EventSink {
	return eventSink{rec: rec, base: base, instances: max(instances, 1)}
}

// Event implements drivers.EventSink.
func (s eventSink) Event(e drivers.Event) {
	s.rec.Event(metrics.ConnEvent{Kind: e.Kind, Reason: e.Reason, Client: s.base + e.Client, Of: e.Of * s.instances, At: e.At.UnixNano()})
}

// sendFailed records a failed send as a send_error event of its kind.
func sendFailed(s drivers.EventSink, err error) {
	drivers.Emit(s, drivers.Event{Kind: drivers.SendError, Reason: drivers.Reason(err)})
}

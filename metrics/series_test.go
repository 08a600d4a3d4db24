package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A run read back from its series file has the figures the collector
// would have finished it with: phases, counts, rates and percentiles.
func TestReadSeriesEqualsFinish(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := NewCollector(t0)
	var file bytes.Buffer
	c.SetSink(&file, "")
	c.SetSeriesHeader(SeriesHeader{Label: "x"})
	prod := NewRecorder("producer", "produce", Role{Sends: true})
	cons := NewRecorder("consumer", "consume", Role{Receives: true})
	c.Add(prod)
	c.Add(cons)
	cons.SetLost(func() int64 { return 3 })
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	send := func(n int, from float64) {
		for i := range n {
			now := at(from + float64(i)/float64(n))
			prod.Sent(now.Add(-time.Duration(i%50+1) * time.Millisecond))
			prod.Acked(100, time.Duration(i%50+1)*time.Millisecond, now)
			if i%4 != 0 {
				cons.Received(100, time.Duration(i%70+2)*time.Millisecond, now)
			}
		}
	}
	c.StartPhase("warm", at(0.01))
	for s := range 3 {
		send(500+100*s, float64(s))
		switch s {
		case 1: // an outage of one of two clients, with sends failing in it
			prod.Event(ConnEvent{Kind: EventDisconnected, Reason: "connection refused", Client: 1, Of: 2, At: at(1.5).UnixNano()})
			for range 10 {
				prod.Sent(at(1.55))
				prod.Failed(at(1.55))
			}
			prod.Event(ConnEvent{Kind: EventSendError, Reason: "timeout", At: at(1.6).UnixNano()})
		case 2:
			prod.Event(ConnEvent{Kind: EventReconnected, Client: 1, Of: 2, At: at(2.7).UnixNano()})
			cons.Event(ConnEvent{Kind: EventRebalance, At: at(2.8).UnixNano()})
		}
		c.Sample(at(float64(s + 1)))
	}
	c.StartPhase("steady", at(3.2))
	send(300, 3.2)
	c.Sample(at(4))
	send(700, 4)
	c.Sample(at(5))
	want := c.Finish(at(5))
	want.FinalRates(map[string]Role{"producer": prod.Role, "consumer": cons.Role})

	// A kill may cut the last line short: it is left out.
	data := file.String() + `{"workload":"producer","t":6,"interval_s":1,"state":{"sent":99`
	runs, err := ReadSeries(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Header.Label != "x" || !reflect.DeepEqual(runs[0].Header.Order, []string{"producer", "consumer"}) {
		t.Fatalf("runs %+v", runs)
	}
	got := runs[0].Metrics
	if !reflect.DeepEqual(got.PhaseNames(), want.PhaseNames()) {
		t.Fatalf("phases %v, want %v", got.PhaseNames(), want.PhaseNames())
	}
	for i, p := range want.Phases {
		for name, w := range p.Workloads {
			w.Running = false
			if g := got.Phases[i].Workloads[name]; !sameFigures(t, g, w) {
				t.Errorf("phase %s, %s:\n got %+v\nwant %+v", p.Name, name, g, w)
			}
		}
	}
	for name, w := range want.Workloads {
		if g := got.Workloads[name]; !sameFigures(t, g, w) {
			t.Errorf("run, %s:\n got %+v\nwant %+v", name, g, w)
		}
	}
	if len(want.Events) != 4 || len(want.Outages) != 1 || want.Outages[0].Failed != 10 {
		t.Fatalf("the test's events did not happen: %+v, %+v", want.Events, want.Outages)
	}
	if !sameFigures(t, got.Events, want.Events) || !sameFigures(t, got.Outages, want.Outages) {
		t.Errorf("events:\n got %+v %+v\nwant %+v %+v", got.Events, got.Outages, want.Events, want.Outages)
	}
	if !reflect.DeepEqual(got.Series, want.Series) {
		t.Errorf("series differ:\n got %+v\nwant %+v", got.Series, want.Series)
	}
}

// sameFigures compares two values field by field through their JSON form;
// numbers may differ in the last bits (a phase's length is the difference
// of two offsets from the start in the file, of two times in the run).
func sameFigures(t *testing.T, a, b any) bool {
	var ma, mb any
	for _, x := range []struct {
		v   any
		dst *any
	}{{a, &ma}, {b, &mb}} {
		data, err := json.Marshal(x.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, x.dst); err != nil {
			t.Fatal(err)
		}
	}
	return near(ma, mb)
}

func near(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !near(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !near(v, y[k]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(x))
	}
	return reflect.DeepEqual(a, b)
}

func TestReadSeriesErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"", "no run in the series file"},
		{`{"workload":"p","t":1,"interval_s":1}` + "\n", "line 1: a sample before any run header"},
		{`{"header":{"order":["p"]}}` + "\n" + `{"workload":"q","t":1,"interval_s":1}` + "\n", `line 2: workload "q" is not in the run's header`},
	} {
		if _, err := ReadSeries(strings.NewReader(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.file, err, c.want)
		}
	}
}

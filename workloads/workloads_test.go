package workloads

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers/memory"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Run: 7, Producer: 3<<16 | 129, Seq: 1<<40 + 5, SentAt: time.Now().UnixNano()}
	b := make([]byte, 100)
	h.Put(b)
	got, ok := ParseHeader(b)
	if !ok || got != h {
		t.Fatalf("got %+v %v, want %+v", got, ok, h)
	}
	if _, ok := ParseHeader(make([]byte, 100)); ok {
		t.Error("a zero payload parsed as a header")
	}
	if _, ok := ParseHeader(b[:HeaderSize-1]); ok {
		t.Error("a short payload parsed as a full header")
	}
}

func TestShortHeader(t *testing.T) {
	start := time.Now()
	sent := start.Add(1234567 * time.Microsecond)
	b := make([]byte, 11)
	PutShort(b, 42, sent, start)
	got, ok := ParseShort(b, start)
	if !ok || !got.Equal(sent) {
		t.Fatalf("got %v %v, want %v", got, ok, sent)
	}
	if _, ok := ParseShort(make([]byte, 30), start); ok {
		t.Error("a payload long enough for a full header parsed as short")
	}
}

func TestAccountingCountsDuplicatesAndReordering(t *testing.T) {
	a := NewAccounting(1)
	g := a.Group(GroupKey{Target: "t", Subscription: "x", Group: "g"}, nil)
	for seq := range uint64(5) {
		a.Ack("t", "x", Header{Run: 1, Producer: 9, Seq: seq}, true, 10)
	}
	steps := []struct {
		seq            uint64
		part           int32
		dup, reordered bool
	}{
		{0, 0, false, false}, {2, 0, false, false}, {1, 0, false, true}, {2, 0, true, false}, {3, 1, false, false},
	}
	for i, s := range steps {
		dup, re := a.Receive(g, Header{Run: 1, Producer: 9, Seq: s.seq}, true, s.part, 10)
		if dup != s.dup || re != s.reordered {
			t.Errorf("step %d: dup %v reordered %v, want %v %v", i, dup, re, s.dup, s.reordered)
		}
	}
	if b := a.Backlog(g); b.Messages != 1 || b.Bytes != 10 {
		t.Errorf("backlog %+v, want 1 message of 10 bytes", b)
	}
}

// The pacer hands out due times on a schedule that does not slip when
// sends are late: message k is due at start + k/rate.
func TestPacerSchedule(t *testing.T) {
	start := time.Now().Add(-time.Hour) // every send is already due
	p := NewPacer(start, 1000, 3)
	for k := int64(0); k < 3; k++ {
		got, due, ok := p.Next(context.Background())
		if !ok || got != k || !due.Equal(start.Add(time.Duration(k)*time.Millisecond)) {
			t.Fatalf("send %d: %d %v %v", k, got, due.Sub(start), ok)
		}
	}
	if _, _, ok := p.Next(context.Background()); ok {
		t.Error("pacer went past its limit")
	}
}

// The run hears of a workload's start and end only once Running and the
// figures show them, so a wait woken by the news sees the new state: a
// producer that reached its count is not running and has every ack counted.
func TestLifecycleNotifiesAfterTheChange(t *testing.T) {
	tg, err := memory.Driver.Open(context.Background(), &memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		running bool
		acked   int64
	}
	var p *Producer
	seen := make(chan state, 2)
	env := &Shared{Run: 1, Start: time.Now(), Acct: NewAccounting(1), Fail: func(err error) { t.Error(err) }, Warn: func(string) {}}
	env.Changed = func() { seen <- state{p.Running(), p.Recorder().Counters().Acked} }
	p = NewProducer("p", ProduceSpec{Topic: "a", Count: 100}, nil, tg, "mq", 0, env)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := <-seen; !s.running {
		t.Errorf("at the start the workload reads %+v, want running", s)
	}
	if s := <-seen; s.running || s.acked != 100 {
		t.Errorf("at the finish the workload reads %+v, want not running with 100 acked", s)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Error(err)
	}
}

func BenchmarkHeaderPut(b *testing.B) {
	buf := make([]byte, 1024)
	h := Header{Run: 1, Producer: 2, SentAt: time.Now().UnixNano()}
	for i := 0; i < b.N; i++ {
		h.Seq = uint64(i)
		h.Put(buf)
	}
}

// A schedule's due times follow the integral of its rate: a ramp from 0 to
// 1000/s over 2s has 1000 messages due by its end, the hold after it 1000
// a second; a rate set in the middle continues from the count reached.
func TestPacerRateSchedule(t *testing.T) {
	to := func(f float64) *float64 { return &f }
	start := time.Unix(1000, 0)
	s := newSchedule(start, Rate{Stages: []Stage{{To: to(1000), Over: 2 * time.Second}, {Hold: time.Second}, {To: to(0)}}}, 0, 0)
	for _, c := range []struct {
		k    int64
		want float64 // seconds after start
	}{{0, 0}, {250, 1}, {1000, 2}, {1500, 2.5}} {
		d, ok := s.due(c.k)
		if got := d.Sub(start).Seconds(); !ok || math.Abs(got-c.want) > 1e-6 {
			t.Errorf("message %d due at %.6fs (%v), want %.6fs", c.k, got, ok, c.want)
		}
	}
	if _, ok := s.due(2001); ok {
		t.Error("a schedule that ends at rate 0 reached message 2001")
	}
	p := NewSchedulePacer(start, Rate{Stages: []Stage{{To: to(1000), Over: 2 * time.Second}}}, -1)
	p.SetRate(start.Add(time.Second), FixedRate(100))
	s = p.sched.Load()
	// 250 messages were due by the change (1s of a ramp of 500/s²).
	for k, want := range map[int64]float64{250: 1, 350: 2} {
		d, _ := s.due(k)
		if got := d.Sub(start).Seconds(); math.Abs(got-want) > 1e-6 {
			t.Errorf("after the change message %d is due at %.6fs, want %.6fs", k, got, want)
		}
	}
	if r := p.RateAt(start.Add(3 * time.Second)); r != 100 {
		t.Errorf("rate after the change %g, want 100", r)
	}
}

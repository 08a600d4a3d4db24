package steps

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/plan"
)

// statusRuntime keeps the status a step sets; a step calling any other
// method of the runtime panics the test.
type statusRuntime struct {
	plan.Runtime
	status func(now time.Time) string
}

func (s *statusRuntime) SetStatus(string) { s.status = nil }

func (s *statusRuntime) SetStatusFunc(f func(now time.Time) string) { s.status = f }

// A sleep's progress line says the time left when it is printed, and
// nothing once the sleep has ended.
func TestSleepStatusIsTheTimeLeftWhenPrinted(t *testing.T) {
	r := &statusRuntime{}
	began := time.Now()
	s := &Sleep{For: 300 * time.Millisecond}
	if err := s.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.status == nil {
		t.Fatal("the sleep set no status")
	}
	for _, c := range []struct {
		at   time.Duration // after the sleep began
		want string
	}{
		{0, "300ms left"},
		{120 * time.Millisecond, "180ms left"},
		{time.Hour, ""},
	} {
		// The sleep began between began and its Run: its end is at most
		// a few milliseconds after began+300ms.
		got := r.status(began.Add(c.at))
		if c.want == "" {
			if got != "" {
				t.Errorf("%s after the start: %q, want nothing", c.at, got)
			}
			continue
		}
		left, err := time.ParseDuration(strings.TrimSuffix(got, " left"))
		want, _ := time.ParseDuration(strings.TrimSuffix(c.want, " left"))
		if err != nil || !strings.HasSuffix(got, " left") || left < want-100*time.Millisecond || left > want+100*time.Millisecond {
			t.Errorf("%s after the start: %q, want about %q", c.at, got, c.want)
		}
	}
	if got := r.status(time.Now()); got != "" {
		t.Errorf("after the sleep ended: %q, want nothing", got)
	}
	for _, c := range []struct {
		left time.Duration
		want string
	}{
		{5 * time.Second, "5s left"},
		{4960 * time.Millisecond, "5s left"},
		{4940 * time.Millisecond, "4.9s left"},
		{1234 * time.Millisecond, "1.2s left"},
		{90 * time.Second, "1m30s left"},
		{90*time.Second + 400*time.Millisecond, "1m30s left"},
		{30 * time.Millisecond, "100ms left"},
		{0, ""},
		{-time.Second, ""},
	} {
		if got := timeLeft(c.left); got != c.want {
			t.Errorf("timeLeft(%s) = %q, want %q", c.left, got, c.want)
		}
	}
}

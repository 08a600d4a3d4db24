package mqtt

import (
	"bytes"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// resumeLimit bounds how long a resuming session waits for publishes in
// progress, and how long publishes wait for a resume that never finished
// (its client went away between CONNECT and CONNACK).
const resumeLimit = 2 * time.Second

// resumeGate keeps a persistent session from losing messages while it is
// resumed. mochi acknowledges a QoS 1 publish before it hands the message
// to the subscribers, and when a client resumes a session it copies the old
// session's pending messages before it registers the new client: a message
// handed to the old session between the two is dropped with it. So a
// publisher can hold its PUBACK while the message it acknowledged is lost
// to a consumer that reconnects at that moment. The gate lets no publish run
// its fan-out while a session is being taken over, and a takeover waits for
// fan-outs in progress to finish.
type resumeGate struct {
	mochi.HookBase
	srv *mochi.Server

	mu         sync.Mutex
	cond       *sync.Cond
	publishing map[*mochi.Client]struct{} // between OnPublish and OnPublished
	resuming   map[*mochi.Client]time.Time
}

func newResumeGate(srv *mochi.Server) *resumeGate {
	g := &resumeGate{srv: srv, publishing: map[*mochi.Client]struct{}{}, resuming: map[*mochi.Client]time.Time{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *resumeGate) ID() string { return "planrun-resume-gate" }

func (g *resumeGate) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnSessionEstablish, mochi.OnSessionEstablished,
		mochi.OnPublish, mochi.OnPublished, mochi.OnDisconnect}, []byte{b})
}

// resumeActive reports whether a takeover is under way, forgetting those
// past their limit.
func (g *resumeGate) resumeActive(now time.Time) bool {
	for cl, until := range g.resuming {
		if now.After(until) {
			delete(g.resuming, cl)
		}
	}
	return len(g.resuming) > 0
}

// wakeAt makes waiters look again at t, so bounded waits end.
func (g *resumeGate) wakeAt(t time.Time) {
	time.AfterFunc(time.Until(t)+time.Millisecond, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
}

// OnSessionEstablish runs before mochi takes a session over.
func (g *resumeGate) OnSessionEstablish(cl *mochi.Client, pk packets.Packet) {
	if pk.Connect.Clean {
		return
	}
	if _, ok := g.srv.Clients.Get(cl.ID); !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	until := time.Now().Add(resumeLimit)
	g.resuming[cl] = until
	g.wakeAt(until)
	for len(g.publishing) > 0 && time.Now().Before(until) {
		g.cond.Wait()
	}
}

// OnSessionEstablished runs once the new client is registered.
func (g *resumeGate) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) { g.endResume(cl) }

func (g *resumeGate) endResume(cl *mochi.Client) {
	g.mu.Lock()
	if _, ok := g.resuming[cl]; ok {
		delete(g.resuming, cl)
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// OnPublish runs before the PUBACK and the fan-out.
func (g *resumeGate) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	g.mu.Lock()
	for g.resumeActive(time.Now()) {
		g.cond.Wait()
	}
	g.publishing[cl] = struct{}{}
	g.mu.Unlock()
	return pk, nil
}

// OnPublished runs after the fan-out.
func (g *resumeGate) OnPublished(cl *mochi.Client, _ packets.Packet) { g.endPublish(cl) }

// OnDisconnect also ends a publish whose PUBACK could not be written (mochi
// then skips OnPublished) and a takeover that never got to its CONNACK.
func (g *resumeGate) OnDisconnect(cl *mochi.Client, _ error, _ bool) {
	g.endPublish(cl)
	g.endResume(cl)
}

func (g *resumeGate) endPublish(cl *mochi.Client) {
	g.mu.Lock()
	if _, ok := g.publishing[cl]; ok {
		delete(g.publishing, cl)
		if len(g.publishing) == 0 {
			g.cond.Broadcast()
		}
	}
	g.mu.Unlock()
}

package mqtt

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// copyingStore is paho's memory store handing out copies of the PUBLISH
// packets it holds. On a reconnect paho marks every stored PUBLISH as a
// duplicate (it sets the packet's DUP flag) while the old connection's
// writer may still be encoding that same packet: a data race inside the
// library (eclipse-paho/paho.mqtt.golang#703). With a copy, the resent packet
// is another object than the one being written.
type copyingStore struct{ *paho.MemoryStore }

func newCopyingStore() paho.Store { return copyingStore{paho.NewMemoryStore()} }

func (s copyingStore) Get(key string) packets.ControlPacket {
	p := s.MemoryStore.Get(key)
	if pub, ok := p.(*packets.PublishPacket); ok {
		c := *pub
		return &c
	}
	return p
}

package mqtt

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// copyingStore is paho's memory store handing out copies of the PUBLISH
// packets it holds. On a reconnect paho marks every stored PUBLISH as a
// duplicate (it sets the packet's DUP flag) while the old connection's
// writer may still be encoding that same packet: a data race inside the
// library (eclipse-paho/paho.mqtt.golang#703); the writer also sets the
// packet's length as it encodes it. The store keeps a copy taken before the
// packet is handed to the writer (paho stores a PUBLISH before queueing it)
// and hands out copies of that, so no packet it holds is ever written.
type copyingStore struct{ *paho.MemoryStore }

func newCopyingStore() paho.Store { return copyingStore{paho.NewMemoryStore()} }

func (s copyingStore) Put(key string, p packets.ControlPacket) {
	s.MemoryStore.Put(key, copyPublish(p))
}

func (s copyingStore) Get(key string) packets.ControlPacket {
	return copyPublish(s.MemoryStore.Get(key))
}

func copyPublish(p packets.ControlPacket) packets.ControlPacket {
	if pub, ok := p.(*packets.PublishPacket); ok {
		c := *pub
		return &c
	}
	return p
}

package rocketmq

import (
	"sort"
	"sync"
	"time"
)

const (
	// clientExpiry drops consumers that stopped heart-beating (the client
	// beats every 30s); same as the Java broker's channel expiry.
	clientExpiry = 120 * time.Second
	// lockExpiry mirrors rocketmq.broker.rebalance.lockMaxLiveTime.
	lockExpiry = 60 * time.Second
)

type subscription struct {
	expr    string
	expType string
}

type member struct {
	conn     *conn
	lastSeen time.Time
}

type groupInfo struct {
	members map[string]*member      // by client id
	subs    map[string]subscription // by topic, from the latest heartbeat
}

type lockKey struct {
	group, topic string
	queue        int
}

type lockOwner struct {
	clientID string
	at       time.Time
}

// consumerManager tracks consumer group membership (from heartbeats) and
// orderly-consumption queue locks.
type consumerManager struct {
	mu     sync.Mutex
	groups map[string]*groupInfo
	locks  map[lockKey]lockOwner
}

func newConsumerManager() *consumerManager {
	return &consumerManager{groups: make(map[string]*groupInfo), locks: make(map[lockKey]lockOwner)}
}

type heartbeatConsumer struct {
	GroupName     string `json:"groupName"`
	Subscriptions []struct {
		Topic   string `json:"topic"`
		SubStr  string `json:"subString"`
		ExpType string `json:"expressionType"`
	} `json:"subscriptionDataSet"`
}

// heartbeat registers clientID in its groups and, because the Go client never
// unregisters, drops it from groups its heartbeat no longer lists. It returns
// the groups whose member set changed.
func (cm *consumerManager) heartbeat(c *conn, clientID string, consumers []heartbeatConsumer, now time.Time) []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	var changed []string
	listed := make(map[string]bool, len(consumers))
	for _, cd := range consumers {
		if cd.GroupName == "" {
			continue
		}
		listed[cd.GroupName] = true
		g := cm.groups[cd.GroupName]
		if g == nil {
			g = &groupInfo{members: make(map[string]*member), subs: make(map[string]subscription)}
			cm.groups[cd.GroupName] = g
		}
		if m := g.members[clientID]; m == nil {
			g.members[clientID] = &member{conn: c, lastSeen: now}
			changed = append(changed, cd.GroupName)
		} else {
			m.conn, m.lastSeen = c, now
		}
		for _, s := range cd.Subscriptions {
			g.subs[s.Topic] = subscription{expr: s.SubStr, expType: s.ExpType}
		}
	}
	for name, g := range cm.groups {
		if m := g.members[clientID]; m != nil && !listed[name] && m.conn == c {
			delete(g.members, clientID)
			changed = append(changed, name)
		}
	}
	return changed
}

func (cm *consumerManager) unregister(clientID, group string) []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if g := cm.groups[group]; g != nil && g.members[clientID] != nil {
		delete(g.members, clientID)
		cm.releaseLocksLocked(map[string]bool{clientID: true})
		return []string{group}
	}
	return nil
}

// removeWhere drops members matching drop and the queue locks they held.
func (cm *consumerManager) removeWhere(drop func(*member) bool) []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	var changed []string
	gone := make(map[string]bool)
	for name, g := range cm.groups {
		removed := false
		for id, m := range g.members {
			if drop(m) {
				delete(g.members, id)
				gone[id] = true
				removed = true
			}
		}
		if removed {
			changed = append(changed, name)
		}
	}
	cm.releaseLocksLocked(gone)
	return changed
}

func (cm *consumerManager) releaseLocksLocked(clients map[string]bool) {
	if len(clients) == 0 {
		return
	}
	for k, o := range cm.locks {
		if clients[o.clientID] {
			delete(cm.locks, k)
		}
	}
}

func (cm *consumerManager) connClosed(c *conn) []string {
	return cm.removeWhere(func(m *member) bool { return m.conn == c })
}

func (cm *consumerManager) expire(now time.Time) []string {
	return cm.removeWhere(func(m *member) bool { return now.Sub(m.lastSeen) > clientExpiry })
}

func (cm *consumerManager) clientIDs(group string) []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	ids := []string{}
	if g := cm.groups[group]; g != nil {
		for id := range g.members {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (cm *consumerManager) memberConns(group string) []*conn {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	var out []*conn
	seen := make(map[*conn]bool)
	if g := cm.groups[group]; g != nil {
		for _, m := range g.members {
			if !seen[m.conn] {
				seen[m.conn] = true
				out = append(out, m.conn)
			}
		}
	}
	return out
}

func (cm *consumerManager) subscription(group, topic string) (subscription, bool) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if g := cm.groups[group]; g != nil {
		s, ok := g.subs[topic]
		return s, ok
	}
	return subscription{}, false
}

// lock grants the queues free, expired or already held by clientID.
func (cm *consumerManager) lock(group, clientID string, queues []lockKey, now time.Time) []lockKey {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	var ok []lockKey
	for _, k := range queues {
		k.group = group
		o, held := cm.locks[k]
		if !held || o.clientID == clientID || now.Sub(o.at) > lockExpiry {
			cm.locks[k] = lockOwner{clientID: clientID, at: now}
			ok = append(ok, k)
		}
	}
	return ok
}

func (cm *consumerManager) unlock(group, clientID string, queues []lockKey) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	for _, k := range queues {
		k.group = group
		if o, held := cm.locks[k]; held && o.clientID == clientID {
			delete(cm.locks, k)
		}
	}
}

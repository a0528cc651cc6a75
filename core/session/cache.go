package session

import (
	"bytes"
	"sync"
	"time"
)

// cache remembers, per correlation, the request's hash, who waits for its
// answer and the answer itself, so that a Lazy Pirate resend never runs a
// request twice: a resend of a running request joins it, a resend of a
// finished one gets the stored answer. Finished answers expire after ttl
// and the cache is bounded in entries and bytes.
type cache struct {
	ttl      time.Duration
	maxN     int
	maxBytes int

	mu      sync.Mutex
	entries map[string]*cacheEntry
	order   []string // finished correlations, oldest first, from head on
	head    int
	bytes   int
}

type cacheEntry struct {
	hash    [32]byte
	waiters [][]byte
	pending []byte
	final   []byte
	doneAt  time.Time
}

type joinState int

const (
	joinNew      joinState = iota // first sighting: run it
	joinWaiting                   // a resend of a running request: joined
	joinDone                      // a resend of a finished request: here is the answer
	joinConflict                  // the correlation was used for a different request
)

func newCache(ttl time.Duration) *cache {
	return &cache{ttl: ttl, maxN: 4096, maxBytes: 32 << 20, entries: map[string]*cacheEntry{}}
}

// join registers rid as a waiter for correlation. For joinWaiting it
// returns the pending frame (if any) to resend; for joinDone the answer.
func (c *cache) join(correlation string, hash [32]byte, rid []byte) (joinState, [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(time.Now())
	e, ok := c.entries[correlation]
	if !ok {
		c.entries[correlation] = &cacheEntry{hash: hash, waiters: [][]byte{rid}}
		return joinNew, nil
	}
	if e.hash != hash {
		return joinConflict, nil
	}
	if e.final != nil {
		return joinDone, [][]byte{e.final}
	}
	for _, w := range e.waiters {
		if bytes.Equal(w, rid) {
			return joinWaiting, nil
		}
	}
	e.waiters = append(e.waiters, rid)
	if e.pending != nil {
		return joinWaiting, [][]byte{e.pending}
	}
	return joinWaiting, nil
}

// deliver records a frame for correlation and returns who must receive it.
func (c *cache) deliver(correlation string, frame []byte, final bool) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[correlation]
	if !ok {
		return nil
	}
	ws := append([][]byte(nil), e.waiters...)
	if !final {
		e.pending = frame
		return ws
	}
	e.final, e.pending, e.waiters, e.doneAt = frame, nil, nil, time.Now()
	c.order = append(c.order, correlation)
	c.bytes += len(frame)
	c.expire(e.doneAt)
	return ws
}

// expire drops finished entries past their ttl, then the oldest while the
// cache is over its bounds. Running requests are never dropped. Dropping
// the oldest is O(1): order is consumed from head and compacted only when
// the dead prefix is as long as the live part.
func (c *cache) expire(now time.Time) {
	for c.head < len(c.order) {
		e := c.entries[c.order[c.head]]
		if e != nil && now.Sub(e.doneAt) < c.ttl && len(c.order)-c.head <= c.maxN && c.bytes <= c.maxBytes {
			break
		}
		if e != nil {
			c.bytes -= len(e.final)
			delete(c.entries, c.order[c.head])
		}
		c.order[c.head] = ""
		c.head++
	}
	if c.head > 0 && c.head >= len(c.order)-c.head {
		n := copy(c.order, c.order[c.head:])
		c.order = c.order[:n]
		c.head = 0
	}
}

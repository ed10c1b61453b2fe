package nodeclass

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache holds values for a fixed time on an injected clock. It is safe for concurrent use.
type ttlCache[V any] struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, clk clock.PassiveClock) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, clock: clk, entries: map[string]ttlEntry[V]{}}
}

// get returns the value stored under key unless it expired.
func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// set stores value under key for the cache's TTL, and drops expired entries.
func (c *ttlCache[V]) set(key string, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(c.ttl)}
}

// getOrLoad returns the value stored under key unless it expired; otherwise it returns what load
// returns, and stores it when load succeeds.
func (c *ttlCache[V]) getOrLoad(key string, load func() (V, error)) (V, error) {
	if v, ok := c.get(key); ok {
		return v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.set(key, v)
	return v, nil
}

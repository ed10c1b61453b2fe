package aws

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultDriftInstanceTTL is how long IsDrifted reuses an instance's description: the drift
// controller looks at a NodeClaim on every change, and the subnet and security groups of an
// instance rarely change, so one DescribeInstances per instance and TTL is enough.
const DefaultDriftInstanceTTL = time.Minute

// instanceCache remembers instance descriptions for a TTL on an injected clock. Entries of
// instances not looked up again are dropped when a later lookup finds them expired.
type instanceCache struct {
	clock clock.Clock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]cachedInstance
}

type cachedInstance struct {
	inst *instance
	at   time.Time
}

func newInstanceCache(clk clock.Clock, ttl time.Duration) *instanceCache {
	if ttl <= 0 {
		ttl = DefaultDriftInstanceTTL
	}
	return &instanceCache{clock: clk, ttl: ttl, entries: map[string]cachedInstance{}}
}

// get returns the instance's description from the cache, or from describe (which is cached when it
// succeeds).
func (c *instanceCache) get(ctx context.Context, id string, describe func(context.Context, string) (*instance, error)) (*instance, error) {
	now := c.clock.Now()
	c.mu.Lock()
	for k, e := range c.entries {
		if now.Sub(e.at) >= c.ttl {
			delete(c.entries, k)
		}
	}
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok {
		return e.inst, nil
	}
	inst, err := describe(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[id] = cachedInstance{inst: inst, at: now}
	c.mu.Unlock()
	return inst, nil
}

package staticpool

import (
	"sync"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// expectationTimeout is how long a create or delete is assumed to be on its way into the cache.
// Past it the write is forgotten and the cache is believed, so a lost watch event cannot pin a
// NodePool's count forever.
const expectationTimeout = time.Minute

// expectations remember, per NodePool, the NodeClaims this controller created or deleted that the
// cache has not shown yet. The cache lags behind the controller's own writes; without them the
// reconcile that the first create triggers would count too few NodeClaims and create a second
// batch (or delete too many).
type expectations struct {
	mu      sync.Mutex
	created map[string]map[string]time.Time // NodePool -> NodeClaim name -> when created
	deleted map[string]map[string]time.Time // NodePool -> NodeClaim name -> when deleted
}

func newExpectations() *expectations {
	return &expectations{created: map[string]map[string]time.Time{}, deleted: map[string]map[string]time.Time{}}
}

func (e *expectations) expectCreated(pool, name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	add(e.created, pool, name, now)
}

func (e *expectations) expectDeleted(pool, name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	add(e.deleted, pool, name, now)
}

func (e *expectations) forget(pool string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.created, pool)
	delete(e.deleted, pool)
}

func add(m map[string]map[string]time.Time, pool, name string, now time.Time) {
	if m[pool] == nil {
		m[pool] = map[string]time.Time{}
	}
	m[pool][name] = now
}

// reconcile settles the pool's expectations against what the cache lists and returns how many
// created NodeClaims the cache does not show yet, and the names of deleted NodeClaims it still
// shows as not deleting. Expectations the cache has caught up with, or older than
// expectationTimeout, are dropped.
func (e *expectations) reconcile(pool string, listed []karpv1.NodeClaim, now time.Time) (unseenCreated int, pendingDelete map[string]bool) {
	byName := make(map[string]*karpv1.NodeClaim, len(listed))
	for i := range listed {
		byName[listed[i].Name] = &listed[i]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, at := range e.created[pool] {
		if _, seen := byName[name]; seen || now.Sub(at) > expectationTimeout {
			delete(e.created[pool], name)
			continue
		}
		unseenCreated++
	}
	for name, at := range e.deleted[pool] {
		nc, seen := byName[name]
		if !seen || !nc.DeletionTimestamp.IsZero() || now.Sub(at) > expectationTimeout {
			delete(e.deleted[pool], name)
			continue
		}
		if pendingDelete == nil {
			pendingDelete = map[string]bool{}
		}
		pendingDelete[name] = true
	}
	if len(e.created[pool]) == 0 {
		delete(e.created, pool)
	}
	if len(e.deleted[pool]) == 0 {
		delete(e.deleted, pool)
	}
	return unseenCreated, pendingDelete
}

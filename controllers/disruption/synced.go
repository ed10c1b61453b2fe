package disruption

import (
	"slices"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// cacheSyncRetry is how soon a pass that found the cache behind this process's own writes is run
// again (or the polling period, when that is shorter): the cache is usually a few milliseconds
// behind, under load up to a second or so.
const cacheSyncRetry = 200 * time.Millisecond

// passResult is what a pass did, which says when the next one runs.
type passResult int

const (
	// passIdle: nothing started; the next pass runs after the polling period.
	passIdle passResult = iota
	// passStarted: a command started; the next pass runs at once.
	passStarted
	// passUnsynced: the cache did not show a replacement this process created yet, so nothing was
	// planned; the next pass runs after cacheSyncRetry.
	passUnsynced
)

// unseenReplacements returns, sorted, the replacements of the commands this process holds that
// the snapshot's NodeClaims do not show yet. A pass must not plan from such a snapshot: the pods
// of a held candidate would be counted as needing new capacity again (their replacement is
// invisible), and the next command would launch a second node for them, which nothing removes
// where consolidation is off. A replacement deleted before the cache saw it does not hold passes
// up for long: progress rolls its command back and drops it from the queue first.
func (c *Controller) unseenReplacements(claims []karpv1.NodeClaim) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return unseen(c.queue, claims)
}

// unseen is unseenReplacements over a queue.
func unseen(queue map[string]*queued, claims []karpv1.NodeClaim) []string {
	seen := make(map[string]bool, len(claims))
	for i := range claims {
		seen[claims[i].Name] = true
	}
	var out []string
	for _, q := range queue {
		for _, name := range q.replacements {
			if !seen[name] {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

package budget

import (
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// NextChange returns the first time after now at which one of the NodePool's scheduled budgets may
// start or stop being active, and whether there is one. Budgets without a schedule never change
// with time; a misconfigured budget (which fails the NodePool closed) does not either. The time is
// never late, and may be early where windows overlap: a caller that looks again then sees every
// change.
func NextChange(np *karpv1.NodePool, now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if t.After(now) && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	now = now.UTC()
	for _, b := range np.Spec.Disruption.Budgets {
		if b.Schedule == nil || b.Duration == nil || b.Duration.Duration < 0 {
			continue
		}
		sched, err := karpv1.ParseBudgetSchedule(*b.Schedule)
		if err != nil {
			continue
		}
		start := sched.Next(now)
		if start.IsZero() {
			continue // never fires within the cron library's horizon: always active
		}
		consider(start)
		if hit := sched.Next(now.Add(-b.Duration.Duration)); !hit.IsZero() && !hit.After(now) {
			consider(hit.Add(b.Duration.Duration))
		}
	}
	return next, found
}

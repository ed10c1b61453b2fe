package audit

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
)

// DefaultMaxErrorBackoff caps how long the audit leaves out a policy whose evaluations keep failing.
const DefaultMaxErrorBackoff = 30 * time.Minute

// ReasonAuditBackoff is the reason of the Event on a policy the audit starts leaving out because
// evaluating it failed in the runs before.
const ReasonAuditBackoff = "AuditBackoff"

// policyBackoff is the evaluation backoff of one policy.
type policyBackoff struct {
	// generation is the policy's generation when it failed; a new spec is evaluated at once.
	generation int64
	// failures counts the consecutive runs in which evaluating the policy failed.
	failures int
	// until is when the policy is evaluated again.
	until time.Time
	// cause is the first failure of the last failing run.
	cause string
	// announced says whether the Event for this wait was recorded.
	announced bool
}

// errorBackoff returns how long to leave a policy out after its failures-th consecutive failing run:
// ErrorBackoff doubled failures-1 times, capped at MaxErrorBackoff.
func (a *Auditor) errorBackoff(failures int) time.Duration {
	base := a.ErrorBackoff
	if base <= 0 {
		base = 2 * a.interval()
	}
	limit := a.MaxErrorBackoff
	if limit <= 0 {
		limit = DefaultMaxErrorBackoff
	}
	d := base
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// interval is the period of the audit.
func (a *Auditor) interval() time.Duration {
	if a.Interval <= 0 {
		return DefaultInterval
	}
	return a.Interval
}

// backingOff returns the policies this run leaves out: those whose evaluation failed and whose wait
// has not passed. A policy deleted or given a new spec since it failed is forgotten. The first run of
// each wait records an Event on the policy.
func (a *Auditor) backingOff(policies []joinerv1alpha1.ProvisioningPolicy, now time.Time) map[string]bool {
	listed := make(map[string]*joinerv1alpha1.ProvisioningPolicy, len(policies))
	for i := range policies {
		listed[policies[i].Name] = &policies[i]
	}
	skip := map[string]bool{}
	for name, b := range a.backoff {
		pp := listed[name]
		if pp == nil || pp.Generation != b.generation {
			delete(a.backoff, name)
			continue
		}
		if !now.Before(b.until) {
			continue
		}
		skip[name] = true
		if !b.announced {
			b.announced = true
			a.Log.Info("policy left out of the audit: its evaluation keeps failing", "policy", name,
				"failures", b.failures, "until", b.until, "cause", b.cause)
			a.event(pp, corev1.EventTypeWarning, ReasonAuditBackoff,
				"evaluating this policy failed in %d consecutive audit(s) (%s); the audit leaves it out until %s, and audits a new generation of it at once",
				b.failures, b.cause, b.until.UTC().Format(time.RFC3339))
		}
	}
	return skip
}

// recordFailures updates the backoff of every policy this run evaluated: failed maps a policy whose
// evaluation failed to its first failure; the others are evaluated again every run.
func (a *Auditor) recordFailures(policies []joinerv1alpha1.ProvisioningPolicy, skip map[string]bool, failed map[string]string, now time.Time) {
	if a.backoff == nil {
		a.backoff = map[string]*policyBackoff{}
	}
	for i := range policies {
		pp := &policies[i]
		if skip[pp.Name] {
			continue
		}
		cause, ok := failed[pp.Name]
		if !ok {
			if _, was := a.backoff[pp.Name]; was {
				a.Log.Info("policy evaluates again", "policy", pp.Name)
			}
			delete(a.backoff, pp.Name)
			continue
		}
		b := a.backoff[pp.Name]
		if b == nil {
			b = &policyBackoff{}
			a.backoff[pp.Name] = b
		}
		b.generation, b.cause, b.announced = pp.Generation, cause, false
		b.failures++
		b.until = now.Add(a.errorBackoff(b.failures))
	}
}

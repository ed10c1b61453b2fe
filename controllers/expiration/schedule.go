package expiration

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"time"

	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// MaxJitter caps the jitter of a soft deadline (see the package comment).
const MaxJitter = time.Hour

// Jitter returns how long after its expiry deadline a NodeClaim of a NodePool with graceful
// expiration is marked Expired: f(uid) × min(expireAfter/10, MaxJitter), where f(uid) ∈ [0, 1) is
// the 64-bit FNV-1a hash of the UID divided by 2^64. It is deterministic, at least zero, and less
// than min(expireAfter/10, MaxJitter) whenever that is positive (zero otherwise).
func Jitter(uid types.UID, expireAfter time.Duration) time.Duration {
	window := min(expireAfter/10, MaxJitter)
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	// hi = floor(hash × window / 2^64), exactly, and < window because hash < 2^64.
	hi, _ := bits.Mul64(h.Sum64(), uint64(window))
	return time.Duration(hi)
}

// policy is how the NodeClaims of one NodePool expire.
type policy struct {
	// graceful marks NodeClaims Expired at the soft deadline and deletes them at deadline + grace;
	// otherwise they are deleted at the deadline.
	graceful bool
	// grace is the time from the deadline to the hard deadline when graceful.
	grace time.Duration
}

// problem is an invalid expiration annotation on a NodePool.
type problem struct {
	// annotation is the annotation key, value its value.
	annotation, value string
	// message says what is wrong, how to fix it and what is done meanwhile.
	message string
}

// policyOf reads the expiration annotations of the NodePool (nil: forceful). Invalid values fall
// back to the defaults (forceful; defaultGrace) and are reported as problems.
func policyOf(np *karpv1.NodePool, defaultGrace time.Duration) (policy, []problem) {
	if np == nil {
		return policy{}, nil
	}
	var problems []problem
	switch mode, ok := np.Annotations[karpv1.ExpirationAnnotationKey]; {
	case !ok, mode == karpv1.ExpirationForceful:
		return policy{}, nil
	case mode != karpv1.ExpirationGraceful:
		return policy{}, []problem{{annotation: karpv1.ExpirationAnnotationKey, value: mode, message: fmt.Sprintf(
			"Invalid %s annotation %q: set it to %q or %q (or remove it); expiring NodeClaims forcefully meanwhile",
			karpv1.ExpirationAnnotationKey, mode, karpv1.ExpirationGraceful, karpv1.ExpirationForceful)}}
	}
	p := policy{graceful: true, grace: defaultGrace}
	if v, ok := np.Annotations[karpv1.ExpirationGraceAnnotationKey]; ok {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			problems = append(problems, problem{annotation: karpv1.ExpirationGraceAnnotationKey, value: v, message: fmt.Sprintf(
				"Invalid %s annotation %q: %v; set it to a positive Go duration such as \"24h\" or \"90m\" (or remove it); using %s meanwhile",
				karpv1.ExpirationGraceAnnotationKey, v, err, defaultGrace)})
		case d <= 0:
			problems = append(problems, problem{annotation: karpv1.ExpirationGraceAnnotationKey, value: v, message: fmt.Sprintf(
				"Invalid %s annotation %q: it must be positive; set it to a Go duration such as \"24h\" or \"90m\" (or remove it); using %s meanwhile",
				karpv1.ExpirationGraceAnnotationKey, v, defaultGrace)})
		default:
			p.grace = d
		}
	}
	return p, problems
}

// schedule is when one NodeClaim expires.
type schedule struct {
	// deadline is creationTimestamp + expireAfter.
	deadline time.Time
	// soft is when a NodeClaim under graceful expiration is marked Expired: deadline + Jitter.
	// Zero under forceful expiration.
	soft time.Time
	// hard is when the NodeClaim is deleted: the deadline, or deadline + grace when graceful.
	hard time.Time
}

// scheduleOf returns the NodeClaim's expiry schedule under the policy, or false when its
// expireAfter is Never (or unset).
func scheduleOf(nc *karpv1.NodeClaim, p policy) (schedule, bool) {
	if nc.Spec.ExpireAfter.IsNever() {
		return schedule{}, false
	}
	expireAfter := *nc.Spec.ExpireAfter.Duration
	s := schedule{deadline: nc.CreationTimestamp.Add(expireAfter)}
	s.hard = s.deadline
	if p.graceful {
		s.soft = s.deadline.Add(Jitter(nc.UID, expireAfter))
		s.hard = s.deadline.Add(p.grace)
	}
	return s, true
}

// step is what the controller does with a NodeClaim at some instant.
type step int

const (
	// stepWait: not expired yet; an Expired condition must not be there.
	stepWait step = iota
	// stepMark: graceful expiration, between the soft and the hard deadline; Expired=True.
	stepMark
	// stepDelete: at or past the hard deadline; delete the NodeClaim.
	stepDelete
)

// at returns the step at now and, unless it is stepDelete, how long until the next one.
func (s schedule) at(now time.Time) (step, time.Duration) {
	switch {
	case !now.Before(s.hard):
		return stepDelete, 0
	case !s.soft.IsZero() && !now.Before(s.soft):
		return stepMark, s.hard.Sub(now)
	case !s.soft.IsZero() && s.soft.Before(s.hard):
		return stepWait, s.soft.Sub(now)
	default:
		return stepWait, s.hard.Sub(now)
	}
}

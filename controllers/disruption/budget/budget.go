// Package budget implements the disruption budget math of Karpenter v1.14: how many of a NodePool's
// nodes may start disrupting now, for a disruption reason, given its spec.disruption.budgets.
//
// Each budget is either inactive (it allows math.MaxInt32 nodes) or active (it allows its nodes
// value: a count, or a percentage of the NodePool's nodes rounded up). The budgets that apply to a
// reason are combined by taking the minimum, and the nodes already disrupting are subtracted. A
// budget without a schedule is always active; a budget with a schedule is active for its duration
// after each hit of the schedule, evaluated in UTC. Any misconfigured budget fails the whole
// NodePool closed: nothing may be disrupted, for any reason.
//
// The package is pure: it reads no clock and no cluster state; callers pass the time and the node
// counts.
package budget

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Unbounded is the value of a budget that does not limit disruption: an inactive budget, or the
// combined value when no budget applies to a reason. It is math.MaxInt32, as in Karpenter.
const Unbounded = math.MaxInt32

// Reasons returns the disruption reasons a budget can be restricted to, in the order of the API
// enum (Underutilized, Empty, Drifted). The slice is new on each call, so callers may modify it.
func Reasons() []karpv1.DisruptionReason {
	return []karpv1.DisruptionReason{
		karpv1.DisruptionReasonUnderutilized,
		karpv1.DisruptionReasonEmpty,
		karpv1.DisruptionReasonDrifted,
	}
}

// Allowed returns how many more of the NodePool's nodes may start disrupting now for reason, and
// the budget value before the disrupting nodes are subtracted (for the
// karpenter_nodepools_allowed_disruptions gauge).
//
// numNodes is the number of the NodePool's managed, initialized nodes, which percentages are taken
// of; disrupting is the number of those that are NotReady or already being disrupted or deleted.
// value is the minimum over the budgets that apply to reason (a budget applies when its Reasons is
// nil or contains reason; an explicit empty list matches no reason), Unbounded when none applies;
// allowed is value − disrupting, at least 0.
//
// If any budget of the NodePool is misconfigured, whatever reason it applies to, both results are
// 0 and the error names every offending budget and field, e.g.
// "spec.disruption.budgets[1].schedule: ...".
func Allowed(np *karpv1.NodePool, reason karpv1.DisruptionReason, numNodes, disrupting int, now time.Time) (allowed, value int, err error) {
	if np == nil {
		return 0, 0, errors.New("computing disruption budget: nil NodePool")
	}
	value = Unbounded
	var errs []error
	for i, b := range np.Spec.Disruption.Budgets {
		v, err := Value(b, numNodes, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.disruption.budgets[%d].%w", i, err))
			continue
		}
		if Applies(b, reason) {
			value = min(value, v)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	return max(value-disrupting, 0), value, nil
}

// Applies reports whether budget b limits disruptions for reason: its Reasons is nil (all reasons)
// or contains reason. An explicit empty, non-nil Reasons matches no reason.
func Applies(b karpv1.Budget, reason karpv1.DisruptionReason) bool {
	return b.Reasons == nil || slices.Contains(b.Reasons, reason)
}

// Value returns how many nodes budget b allows to be disrupting at now, out of numNodes: Unbounded
// when the budget is inactive, else its nodes value, with percentages of numNodes rounded up (10%
// of 1 to 10 nodes is 1). The nodes value is checked even while the budget is inactive. Errors name
// the offending field relative to the budget, e.g. "nodes: ...".
func Value(b karpv1.Budget, numNodes int, now time.Time) (int, error) {
	// Karpenter only parses nodes while the budget is active; here a bad value is an error at any
	// time, so a misconfigured NodePool fails closed all day rather than only inside the window.
	// Values that reach the cluster pass the CRD pattern, so both agree on them.
	active, err := Active(b, now)
	if err != nil {
		return 0, err
	}
	n, err := nodesValue(b.Nodes, numNodes)
	if err != nil {
		return 0, fmt.Errorf("nodes: %w", err)
	}
	if !active {
		return Unbounded, nil
	}
	return n, nil
}

// nodesPattern is the CRD's validation pattern of Budget.Nodes: a count, or a percentage from 0%
// to 100%.
var nodesPattern = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)

// nodesValue returns the number of nodes a nodes value allows out of numNodes. Values the CRD
// rejects (negative, signed, above 100%, empty) are errors, so the NodePool fails closed.
func nodesValue(nodes string, numNodes int) (int, error) {
	if !nodesPattern.MatchString(nodes) {
		return 0, fmt.Errorf("%q is not a node count (\"5\") or a percentage from 0%% to 100%% (\"10%%\")", nodes)
	}
	if strings.HasSuffix(nodes, "%") {
		pct := intstr.FromString(nodes)
		// Rounding up, like Kubernetes' maxUnavailable: 5% of 10 nodes allows 1 rather than 0.
		n, err := intstr.GetScaledValueFromIntOrPercent(&pct, numNodes, true)
		if err != nil {
			return 0, fmt.Errorf("scaling %q to %d nodes: %w", nodes, numNodes, err)
		}
		return n, nil
	}
	n, err := strconv.Atoi(nodes)
	if err != nil {
		return 0, fmt.Errorf("parsing node count %q: %w", nodes, err)
	}
	return min(n, Unbounded), nil
}

// Active reports whether budget b's window covers now. A budget without schedule and duration is
// always active; otherwise it is active when now is in [hit, hit+duration) for some hit of the
// schedule, evaluated in UTC (Karpenter's test: the schedule's next hit after now−duration is not
// after now). Schedule and duration must be set together. Errors name the offending field relative
// to the budget, e.g. "schedule: ...".
//
// As in Karpenter, a schedule that never fires within five years (such as "0 0 30 2 *") makes the
// cron library return the zero time, so the budget counts as always active.
func Active(b karpv1.Budget, now time.Time) (bool, error) {
	switch {
	case b.Schedule == nil && b.Duration == nil:
		return true, nil
	case b.Schedule == nil:
		return false, errors.New("schedule: required when duration is set")
	case b.Duration == nil:
		return false, errors.New("duration: required when schedule is set")
	case b.Duration.Duration < 0:
		return false, fmt.Errorf("duration: %s is negative", b.Duration.Duration)
	}
	sched, err := karpv1.ParseBudgetSchedule(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule: %w", err)
	}
	now = now.UTC()
	return !sched.Next(now.Add(-b.Duration.Duration)).After(now), nil
}

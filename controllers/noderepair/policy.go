package noderepair

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/cloudprovider"
)

// maxUnhealthyPercent is the share of a NodePool's nodes (or, for a NodeClaim without a NodePool,
// of the cluster's) that may be unhealthy at once for repair to go on (Karpenter's 20%).
const maxUnhealthyPercent = 20

// match is a Node condition that a repair policy names, with when its toleration ends.
type match struct {
	// policy is the matching policy (with the toleration in effect).
	policy cloudprovider.RepairPolicy
	// since is the condition's lastTransitionTime.
	since time.Time
	// deadline is since + the policy's toleration: when the Node is to be repaired.
	deadline time.Time
}

// String says what matched, for Events and logs: "Ready=Unknown since <RFC3339> (tolerated 30m0s)".
func (m match) String() string {
	return fmt.Sprintf("%s=%s since %s (tolerated %s)", m.policy.ConditionType, m.policy.ConditionStatus,
		m.since.UTC().Format(time.RFC3339), m.policy.TolerationDuration)
}

// firstMatch returns, of the policies that one of the Node's conditions matches (same type and
// status), the one whose toleration ends first, and whether any matches. It is pure.
func firstMatch(node *corev1.Node, policies []cloudprovider.RepairPolicy) (match, bool) {
	var (
		best  match
		found bool
	)
	for _, p := range policies {
		for _, c := range node.Status.Conditions {
			if c.Type != p.ConditionType || c.Status != p.ConditionStatus {
				continue
			}
			m := match{policy: p, since: c.LastTransitionTime.Time, deadline: c.LastTransitionTime.Add(p.TolerationDuration)}
			if !found || m.deadline.Before(best.deadline) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// unhealthy reports whether any policy matches one of the Node's conditions, whether or not its
// toleration has ended: the count the 20% rule is about.
func unhealthy(node *corev1.Node, policies []cloudprovider.RepairPolicy) bool {
	_, ok := firstMatch(node, policies)
	return ok
}

// maxUnhealthy is how many of total nodes may be unhealthy for repair to go on: 20% of total,
// rounded up (as Kubernetes scales "20%" with rounding up), so 1 of 1 to 5 nodes, 2 of 6 to 10.
func maxUnhealthy(total int) int {
	if total <= 0 {
		return 0
	}
	return (total*maxUnhealthyPercent + 99) / 100
}

// repairAllowed reports whether repair may go on with unhealthy of total nodes unhealthy.
func repairAllowed(unhealthy, total int) bool {
	return unhealthy <= maxUnhealthy(total)
}

// withToleration returns the policies with every toleration replaced by d when d is positive,
// and the policies unchanged otherwise.
func withToleration(policies []cloudprovider.RepairPolicy, d time.Duration) []cloudprovider.RepairPolicy {
	out := make([]cloudprovider.RepairPolicy, len(policies))
	copy(out, policies)
	if d > 0 {
		for i := range out {
			out[i].TolerationDuration = d
		}
	}
	return out
}

// validate returns an error naming the first policy that cannot work: no condition type, no
// status, or a negative toleration.
func validate(policies []cloudprovider.RepairPolicy) error {
	for i, p := range policies {
		switch {
		case p.ConditionType == "":
			return fmt.Errorf("repair policy %d: conditionType is empty", i)
		case p.ConditionStatus == "":
			return fmt.Errorf("repair policy %d (%s): conditionStatus is empty", i, p.ConditionType)
		case p.TolerationDuration < 0:
			return fmt.Errorf("repair policy %d (%s=%s): tolerationDuration %s is negative", i, p.ConditionType, p.ConditionStatus, p.TolerationDuration)
		}
	}
	return nil
}

// snakeCase spells a condition type as the condition label of
// karpenter_nodeclaims_unhealthy_disrupted_total does: "AcceleratedHardwareReady" becomes
// "accelerated_hardware_ready".
func snakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A new word starts at an upper-case letter after a lower-case one, or at the last
			// upper-case letter of an acronym that a lower-case letter follows ("GPUReady").
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

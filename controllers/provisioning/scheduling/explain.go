package scheduling

import (
	"fmt"
	"strings"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// UnschedulableError says why a pod could not be placed: per NodePool, what ruled it out for a
// new NodeClaim, and a summary for the existing nodes.
type UnschedulableError struct {
	// Pod is "namespace/name".
	Pod string
	// NodePools are the NodePools in the order they were tried, each with its reason.
	NodePools []NodePoolRejection
	// ExistingNodes summarises why no existing node took the pod; "" when there are none.
	ExistingNodes string
	// Relaxed lists the soft constraints that were dropped before giving up.
	Relaxed []string
	// Stopped is set when the simulation ran out of time before trying the pod fully.
	Stopped error
}

// NodePoolRejection is the reason one NodePool could not take a pod.
type NodePoolRejection struct {
	// NodePool is the NodePool's name.
	NodePool string
	// Reason names the constraint: a requirement conflict, an untolerated taint, a limit, the
	// resources no instance type has, or a topology constraint.
	Reason string
}

// Error reads like `pod default/web-1 cannot be placed: NodePool "arm" ruled out: incompatible
// requirement kubernetes.io/arch In [amd64] vs [arm64]; no existing node fits (3 nodes: taint
// ...)`.
func (e *UnschedulableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s cannot be placed", e.Pod)
	if e.Stopped != nil {
		fmt.Fprintf(&b, ": the simulation stopped before it was placed (%v)", e.Stopped)
		return b.String()
	}
	sep := ": "
	if len(e.NodePools) == 0 {
		b.WriteString(sep + "no NodePool is available")
		sep = "; "
	}
	for _, r := range e.NodePools {
		fmt.Fprintf(&b, "%sNodePool %q ruled out: %s", sep, r.NodePool, r.Reason)
		sep = "; "
	}
	if e.ExistingNodes != "" {
		fmt.Fprintf(&b, "%s%s", sep, e.ExistingNodes)
	}
	if len(e.Relaxed) > 0 {
		fmt.Fprintf(&b, " (after dropping preferences: %s)", strings.Join(e.Relaxed, ", "))
	}
	return b.String()
}

// explain builds the UnschedulableError of a pod the simulation gave up on.
func (s *solver) explain(q *podInfo) error {
	e := &UnschedulableError{Pod: q.name(), Stopped: s.stopped}
	if s.stopped != nil {
		return e
	}
	for i := 0; i < q.dropped; i++ {
		e.Relaxed = append(e.Relaxed, q.describePreference(q.prefs[i], s.topo))
	}
	for i, t := range s.templates {
		reason := ""
		switch {
		case t.err != nil:
			reason = t.err.Error()
		default:
			var refusal refusalReason
			if r := q.volumeRefusal(t.reqs, "NodePool "+t.name); r != "" {
				refusal.set("%s", r)
			}
			fresh := s.fresh[i]
			if _, ok := s.estimate(q, fresh); !ok {
				need := fresh.used.Plus(q.requests)
				refusal.set("no instance type has %s allocatable for the pod and the DaemonSets that would run with it", resources.Describe(need))
			} else if _, ok := s.fit(q, fresh, &refusal); ok {
				refusal.set("a new NodeClaim would fit the pod alone, but not together with the pods already planned")
			}
			reason = refusal.reason
		}
		e.NodePools = append(e.NodePools, NodePoolRejection{NodePool: t.name, Reason: reason})
	}
	if nodes := s.existingCount + len(s.full); nodes > 0 {
		counts := map[string]int{}
		var order []string
		bins := s.bins[:s.existingCount:s.existingCount]
		for _, i := range s.full {
			bins = append(bins, s.existingBin(-1, s.set.nodes[i], s.set.preps[i]))
		}
		for _, b := range bins {
			var refusal refusalReason
			if r := q.volumeRefusal(b.reqs, "the node"); r != "" {
				refusal.set("%s", r)
			} else if _, ok := s.estimate(q, b); !ok {
				refusal.set("not enough free resources")
			} else {
				s.fit(q, b, &refusal)
			}
			if refusal.reason == "" {
				continue
			}
			if counts[refusal.reason] == 0 {
				order = append(order, refusal.reason)
			}
			counts[refusal.reason]++
		}
		parts := make([]string, 0, len(order))
		for _, r := range order {
			parts = append(parts, fmt.Sprintf("%d× %s", counts[r], r))
		}
		e.ExistingNodes = fmt.Sprintf("no existing node fits (%d nodes: %s)", nodes, strings.Join(parts, "; "))
	}
	return e
}

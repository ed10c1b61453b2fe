package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// mark sets a True condition on the node's NodeClaim, transitioned at since.
func mark(n *Node, condition string, since time.Time) {
	n.NodeClaim.SetCondition(since, condition, metav1.ConditionTrue, condition, "")
}

func TestDriftAndSoftExpiryReplaceOldestFirst(t *testing.T) {
	for _, tt := range []struct {
		name      string
		condition string
		reason    karpv1.DisruptionReason
		typ       string
	}{
		{"drift", karpv1.ConditionTypeDrifted, karpv1.DisruptionReasonDrifted, TypeDrift},
		{"soft expiry", ConditionTypeExpired, DisruptionReasonExpired, TypeExpired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			// Only "big" fits the pods; replacing costs more than the node: no price check applies.
			f.pool(nodePool("default", withBudgets(karpv1.Budget{Nodes: "1"})), itype("big", "4", "8Gi", 2.0))
			newer := f.odNode("newer", "default", "big", pod("a", "3", "6Gi"))
			older := f.odNode("older", "default", "big", pod("b", "3", "6Gi"))
			mark(newer, tt.condition, t0.Add(-time.Minute))
			mark(older, tt.condition, t0.Add(-time.Hour))
			pl := plan(t, newPlanner(Options{}), f.cluster())
			cmd := pl.Command
			if cmd == nil {
				t.Fatalf("no command; verdicts %+v", pl.Verdicts)
			}
			if cmd.Reason != tt.reason || cmd.Type != tt.typ || !slices.Equal(candidateNames(cmd), []string{"older"}) {
				t.Fatalf("command %s (type %s), want the oldest %s node replaced", cmd, cmd.Type, tt.condition)
			}
			if len(cmd.Replacements) != 1 || cmd.Replacements[0].InstanceTypeOptions.Names()[0] != "big" {
				t.Fatalf("want one replacement of type big, got %v", replacementTypes(cmd))
			}
		})
	}
}

func TestDriftWithinDriftedBudgets(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default", withBudgets(karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
		karpv1.Budget{Nodes: "100%", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty}})),
		itype("big", "4", "8Gi", 2.0))
	n := f.odNode("n", "default", "big", pod("a", "3", "6Gi"))
	mark(n, karpv1.ConditionTypeDrifted, t0.Add(-time.Hour))
	pl := plan(t, newPlanner(Options{}), f.cluster())
	if pl.Command != nil {
		t.Fatalf("a Drifted budget of 0 let %s through", pl.Command)
	}
	if v := verdictOf(t, pl, "n"); v.Reason != ReasonDisruptionBlocked || v.Message != "No allowed disruptions for disruption reason Drifted due to blocking budget" {
		t.Fatalf("verdict %s: %q", v.Reason, v.Message)
	}
	if !pl.ConstrainedByBudgets {
		t.Error("a budget-blocked pass must not be remembered as having nothing to do")
	}
}

func TestDriftEventualClass(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tgp     bool
		nodeDND bool
		want    bool
	}{
		{"a do-not-disrupt pod blocks drift without terminationGracePeriod", false, false, false},
		{"with terminationGracePeriod the drain is bounded, so drift goes ahead", true, false, true},
		{"a do-not-disrupt Node blocks drift even with terminationGracePeriod", true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"), itype("big", "4", "8Gi", 2.0))
			n := f.odNode("n", "default", "big", pod("a", "3", "6Gi", withAnnotation(karpv1.DoNotDisruptAnnotationKey, "true")))
			mark(n, karpv1.ConditionTypeDrifted, t0.Add(-time.Hour))
			if tt.tgp {
				n.NodeClaim.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
			}
			if tt.nodeDND {
				n.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			}
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if got := pl.Command != nil; got != tt.want {
				t.Fatalf("command %v, want one: %v (verdicts %+v)", pl.Command, tt.want, pl.Verdicts)
			}
			if !tt.want {
				if v := verdictOf(t, pl, "n"); v.Reason != ReasonDisruptionBlocked {
					t.Fatalf("verdict reason %s, want %s", v.Reason, ReasonDisruptionBlocked)
				}
			}
		})
	}
}

func TestDriftedNodeWhosePodsCannotMoveIsReported(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), itype("big", "4", "8Gi", 2.0))
	n := f.odNode("n", "default", "big", pod("pinned", "3", "6Gi", withNodeSelector(karpv1.LabelHostname, "n")))
	mark(n, karpv1.ConditionTypeDrifted, t0.Add(-time.Hour))
	pl := plan(t, newPlanner(Options{}), f.cluster())
	if pl.Command != nil {
		t.Fatalf("replaced a node whose pod can only run on it: %s", pl.Command)
	}
	if v := verdictOf(t, pl, "n"); v.Reason != ReasonDisruptionBlocked || !strings.HasPrefix(v.Message, "Not all pods would schedule, ") {
		t.Fatalf("verdict %s %q, want the pod scheduling errors", v.Reason, v.Message)
	}
}

package planner

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// The instance types of the filter tests: a node of type "big" holding one small pod could be
// replaced by a "small" one, so every candidate that passes the filters is acted on, and a
// verdict is only given by the filter under test.
func filterTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("small", "2", "4Gi", 0.2),
		itype("big", "8", "16Gi", 1.0),
	}
}

// TestCandidateFilters checks that each of the shared candidate filters and the consolidation
// filters gives its verdict with Karpenter's message, on the first failure, and that the node is
// not a candidate of any method.
func TestCandidateFilters(t *testing.T) {
	tests := []struct {
		name string
		// setup changes the fixture; the node under test is "target" of type big holding pod
		// "web" (app=web) in NodePool "default".
		setup       func(f *fixture, target *Node, np *karpv1.NodePool)
		wantReason  string
		wantMessage string
	}{
		{
			name: "not initialized",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				meta.RemoveStatusCondition(&n.NodeClaim.Status.Conditions, karpv1.ConditionTypeInitialized)
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node isn't initialized",
		},
		{
			name: "initialized false",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.NodeClaim.SetCondition(t0, karpv1.ConditionTypeInitialized, metav1.ConditionFalse, "NotReady", "")
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node isn't initialized",
		},
		{
			name: "nodeclaim deleting",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.NodeClaim.DeletionTimestamp = &metav1.Time{Time: t0}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node is deleting or marked for deletion",
		},
		{
			name: "node deleting",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Node.DeletionTimestamp = &metav1.Time{Time: t0}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node is deleting or marked for deletion",
		},
		{
			name: "instance terminating",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.NodeClaim.SetCondition(t0, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "Terminating", "")
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node is deleting or marked for deletion",
		},
		{
			name: "node do-not-disrupt annotation",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: `Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`,
		},
		{
			name: "missing nodepool label",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				delete(n.Node.Labels, karpv1.NodePoolLabelKey)
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node doesn't have required label",
		},
		{
			name: "nodepool not found",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Node.Labels[karpv1.NodePoolLabelKey] = "ghost"
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "NodePool not found (NodePool=ghost)",
		},
		{
			name: "nodepool without instance types",
			setup: func(f *fixture, _ *Node, _ *karpv1.NodePool) {
				f.pools[0].InstanceTypes = nil
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "NodePool not found (NodePool=default)",
		},
		{
			name: "pod do-not-disrupt",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: `Pod has "karpenter.sh/do-not-disrupt" annotation`,
		},
		{
			name: "pod do-not-disrupt duration still running",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "2h"}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: `Pod has "karpenter.sh/do-not-disrupt" annotation`,
		},
		{
			name: "pdb with no disruptions allowed",
			setup: func(f *fixture, _ *Node, _ *karpv1.NodePool) {
				f.pdb("web", "web", 0)
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Pdb prevents pod evictions",
		},
		{
			name: "two pdbs",
			setup: func(f *fixture, _ *Node, _ *karpv1.NodePool) {
				f.pdb("web-a", "web", 1)
				f.pdb("web-b", "web", 1)
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Eviction does not support multiple PDBs",
		},
		{
			name: "do-not-disrupt is checked before pdbs",
			setup: func(f *fixture, n *Node, _ *karpv1.NodePool) {
				f.pdb("web", "web", 0)
				n.Pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: `Pod has "karpenter.sh/do-not-disrupt" annotation`,
		},
		{
			name: "initialization is checked before the annotation",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				meta.RemoveStatusCondition(&n.NodeClaim.Status.Conditions, karpv1.ConditionTypeInitialized)
			},
			wantReason: ReasonDisruptionBlocked, wantMessage: "Node isn't initialized",
		},
		{
			name: "consolidation disabled",
			setup: func(_ *fixture, _ *Node, np *karpv1.NodePool) {
				withConsolidateAfter(karpv1.NeverDuration())(np)
			},
			wantReason: ReasonUnconsolidatable, wantMessage: `NodePool "default" has consolidation disabled`,
		},
		{
			name: "WhenEmpty policy on a non-empty node",
			setup: func(_ *fixture, _ *Node, np *karpv1.NodePool) {
				withPolicy(karpv1.ConsolidationPolicyWhenEmpty)(np)
			},
			wantReason: ReasonUnconsolidatable, wantMessage: `NodePool "default" has consolidation policy WhenEmpty, but node is not empty`,
		},
		{
			name: "not consolidatable yet",
			setup: func(_ *fixture, n *Node, np *karpv1.NodePool) {
				withConsolidateAfter(karpv1.NewNillableDuration(5 * time.Minute))(np)
				meta.RemoveStatusCondition(&n.NodeClaim.Status.Conditions, karpv1.ConditionTypeConsolidatable)
			},
			wantReason: ReasonUnconsolidatable, wantMessage: "Node is not consolidatable yet: it has seen pod activity within consolidateAfter (5m0s)",
		},
		{
			name: "unknown instance type",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				n.Node.Labels[karpv1.LabelInstanceType] = "gone"
			},
			wantReason: ReasonUnconsolidatable, wantMessage: `Instance Type "gone" not found`,
		},
		{
			name: "missing zone label",
			setup: func(_ *fixture, n *Node, _ *karpv1.NodePool) {
				delete(n.Node.Labels, karpv1.LabelTopologyZone)
			},
			wantReason: ReasonUnconsolidatable, wantMessage: `Node does not have label "topology.kubernetes.io/zone"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			np := f.pool(nodePool("default"), filterTypes()...)
			target := f.odNode("target", "default", "big", pod("web", "500m", "1Gi"))
			tt.setup(f, target, np)
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if pl.Command != nil {
				t.Fatalf("command %s, want none", pl.Command)
			}
			v := verdictOf(t, pl, "target")
			if v.Reason != tt.wantReason || v.Message != tt.wantMessage {
				t.Errorf("verdict %s: %q, want %s: %q", v.Reason, v.Message, tt.wantReason, tt.wantMessage)
			}
			if v.NodeClaim != "nc-target" {
				t.Errorf("verdict names NodeClaim %q, want nc-target", v.NodeClaim)
			}
			if n := len(pl.Verdicts); n != 1 {
				t.Errorf("%d verdicts, want 1: %+v", n, pl.Verdicts)
			}
			if tt.wantReason == ReasonDisruptionBlocked && (pl.Eligible[TypeMulti] != 0 || pl.Eligible[TypeSingle] != 0) {
				t.Errorf("blocked node is eligible: %v", pl.Eligible)
			}
		})
	}
}

// TestCandidateFiltersLetThrough checks the cases that must not block: without them the node is
// replaced by a small one, so each case also shows that the filter tests above are not vacuous.
func TestCandidateFiltersLetThrough(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture, target *Node)
	}{
		{name: "nothing special", setup: func(*fixture, *Node) {}},
		{
			name: "expired do-not-disrupt duration",
			setup: func(_ *fixture, n *Node) {
				// Started an hour ago, protected for 30 minutes.
				n.Pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "30m"}
			},
		},
		{
			name: "do-not-disrupt with a value other than true on the node",
			setup: func(_ *fixture, n *Node) {
				n.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "false"}
			},
		},
		{
			name: "pdb allowing a disruption",
			setup: func(f *fixture, _ *Node) {
				f.pdb("web", "web", 1)
			},
		},
		{
			name: "pdb selecting another app",
			setup: func(f *fixture, _ *Node) {
				f.pdb("api", "api", 0)
			},
		},
		{
			name: "do-not-disrupt on a finished pod",
			setup: func(_ *fixture, n *Node) {
				done := pod("job", "100m", "100Mi")
				done.Status.Phase = "Succeeded"
				done.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				done.Spec.NodeName = n.Name()
				n.Pods = append(n.Pods, done)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"), filterTypes()...)
			target := f.odNode("target", "default", "big", pod("web", "500m", "1Gi"))
			tt.setup(f, target)
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if v, ok := pl.Verdict("target"); ok {
				t.Fatalf("verdict %+v, want none", v)
			}
			if pl.Command == nil {
				t.Fatal("no command, want the big node replaced by a small one")
			}
			if got := candidateNames(pl.Command); len(got) != 1 || got[0] != "target" || pl.Command.Decision() != "replace" {
				t.Fatalf("command %s, want target replaced", pl.Command)
			}
			if got := replacementTypes(pl.Command); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "small" {
				t.Errorf("replacement options %v, want [[small]]", got)
			}
		})
	}
}

// TestInCommandSkippedSilently checks that nodes held by a command, by annotation or in the
// queue's memory, get no verdict and are not candidates, yet count against the budget.
func TestInCommandSkippedSilently(t *testing.T) {
	for _, how := range []string{"annotation", "in queue"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default", withBudgets(karpv1.Budget{Nodes: "1"})), filterTypes()...)
			held := f.odNode("held", "default", "big")
			f.odNode("other", "default", "big")
			if how == "annotation" {
				held.NodeClaim.Annotations = map[string]string{CommandAnnotationKey: "cmd-1"}
			} else {
				f.inQueue = map[string]bool{held.NodeClaim.Name: true}
			}
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if v, ok := pl.Verdict("held"); ok {
				t.Errorf("verdict %+v for a node in a command, want none", v)
			}
			if pl.Command != nil {
				for _, c := range pl.Command.Candidates {
					if c.Name() == "held" {
						t.Fatalf("command %s takes a node already in a command", pl.Command)
					}
				}
			}
			// The held node uses the budget of 1, so the empty "other" node must wait.
			if got := pl.Allowed["default"][karpv1.DisruptionReasonEmpty]; got != 0 {
				t.Errorf("allowed Empty disruptions %d, want 0 (the held node is disrupting)", got)
			}
			if pl.Command != nil || !pl.ConstrainedByBudgets {
				t.Errorf("command %v, constrained %v; want none, constrained", pl.Command, pl.ConstrainedByBudgets)
			}
			if v := verdictOf(t, pl, "other"); v.Message != "No allowed disruptions for disruption reason Empty due to blocking budget" {
				t.Errorf("other: %q", v.Message)
			}
		})
	}
}

package planner

import (
	"math"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// fiveTypes are five types of one size whose prices are 0.1 to 0.5, so that the empty nodes of
// the emptiness tests sort by price.
func fiveTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("p1", "2", "4Gi", 0.1),
		itype("p2", "2", "4Gi", 0.2),
		itype("p3", "2", "4Gi", 0.3),
		itype("p4", "2", "4Gi", 0.4),
		itype("p5", "2", "4Gi", 0.5),
	}
}

// TestEmptinessBudget checks that empty nodes are deleted in one command, most expensive first,
// as many as the NodePool's Empty budget allows, and that the others get the budget verdict.
func TestEmptinessBudget(t *testing.T) {
	tests := []struct {
		name            string
		budgets         []karpv1.Budget
		notReady        bool // one extra node is NotReady, which counts as disrupting
		wantCandidates  []string
		wantConstrained bool
	}{
		{
			name:           "unbounded",
			budgets:        []karpv1.Budget{{Nodes: "100%"}},
			wantCandidates: []string{"e5", "e4", "e3", "e2", "e1"},
		},
		{
			name:            "budget of 2",
			budgets:         []karpv1.Budget{{Nodes: "2"}},
			wantCandidates:  []string{"e5", "e4"},
			wantConstrained: true,
		},
		{
			name:            "budget of 2 for Empty only, another reason unlimited",
			budgets:         []karpv1.Budget{{Nodes: "2", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}, {Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}},
			wantCandidates:  []string{"e5", "e4"},
			wantConstrained: true,
		},
		{
			name:            "50% of 5 nodes rounds up to 3",
			budgets:         []karpv1.Budget{{Nodes: "50%"}},
			wantCandidates:  []string{"e5", "e4", "e3"},
			wantConstrained: true,
		},
		{
			name:            "a NotReady node uses the budget",
			budgets:         []karpv1.Budget{{Nodes: "2"}},
			notReady:        true,
			wantCandidates:  []string{"e5"},
			wantConstrained: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default", withBudgets(tt.budgets...)), fiveTypes()...)
			// Created in an order that is neither by name nor by price.
			for _, i := range []string{"3", "1", "5", "2", "4"} {
				f.odNode("e"+i, "default", "p"+i)
			}
			if tt.notReady {
				sick := f.odNode("sick", "default", "p1", pod("web", "100m", "100Mi"))
				sick.Node.Status.Conditions[0].Status = corev1.ConditionFalse
			}
			pl := plan(t, newPlanner(Options{}), f.cluster())
			cmd := pl.Command
			if cmd == nil {
				t.Fatalf("no command; verdicts %+v", pl.Verdicts)
			}
			if cmd.Type != TypeEmpty || cmd.Reason != karpv1.DisruptionReasonEmpty || cmd.Decision() != "delete" || cmd.Results != nil {
				t.Errorf("command %s (type %s), want an Empty delete", cmd, cmd.Type)
			}
			var got []string
			wantSavings := 0.0
			for _, c := range cmd.Candidates {
				got = append(got, c.Name())
				wantSavings += c.Price()
			}
			if !slices.Equal(got, tt.wantCandidates) {
				t.Errorf("candidates %v, want %v (most expensive first)", got, tt.wantCandidates)
			}
			if math.Abs(cmd.Savings-wantSavings) > 1e-9 || cmd.Savings <= 0 {
				t.Errorf("savings %v, want %v", cmd.Savings, wantSavings)
			}
			if pl.ConstrainedByBudgets != tt.wantConstrained {
				t.Errorf("ConstrainedByBudgets %v, want %v", pl.ConstrainedByBudgets, tt.wantConstrained)
			}
			if pl.Eligible[TypeEmpty] != 5 {
				t.Errorf("eligible %d, want 5", pl.Eligible[TypeEmpty])
			}
			for _, i := range []string{"1", "2", "3", "4", "5"} {
				name := "e" + i
				if slices.Contains(got, name) {
					continue
				}
				v := verdictOf(t, pl, name)
				if v.Reason != ReasonDisruptionBlocked || v.Message != "No allowed disruptions for disruption reason Empty due to blocking budget" {
					t.Errorf("%s: %s %q", name, v.Reason, v.Message)
				}
			}
		})
	}
}

// TestEmptinessWhatIsEmpty checks Karpenter v1.14's IsEmpty: a node is empty when none of its
// reschedulable pods has a positive eviction cost. DaemonSet, mirror and finished pods do not
// count, nor does a pod whose pod-deletion-cost clamps its eviction cost to at most 0.
func TestEmptinessWhatIsEmpty(t *testing.T) {
	done := pod("done", "100m", "100Mi")
	done.Status.Phase = corev1.PodSucceeded
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		wantEmpty bool
	}{
		{name: "no pods", wantEmpty: true},
		{name: "daemonset pod", pods: []*corev1.Pod{pod("ds", "100m", "100Mi", ownedBy("DaemonSet", "logs"))}, wantEmpty: true},
		{name: "mirror pod", pods: []*corev1.Pod{pod("static", "100m", "100Mi", withAnnotation(corev1.MirrorPodAnnotationKey, "x"))}, wantEmpty: true},
		{name: "finished pod", pods: []*corev1.Pod{done}, wantEmpty: true},
		{name: "pod-deletion-cost -2^31", pods: []*corev1.Pod{pod("cheap", "100m", "100Mi", withAnnotation(PodDeletionCostAnnotationKey, "-2147483648"))}, wantEmpty: true},
		{name: "pod-deletion-cost -2^27 (cost exactly 0)", pods: []*corev1.Pod{pod("zero", "100m", "100Mi", withAnnotation(PodDeletionCostAnnotationKey, "-134217728"))}, wantEmpty: true},
		{name: "lowest priority", pods: []*corev1.Pod{pod("low", "100m", "100Mi", withPriority(math.MinInt32))}, wantEmpty: true},
		{name: "plain pod", pods: []*corev1.Pod{pod("web", "100m", "100Mi")}},
		{name: "slightly negative deletion cost", pods: []*corev1.Pod{pod("web", "100m", "100Mi", withAnnotation(PodDeletionCostAnnotationKey, "-1000"))}},
		{
			name: "a daemonset pod and a plain pod",
			pods: []*corev1.Pod{pod("ds", "100m", "100Mi", ownedBy("DaemonSet", "logs")), pod("web", "100m", "100Mi")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"), filterTypes()...)
			f.odNode("target", "default", "small", tt.pods...)
			// A roomy node with a pod, not empty and not worth consolidating: the planner may
			// only act on "target".
			f.odNode("keeper", "default", "small", pod("keep", "1500m", "3Gi"))
			pl := plan(t, newPlanner(Options{}), f.cluster())
			gotEmpty := pl.Command != nil && pl.Command.Type == TypeEmpty
			if gotEmpty != tt.wantEmpty {
				t.Fatalf("emptiness command %v, want one: %v", pl.Command, tt.wantEmpty)
			}
			if gotEmpty {
				if got := candidateNames(pl.Command); !slices.Equal(got, []string{"target"}) {
					t.Errorf("candidates %v, want [target]", got)
				}
			}
		})
	}
}

// TestEmptinessFilters checks the verdicts emptiness gives to empty nodes it must leave alone.
func TestEmptinessFilters(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default", withConsolidateAfter(karpv1.NewNillableDuration(30*time.Second))), filterTypes()...)
	f.pool(nodePool("frozen", withConsolidateAfter(karpv1.NeverDuration())), filterTypes()...)
	f.pool(nodePool("onlyempty", withPolicy(karpv1.ConsolidationPolicyWhenEmpty)), filterTypes()...)
	busy := f.odNode("recent", "default", "small")
	meta.RemoveStatusCondition(&busy.NodeClaim.Status.Conditions, karpv1.ConditionTypeConsolidatable)
	f.odNode("frozen-1", "frozen", "small")
	f.odNode("whenempty-1", "onlyempty", "small")
	pl := plan(t, newPlanner(Options{}), f.cluster())
	if pl.Command == nil {
		t.Fatal("no command, want the WhenEmpty pool's empty node deleted")
	}
	if got := candidateNames(pl.Command); !slices.Equal(got, []string{"whenempty-1"}) {
		t.Errorf("candidates %v, want [whenempty-1]", got)
	}
	want := map[string]string{
		"recent":   "Node is not consolidatable yet: it has seen pod activity within consolidateAfter (30s)",
		"frozen-1": `NodePool "frozen" has consolidation disabled`,
	}
	for node, msg := range want {
		if v := verdictOf(t, pl, node); v.Reason != ReasonUnconsolidatable || v.Message != msg {
			t.Errorf("%s: %s %q, want %q", node, v.Reason, v.Message, msg)
		}
	}
}

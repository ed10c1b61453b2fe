package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/budget"
)

const underutilizedBlocked = "No allowed disruptions for disruption reason Underutilized due to blocking budget"

func underutilizedBudget(nodes string) karpv1.Budget {
	return karpv1.Budget{Nodes: nodes, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized}}
}

// TestUnderutilizedBudget checks that an Underutilized budget of 0 blocks multi-node and
// single-node consolidation with Karpenter's message, and leaves emptiness alone.
func TestUnderutilizedBudget(t *testing.T) {
	tests := []struct {
		name string
		// nodes adds the nodes to the "default" NodePool.
		nodes           func(f *fixture)
		budgets         []karpv1.Budget
		wantCommand     string // "" for none, else the command's type
		wantBlocked     []string
		wantConstrained bool
	}{
		{
			name:            "multi-node blocked",
			nodes:           twoLightNodes,
			budgets:         []karpv1.Budget{underutilizedBudget("0")},
			wantBlocked:     []string{"l1", "l2"},
			wantConstrained: true,
		},
		{
			name:        "multi-node allowed (control)",
			nodes:       twoLightNodes,
			budgets:     []karpv1.Budget{underutilizedBudget("2")},
			wantCommand: TypeMulti,
		},
		{
			name:            "single-node blocked",
			nodes:           oneOversizedNode,
			budgets:         []karpv1.Budget{underutilizedBudget("0")},
			wantBlocked:     []string{"target"},
			wantConstrained: true,
		},
		{
			name:        "single-node allowed (control)",
			nodes:       oneOversizedNode,
			budgets:     []karpv1.Budget{underutilizedBudget("1")},
			wantCommand: TypeSingle,
		},
		{
			name: "emptiness is not an Underutilized disruption",
			nodes: func(f *fixture) {
				twoLightNodes(f)
				f.odNode("empty", "default", "big")
			},
			budgets:     []karpv1.Budget{underutilizedBudget("0")},
			wantCommand: TypeEmpty,
		},
		{
			name:  "a budget of 0 for every reason during a window that covers now",
			nodes: oneOversizedNode,
			budgets: []karpv1.Budget{{
				Nodes: "0", Schedule: ptr("0 11 * * *"), Duration: &metav1.Duration{Duration: 2 * time.Hour},
			}},
			wantBlocked:     []string{"target"},
			wantConstrained: true,
		},
		{
			name:  "a budget of 0 during a window that does not cover now",
			nodes: oneOversizedNode,
			budgets: []karpv1.Budget{{
				Nodes: "0", Schedule: ptr("0 13 * * *"), Duration: &metav1.Duration{Duration: 2 * time.Hour},
			}},
			wantCommand: TypeSingle,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default", withBudgets(tt.budgets...)), filterTypes()...)
			tt.nodes(f)
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if tt.wantCommand == "" && pl.Command != nil {
				t.Fatalf("command %s, want none", pl.Command)
			}
			if tt.wantCommand != "" && (pl.Command == nil || pl.Command.Type != tt.wantCommand) {
				t.Fatalf("command %v, want a %s command; verdicts %+v", pl.Command, tt.wantCommand, pl.Verdicts)
			}
			for _, n := range tt.wantBlocked {
				if v := verdictOf(t, pl, n); v.Reason != ReasonDisruptionBlocked || v.Message != underutilizedBlocked {
					t.Errorf("%s: %s %q, want %q", n, v.Reason, v.Message, underutilizedBlocked)
				}
			}
			if pl.ConstrainedByBudgets != tt.wantConstrained {
				t.Errorf("ConstrainedByBudgets %v, want %v", pl.ConstrainedByBudgets, tt.wantConstrained)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// twoLightNodes are two big nodes with a small pod each: one can take the other's pod.
func twoLightNodes(f *fixture) {
	f.odNode("l1", "default", "big", pod("web", "500m", "1Gi"))
	f.odNode("l2", "default", "big", pod("api", "500m", "1Gi"), pod("api-2", "500m", "1Gi"))
}

// oneOversizedNode is a big node with a small pod, which a small node would do.
func oneOversizedNode(f *fixture) {
	f.odNode("target", "default", "big", pod("web", "500m", "1Gi"))
}

// TestInvalidBudgetFailsClosed checks that a NodePool with a misconfigured budget allows no
// disruption for any reason, says why, and does not affect other NodePools.
func TestInvalidBudgetFailsClosed(t *testing.T) {
	bad := karpv1.Budget{Nodes: "10%", Schedule: ptr("every tuesday"), Duration: &metav1.Duration{Duration: time.Hour}}
	t.Run("alone", func(t *testing.T) {
		f := newFixture()
		f.pool(nodePool("default", withBudgets(bad)), filterTypes()...)
		f.odNode("empty", "default", "big")
		oneOversizedNode(f)
		pl := plan(t, newPlanner(Options{}), f.cluster())
		if pl.Command != nil {
			t.Fatalf("command %s, want none", pl.Command)
		}
		err := pl.BudgetErrors["default"]
		if err == nil || !strings.Contains(err.Error(), "spec.disruption.budgets[0].schedule") {
			t.Fatalf("budget error %v, want one naming spec.disruption.budgets[0].schedule", err)
		}
		for _, reason := range budget.Reasons() {
			if got := pl.Allowed["default"][reason]; got != 0 {
				t.Errorf("allowed %s disruptions %d, want 0", reason, got)
			}
		}
		if !pl.ConstrainedByBudgets {
			t.Error("ConstrainedByBudgets unset")
		}
		v := verdictOf(t, pl, "empty")
		if want := "No allowed disruptions for disruption reason Empty: the NodePool's budgets are invalid ("; v.Reason != ReasonDisruptionBlocked || !strings.HasPrefix(v.Message, want) {
			t.Errorf("empty: %s %q, want %q...", v.Reason, v.Message, want)
		}
		v = verdictOf(t, pl, "target")
		if want := "No allowed disruptions for disruption reason Underutilized: the NodePool's budgets are invalid ("; v.Reason != ReasonDisruptionBlocked || !strings.HasPrefix(v.Message, want) {
			t.Errorf("target: %s %q, want %q...", v.Reason, v.Message, want)
		}
	})
	t.Run("next to a healthy NodePool", func(t *testing.T) {
		f := newFixture()
		f.pool(nodePool("broken", withBudgets(bad)), filterTypes()...)
		f.pool(nodePool("healthy"), filterTypes()...)
		f.odNode("broken-empty", "broken", "big")
		f.odNode("healthy-empty", "healthy", "big")
		pl := plan(t, newPlanner(Options{}), f.cluster())
		if pl.Command == nil || !slices.Equal(candidateNames(pl.Command), []string{"healthy-empty"}) {
			t.Fatalf("command %v, want only healthy-empty deleted", pl.Command)
		}
		if pl.BudgetErrors["healthy"] != nil || pl.BudgetErrors["broken"] == nil {
			t.Errorf("budget errors %v", pl.BudgetErrors)
		}
	})
}

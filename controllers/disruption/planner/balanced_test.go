package planner

import (
	"math"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// TestBalancedScore checks Score and Approved at the reference points of Karpenter's Balanced
// consolidation RFC, with k = 2 (threshold 0.5).
func TestBalancedScore(t *testing.T) {
	// A uniform pool of 4 nodes of price 1 whose pods cost 2 each (1 per node plus one pod).
	uniform := PoolTotals{Cost: 4, Disruption: 8}
	tests := []struct {
		name         string
		savings      float64
		disruption   float64
		totals       PoolTotals
		want         float64
		wantApproved bool
	}{
		{name: "delete in a single-node pool", savings: 0.7, disruption: 3, totals: PoolTotals{Cost: 0.7, Disruption: 3}, want: 1, wantApproved: true},
		{name: "delete in a uniform pool", savings: 1, disruption: 2, totals: uniform, want: 1, wantApproved: true},
		{name: "uniform pool, replacement at half the price", savings: 1 - 0.5, disruption: 2, totals: uniform, want: 0.5, wantApproved: true},
		{name: "uniform pool, replacement at 0.6 of the price", savings: 1 - 0.6, disruption: 2, totals: uniform, want: 0.4, wantApproved: false},
		{name: "uniform pool, replacement at 0.4 of the price", savings: 1 - 0.4, disruption: 2, totals: uniform, want: 0.6, wantApproved: true},
		{name: "zero savings", savings: 0, disruption: 2, totals: uniform, want: 0},
		{name: "negative savings", savings: -0.1, disruption: 2, totals: uniform, want: 0},
		{name: "zero disruption", savings: 0.1, disruption: 0, totals: uniform, want: math.Inf(1), wantApproved: true},
		{name: "zero pool cost", savings: 0.1, disruption: 2, totals: PoolTotals{Cost: 0, Disruption: 8}, want: 0},
		{name: "zero pool disruption", savings: 0.1, disruption: 0, totals: PoolTotals{Cost: 4, Disruption: 0}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Score(tt.savings, tt.disruption, tt.totals)
			if got != tt.want && math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Score = %v, want %v", got, tt.want)
			}
			if a := Approved(got, karpv1.BalancedK); a != tt.wantApproved {
				t.Errorf("Approved(%v, %d) = %v, want %v", got, karpv1.BalancedK, a, tt.wantApproved)
			}
		})
	}
	// The score of a single-node pool delete is exactly 1, not merely close.
	if got := Score(0.1, 3, PoolTotals{Cost: 0.1, Disruption: 3}); got != 1 {
		t.Errorf("single-node pool delete scores %v, want exactly 1", got)
	}
	if !Approved(0.5, 2) || Approved(0.49, 2) || Approved(0.99, 1) || !Approved(1, 1) {
		t.Error("Approved must be score >= 1/k")
	}
}

// TestBalancedPlanner runs Balanced in a pool of one node of price 1 holding one pod: a replace
// scores its price saving (the disruption fraction is 1), so it passes only when the replacement
// costs at most half; a delete scores 1 and passes. Under WhenEmptyOrUnderutilized, every cheaper
// replacement passes.
func TestBalancedPlanner(t *testing.T) {
	tests := []struct {
		name        string
		policy      karpv1.ConsolidationPolicy
		replacement float64 // price of the "cheap" type, which fits the pod
		roomyPeer   bool    // an unmanaged node with room for the pod: a delete is possible
		wantCommand string  // "" for none, else the decision
		wantMessage string
	}{
		{name: "replacement at 0.4 passes", policy: karpv1.ConsolidationPolicyBalanced, replacement: 0.4, wantCommand: "replace"},
		{name: "replacement at 0.5 passes", policy: karpv1.ConsolidationPolicyBalanced, replacement: 0.5, wantCommand: "replace"},
		{
			name: "replacement at 0.6 fails", policy: karpv1.ConsolidationPolicyBalanced, replacement: 0.6,
			wantMessage: "Balanced consolidation: the saving does not justify the disruption",
		},
		{name: "replacement at 0.6 passes without Balanced", policy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, replacement: 0.6, wantCommand: "replace"},
		{name: "delete in a single-node pool passes", policy: karpv1.ConsolidationPolicyBalanced, replacement: 0.9, roomyPeer: true, wantCommand: "delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default", withPolicy(tt.policy)),
				itype("cheap", "2", "4Gi", tt.replacement),
				itype("big", "8", "16Gi", 1.0))
			f.odNode("target", "default", "big", pod("web", "1", "2Gi"))
			if tt.roomyPeer {
				peer := f.odNode("unmanaged", "", "big")
				peer.NodeClaim = nil
				delete(peer.Node.Labels, karpv1.NodePoolLabelKey)
			}
			pl := plan(t, newPlanner(Options{}), f.cluster())
			if tt.wantCommand == "" {
				if pl.Command != nil {
					t.Fatalf("command %s, want none", pl.Command)
				}
				if v := verdictOf(t, pl, "target"); v.Message != tt.wantMessage || v.Reason != ReasonUnconsolidatable {
					t.Errorf("verdict %s %q, want %q", v.Reason, v.Message, tt.wantMessage)
				}
				return
			}
			if pl.Command == nil {
				t.Fatalf("no command; verdicts %+v", pl.Verdicts)
			}
			if got := pl.Command.Decision(); got != tt.wantCommand {
				t.Fatalf("command %s, want a %s", pl.Command, tt.wantCommand)
			}
			if pl.Command.Type != TypeSingle {
				t.Errorf("type %s, want single", pl.Command.Type)
			}
		})
	}
}

// TestBalancedApprovesSplitsSavings checks a cross-pool move: the saving is split between the
// pools in proportion to their candidates' prices, every Balanced pool must approve, and other
// pools always do.
func TestBalancedApprovesSplitsSavings(t *testing.T) {
	pool := func(name string, policy karpv1.ConsolidationPolicy) *karpv1.NodePool {
		return nodePool(name, withPolicy(policy))
	}
	cand := func(np *karpv1.NodePool, price, cost float64) *Candidate {
		return &Candidate{nodeInfo: &nodeInfo{nodePool: np, price: price, cost: cost}}
	}
	bal := pool("bal", karpv1.ConsolidationPolicyBalanced)
	other := pool("other", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized)
	totals := map[string]PoolTotals{"bal": {Cost: 4, Disruption: 8}, "other": {Cost: 1, Disruption: 2}}
	tests := []struct {
		name    string
		cands   []*Candidate
		savings float64
		want    bool
	}{
		// bal's share is 1/(1+1) of 1.2 = 0.6 → (0.6/4)/(2/8) = 0.6.
		{name: "bal share passes", cands: []*Candidate{cand(bal, 1, 2), cand(other, 1, 2)}, savings: 1.2, want: true},
		// bal's share is 0.4 → 0.4.
		{name: "bal share fails", cands: []*Candidate{cand(bal, 1, 2), cand(other, 1, 2)}, savings: 0.8, want: false},
		{name: "non-Balanced pools always approve", cands: []*Candidate{cand(other, 1, 2)}, savings: 0.01, want: true},
		{name: "a Balanced delete of one of four equal nodes", cands: []*Candidate{cand(bal, 1, 2)}, savings: 1, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &Command{Candidates: tt.cands, Savings: tt.savings}
			if got := balancedApproves(cmd, totals); got != tt.want {
				t.Errorf("balancedApproves = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPoolTotals checks the Balanced denominators: every managed node of the pool, candidate or
// not, counts its price and its disruption cost.
func TestPoolTotals(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), []*cloudprovider.InstanceType{itype("small", "2", "4Gi", 0.25), itype("big", "8", "16Gi", 1.0)}...)
	f.odNode("a", "default", "big", pod("a1", "100m", "100Mi"), pod("a2", "100m", "100Mi"))
	blocked := f.odNode("b", "default", "small", pod("b1", "100m", "100Mi", withPriority(2_000_000_000)))
	blocked.Node.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	f.odNode("c", "default", "small", pod("ds", "100m", "100Mi", ownedBy("DaemonSet", "logs")))
	c := f.cluster()
	ps := &pass{cluster: c, infos: map[string]*nodeInfo{}}
	for _, n := range c.Nodes {
		ps.infos[n.Name()] = c.describe(n)
	}
	got := ps.poolTotals()["default"]
	if want := (PoolTotals{Cost: 1.5, Disruption: 3 + 11 + 1}); math.Abs(got.Cost-want.Cost) > 1e-9 || got.Disruption != want.Disruption {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}

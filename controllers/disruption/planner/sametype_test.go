package planner

import (
	"slices"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/requirements"
)

// TestSameInstanceTypeRule checks which replacements may be of a candidate's instance type: one
// replacement of several candidates may not (Karpenter's filterOutSameInstanceType: "[a, a, small]
// → a" only deletes the others), while n ≥ 2 replacements of m > n candidates may (m→n repacking
// onto the cluster's own cheapest types; the saving is checked on the whole set).
func TestSameInstanceTypeRule(t *testing.T) {
	f := newFixture()
	a, small := itype("a", "4", "8Gi", 1.0), itype("small", "2", "4Gi", 0.6)
	f.pool(nodePool("default"), a, small)
	for _, n := range []string{"n1", "n2", "n3"} {
		f.odNode(n, "default", "a", pod(n+"-p", "1", "1Gi"))
	}
	c := f.cluster()
	var set []*Candidate
	for _, n := range c.Nodes {
		set = append(set, &Candidate{nodeInfo: c.describe(n)})
	}
	reqs := requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand))
	replacement := func() *scheduling.NodeClaimPlan {
		return &scheduling.NodeClaimPlan{Requirements: reqs, InstanceTypeOptions: cloudprovider.InstanceTypes{small, a}}
	}
	for _, tc := range []struct {
		name         string
		set          []*Candidate
		replacements int
		multi        bool
		want         []string
	}{
		{name: "3 nodes -> 1: not the candidates' type", set: set, replacements: 1, multi: true, want: []string{"small"}},
		{name: "3 nodes -> 2: the candidates' type is fine", set: set, replacements: 2, multi: true, want: []string{"small", "a"}},
		{name: "1 node -> 1 (single-node): cheaper only", set: set[:1], replacements: 1, want: []string{"small"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var plans []*scheduling.NodeClaimPlan
			for range tc.replacements {
				plans = append(plans, replacement())
			}
			out, _, why := newPlanner(Options{}).priceReplacements(tc.set, plans, tc.multi)
			if why != "" {
				t.Fatalf("no replacement: %s", why)
			}
			for i, plan := range out {
				if got := plan.InstanceTypeOptions.Names(); !slices.Equal(got, tc.want) {
					t.Errorf("replacement %d options %v, want %v", i, got, tc.want)
				}
			}
		})
	}
}

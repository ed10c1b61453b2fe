package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// repackFixture is a cluster where only replacing three nodes by two saves money.
//
// Types: "a" (4 cpu, 8Gi, $1) and "b" (5 cpu, 13Gi, $1.30); "a" is the cheapest type that holds
// the pods of one node, so no single node can be replaced by a cheaper one.
// Nodes n1, n2, n3 are of type "a", each holding three pods of 800m and 2.5Gi: 60% of the cpu and
// memory too full for another pod, so none can take a pod of another. Two nodes' six pods need
// 15Gi, more than the biggest type, so no two nodes can be replaced by one; the nine pods fit in
// two "b" (five and four pods), $2.60 against $3.
// Node n4, also an "a", holds one pod pinned to it (and of high priority, so that it sorts last):
// it cannot go, so the multi-node search tries the three others first.
func repackFixture(budgets ...karpv1.Budget) *fixture {
	f := newFixture()
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{{Nodes: "100%"}}
	}
	f.pool(nodePool("default", withBudgets(budgets...)),
		itype("a", "4", "8Gi", 1.0),
		itype("b", "5", "13Gi", 1.3))
	for _, n := range []string{"n1", "n2", "n3"} {
		f.odNode(n, "default", "a",
			pod(n+"-p1", "800m", "2.5Gi"), pod(n+"-p2", "800m", "2.5Gi"), pod(n+"-p3", "800m", "2.5Gi"))
	}
	f.odNode("n4", "default", "a", pod("pinned", "800m", "7Gi",
		withNodeSelector(karpv1.LabelHostname, "n4"), withPriority(2_000_000_000)))
	return f
}

// TestMultiNodeRepack checks m→n consolidation: three nodes replaced by two cheaper ones in all,
// each replacement's options priced so that any launch keeps the total under the churn guard's
// threshold.
func TestMultiNodeRepack(t *testing.T) {
	f := repackFixture()
	c := f.cluster()
	p := newPlanner(Options{})
	pl := plan(t, p, c)
	cmd := pl.Command
	if cmd == nil {
		t.Fatalf("no command; verdicts %+v", pl.Verdicts)
	}
	if cmd.Type != TypeMulti || cmd.Reason != karpv1.DisruptionReasonUnderutilized || cmd.Decision() != "replace" {
		t.Fatalf("command %s (type %s), want a multi-node replace", cmd, cmd.Type)
	}
	if got := candidateNames(cmd); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("candidates %v, want [n1 n2 n3]", got)
	}
	if len(cmd.Replacements) != 2 {
		t.Fatalf("%d replacements, want 2: %v", len(cmd.Replacements), replacementTypes(cmd))
	}
	candidatePrice := 0.0
	for _, cand := range cmd.Candidates {
		candidatePrice += cand.Price()
	}
	threshold := candidatePrice * (1 - DefaultMinSavingsFraction)
	replacementPrice, worst := 0.0, 0.0
	pods := 0
	for _, r := range cmd.Replacements {
		if !slices.Equal(r.InstanceTypeOptions.Names(), []string{"b"}) {
			t.Errorf("replacement options %v, want [b]", r.InstanceTypeOptions.Names())
		}
		replacementPrice += r.Price
		worst += maxCompatiblePrice(r)
		pods += len(r.Pods)
		if r.NodePool.Name != "default" {
			t.Errorf("replacement from NodePool %s", r.NodePool.Name)
		}
	}
	if pods != 9 {
		t.Errorf("replacements hold %d pods, want the 9 pods of the candidates", pods)
	}
	if !(replacementPrice < candidatePrice) || !(worst < threshold) {
		t.Errorf("replacements cost %v (at worst %v) against candidates %v and threshold %v", replacementPrice, worst, candidatePrice, threshold)
	}
	if math.Abs(cmd.Savings-(candidatePrice-replacementPrice)) > 1e-9 || math.Abs(cmd.Savings-0.4) > 1e-9 {
		t.Errorf("savings %v, want %v", cmd.Savings, candidatePrice-replacementPrice)
	}
	if !strings.Contains(cmd.String(), "[n1 n2 n3] -> [2 replacements]") {
		t.Errorf("String() = %q", cmd.String())
	}
	if cmd.Results == nil || len(cmd.Results.PodErrors) != 0 {
		t.Errorf("results %+v, want every pod placed", cmd.Results)
	}

	// After the command, nothing is left to do: the replacements cool down, and even once they
	// have, n4 still cannot go and the two "b" nodes are as cheap as it gets.
	next := Apply(c, cmd)
	if pl := plan(t, p, next); pl.Command != nil {
		t.Errorf("pass after the repack: %s, want none", pl.Command)
	}
	next.Now = next.Now.Add(DefaultCooldown + 1)
	if pl := plan(t, p, next); pl.Command != nil {
		t.Errorf("pass after the cooldown: %s, want none", pl.Command)
	}
}

// TestRepackNeedsMoreThanOneReplacement checks, on the cluster of TestMultiNodeRepack, that
// Karpenter's m→1 consolidation finds nothing: neither single-node consolidation, nor multi-node
// consolidation limited to two nodes.
func TestRepackNeedsMoreThanOneReplacement(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		budgets []karpv1.Budget
		// wantVerdicts are the verdicts expected per node.
		wantVerdicts map[string]string
	}{
		{
			name: "single-node only",
			opts: Options{MultiNodeMaxCandidates: 1},
			wantVerdicts: map[string]string{
				"n1": "Can't replace with a cheaper node",
				"n2": "Can't replace with a cheaper node",
				"n3": "Can't replace with a cheaper node",
				"n4": "Not all pods would schedule, default/pinned => ",
			},
		},
		{
			name: "single-node only, without a savings margin",
			opts: Options{MultiNodeMaxCandidates: 1, MinSavingsFraction: -1},
			wantVerdicts: map[string]string{
				"n1": "Can't replace with a cheaper node",
				"n4": "Not all pods would schedule, default/pinned => ",
			},
		},
		{
			name: "at most two nodes at once",
			opts: Options{MultiNodeMaxCandidates: 2},
			wantVerdicts: map[string]string{
				"n1": "Can't replace with a cheaper node",
				"n2": "Can't replace with a cheaper node",
				"n3": "Can't replace with a cheaper node",
			},
		},
		{
			name:    "an Underutilized budget of 1",
			budgets: []karpv1.Budget{{Nodes: "1"}},
			wantVerdicts: map[string]string{
				"n1": "Can't replace with a cheaper node",
				"n2": "No allowed disruptions for disruption reason Underutilized due to blocking budget",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := plan(t, newPlanner(tt.opts), repackFixture(tt.budgets...).cluster())
			if pl.Command != nil {
				t.Fatalf("command %s, want none", pl.Command)
			}
			for node, want := range tt.wantVerdicts {
				if v := verdictOf(t, pl, node); !strings.HasPrefix(v.Message, want) {
					t.Errorf("%s: %q, want %q...", node, v.Message, want)
				}
			}
		})
	}
}

// TestMultiNodeDeletesAndReplacesByOne checks Karpenter's m→1 and m→0 moves still happen.
func TestMultiNodeDeletesAndReplacesByOne(t *testing.T) {
	types := []*cloudprovider.InstanceType{
		itype("small", "2", "4Gi", 0.25),
		itype("medium", "4", "8Gi", 0.5),
		itype("large", "8", "16Gi", 1.0),
	}
	t.Run("three light nodes into one", func(t *testing.T) {
		f := newFixture()
		f.pool(nodePool("default"), types...)
		for _, n := range []string{"l1", "l2", "l3"} {
			f.odNode(n, "default", "large", pod(n+"-web", "500m", "1Gi"))
		}
		pl := plan(t, newPlanner(Options{}), f.cluster())
		cmd := pl.Command
		if cmd == nil || cmd.Type != TypeMulti {
			t.Fatalf("command %v, want multi-node", cmd)
		}
		if got := candidateNames(cmd); !slices.Equal(got, []string{"l1", "l2", "l3"}) {
			t.Errorf("candidates %v", got)
		}
		if got := replacementTypes(cmd); len(got) != 1 || got[0][0] != "small" {
			t.Errorf("replacements %v, want one whose cheapest option is small", got)
		}
		if math.Abs(cmd.Savings-2.75) > 1e-9 {
			t.Errorf("savings %v, want 2.75", cmd.Savings)
		}
	})
	t.Run("two light nodes deleted onto a third", func(t *testing.T) {
		f := newFixture()
		f.pool(nodePool("default"), types...)
		f.odNode("l1", "default", "large", pod("l1-web", "500m", "1Gi"))
		f.odNode("l2", "default", "large", pod("l2-web", "500m", "1Gi"))
		// Many pods: a high disruption cost, so it sorts last; it has room for the two pods, and
		// nothing cheaper than it holds all seven.
		var pods []*corev1.Pod
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			pods = append(pods, pod("keep-"+n, "500m", "1Gi"))
		}
		f.odNode("keeper", "default", "medium", pods...)
		pl := plan(t, newPlanner(Options{}), f.cluster())
		cmd := pl.Command
		if cmd == nil || cmd.Type != TypeMulti || cmd.Decision() != "delete" {
			t.Fatalf("command %v, want a multi-node delete", cmd)
		}
		if got := candidateNames(cmd); !slices.Equal(got, []string{"l1", "l2"}) {
			t.Errorf("candidates %v, want [l1 l2]", got)
		}
		if cmd.Savings != 2 {
			t.Errorf("savings %v, want 2", cmd.Savings)
		}
	})
}

// TestSingleNodeReplace checks that an oversized node is replaced by one cheaper node, and how the
// replacement's capacity type is chosen.
func TestSingleNodeReplace(t *testing.T) {
	tests := []struct {
		name string
		// capacityTypes of the types' offerings.
		capacityTypes []string
		nodeCT        string
		opts          Options
		wantCommand   bool
		wantPinned    bool   // the replacement's requirements allow spot only
		wantLaunchCT  string // the capacity type a launch picks
		wantMessage   string
	}{
		{
			name:          "on-demand only",
			capacityTypes: []string{karpv1.CapacityTypeOnDemand},
			nodeCT:        karpv1.CapacityTypeOnDemand,
			wantCommand:   true,
			wantLaunchCT:  karpv1.CapacityTypeOnDemand,
		},
		{
			name:          "on-demand node, spot offered: pinned to spot",
			capacityTypes: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot},
			nodeCT:        karpv1.CapacityTypeOnDemand,
			wantCommand:   true,
			wantPinned:    true,
			wantLaunchCT:  karpv1.CapacityTypeSpot,
		},
		{
			name:          "spot to spot disabled",
			capacityTypes: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot},
			nodeCT:        karpv1.CapacityTypeSpot,
			wantMessage:   "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
		},
		{
			name:          "spot to spot enabled needs 15 cheaper types",
			capacityTypes: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot},
			nodeCT:        karpv1.CapacityTypeSpot,
			opts:          Options{SpotToSpot: true},
			wantMessage:   "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"),
				itype("small", "2", "4Gi", 0.2, tt.capacityTypes...),
				itype("big", "8", "16Gi", 1.0, tt.capacityTypes...))
			f.node("target", "default", "big", fake.Zone1, tt.nodeCT, pod("web", "1", "2Gi"))
			pl := plan(t, newPlanner(tt.opts), f.cluster())
			if !tt.wantCommand {
				if pl.Command != nil {
					t.Fatalf("command %s, want none", pl.Command)
				}
				if v := verdictOf(t, pl, "target"); v.Message != tt.wantMessage || v.Reason != ReasonUnconsolidatable {
					t.Errorf("verdict %s %q, want %q", v.Reason, v.Message, tt.wantMessage)
				}
				return
			}
			cmd := pl.Command
			if cmd == nil {
				t.Fatalf("no command; verdicts %+v", pl.Verdicts)
			}
			if cmd.Type != TypeSingle || cmd.Decision() != "replace" || len(cmd.Replacements) != 1 {
				t.Fatalf("command %s (type %s), want a single-node replace", cmd, cmd.Type)
			}
			r := cmd.Replacements[0]
			if !slices.Equal(r.InstanceTypeOptions.Names(), []string{"small"}) {
				t.Errorf("options %v, want [small]", r.InstanceTypeOptions.Names())
			}
			if r.Price != 0.2 || math.Abs(cmd.Savings-0.8) > 1e-9 {
				t.Errorf("replacement price %v, savings %v; want 0.2 and 0.8", r.Price, cmd.Savings)
			}
			pinned := allowsCapacityType(r.Requirements, karpv1.CapacityTypeSpot) && !allowsCapacityType(r.Requirements, karpv1.CapacityTypeOnDemand)
			if pinned != tt.wantPinned {
				t.Errorf("replacement pinned to spot: %v, want %v (requirements %v)", pinned, tt.wantPinned, r.Requirements)
			}
			// The replacement can launch: one of its options has an offering it allows.
			launched := LaunchNode(r, "launched", t0)
			if l := launched.Node.Labels; l[karpv1.LabelInstanceType] != "small" || l[karpv1.CapacityTypeLabelKey] != tt.wantLaunchCT {
				t.Errorf("launch gives %v, want small on %s", l, tt.wantLaunchCT)
			}
		})
	}
}

// TestSpotDeletesStillHappen checks that with spot-to-spot disabled a spot node whose pods fit
// elsewhere is still deleted.
func TestSpotDeletesStillHappen(t *testing.T) {
	f := newFixture()
	spotAndOD := []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
	f.pool(nodePool("default"),
		itype("small", "2", "4Gi", 0.2, spotAndOD...),
		itype("big", "8", "16Gi", 1.0, spotAndOD...))
	f.node("s1", "default", "big", fake.Zone1, karpv1.CapacityTypeSpot, pod("web", "1", "2Gi"))
	f.node("s2", "default", "big", fake.Zone1, karpv1.CapacityTypeSpot, pod("api", "1", "2Gi"), pod("api2", "1", "2Gi"))
	pl := plan(t, newPlanner(Options{}), f.cluster())
	cmd := pl.Command
	if cmd == nil {
		t.Fatalf("no command; verdicts %+v", pl.Verdicts)
	}
	if cmd.Decision() != "delete" || cmd.Type != TypeSingle {
		t.Fatalf("command %s (type %s), want a single-node delete", cmd, cmd.Type)
	}
	if got := candidateNames(cmd); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("candidates %v, want [s1]", got)
	}
}

// TestMaxReplacementsPercent checks the bound on how many nodes a multi-node command launches: the
// repack fixture's only saving replaces three nodes by two, which a bound of 50 % (one node)
// forbids and 66 % or more allows.
func TestMaxReplacementsPercent(t *testing.T) {
	for _, tc := range []struct {
		percent int
		want    bool
	}{{50, false}, {66, false}, {67, true}, {100, true}, {0, true}} {
		t.Run(fmt.Sprintf("percent=%d", tc.percent), func(t *testing.T) {
			pl := plan(t, newPlanner(Options{MaxReplacementsPercent: tc.percent}), repackFixture().cluster())
			got := pl.Command != nil && pl.Command.Type == TypeMulti && len(pl.Command.Replacements) == 2
			if got != tc.want {
				t.Errorf("3 -> 2 replace: %v, want %v (command %v)", got, tc.want, pl.Command)
			}
		})
	}
}

// TestMultiNodeIdleOrder checks the second multi-node search, by idle cost: w1 and w2 each hold
// one pod that nearly fills them (so they sort first by savings ratio), m1 is mostly full of cpu
// and m2 of memory, so that m2 cannot take m1's pods, while together their pods fit one "b".
// Every prefix of the savings-ratio order starts with w1 and w2, and no repacking of w1, w2 and
// m1 is cheaper. By idle cost m1 and m2 come first, and replacing them (with the nodes the
// largest prefix adds) saves.
func TestMultiNodeIdleOrder(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), itype("a", "4", "8Gi", 1.0), itype("b", "6", "12Gi", 1.5))
	f.odNode("w1", "default", "a", pod("w1-p", "3500m", "7500Mi"))
	f.odNode("w2", "default", "a", pod("w2-p", "3500m", "7500Mi"))
	f.odNode("m1", "default", "a", pod("m1-p1", "1500m", "1Gi"), pod("m1-p2", "1500m", "1Gi"))
	f.odNode("m2", "default", "a", pod("m2-p1", "250m", "3900Mi"), pod("m2-p2", "250m", "3900Mi"))
	pl := plan(t, newPlanner(Options{}), f.cluster())
	cmd := pl.Command
	if cmd == nil || cmd.Type != TypeMulti {
		t.Fatalf("command %v, want multi-node; verdicts %+v", cmd, pl.Verdicts)
	}
	got := candidateNames(cmd)
	t.Logf("command %s: %v -> %v", cmd.Decision(), got, replacementTypes(cmd))
	if !slices.Contains(got, "m1") || !slices.Contains(got, "m2") {
		t.Fatalf("candidates %v, want m1 and m2 among them", got)
	}
	replaced, launched := 0.0, 0.0
	for _, c := range cmd.Candidates {
		replaced += c.Price()
	}
	for _, r := range cmd.Replacements {
		launched += maxCompatiblePrice(r)
	}
	if !(launched < replaced*(1-DefaultMinSavingsFraction)) {
		t.Errorf("replacements at $%.2f/h for $%.2f/h of candidates", launched, replaced)
	}
}

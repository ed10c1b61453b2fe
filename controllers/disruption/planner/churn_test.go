package planner

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/cloudprovider"
)

// linearTypes are three sizes priced in proportion to their capacity.
func linearTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("small", "2", "4Gi", 0.25),
		itype("medium", "4", "8Gi", 0.5),
		itype("large", "8", "16Gi", 1.0),
	}
}

// TestStableClusterNoCommand checks that a cluster already packed as cheaply as its types allow
// gets no command, and that every node says why.
func TestStableClusterNoCommand(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), linearTypes()...)
	f.odNode("m1", "default", "medium", pod("a", "1500m", "3Gi"), pod("b", "1500m", "3Gi"))
	f.odNode("m2", "default", "medium", pod("c", "1500m", "3Gi"), pod("d", "1500m", "3Gi"))
	f.odNode("s1", "default", "small", pod("e", "1500m", "3Gi"))
	pl := plan(t, newPlanner(Options{}), f.cluster())
	if pl.Command != nil {
		t.Fatalf("command %s, want none", pl.Command)
	}
	for _, n := range []string{"m1", "m2", "s1"} {
		v := verdictOf(t, pl, n)
		if v.Reason != ReasonUnconsolidatable {
			t.Errorf("%s: %s %q", n, v.Reason, v.Message)
		}
	}
	if pl.ConstrainedByBudgets || pl.Eligible[TypeSingle] != 3 {
		t.Errorf("constrained %v, eligible %v", pl.ConstrainedByBudgets, pl.Eligible)
	}
}

// messyFixture is a cluster with room to save: an empty node, lightly used large nodes and a
// half-used medium one.
func messyFixture() *fixture {
	f := newFixture()
	f.pool(nodePool("default"), linearTypes()...)
	f.odNode("empty", "default", "large")
	f.odNode("l1", "default", "large", pod("web-1", "1", "2Gi"))
	f.odNode("l2", "default", "large", pod("api-1", "1500m", "3Gi"), pod("api-2", "1500m", "3Gi"))
	f.odNode("l3", "default", "large", pod("db-1", "3", "6Gi"), pod("cache-1", "500m", "1Gi"))
	f.odNode("m1", "default", "medium", pod("web-2", "500m", "1Gi"))
	f.odNode("m2", "default", "medium", pod("batch-1", "1500m", "3Gi"), pod("batch-2", "1500m", "3Gi"))
	f.odNode("s1", "default", "small", pod("web-3", "1500m", "3Gi"))
	return f
}

// clusterPrice is what the cluster's managed nodes cost per hour.
func clusterPrice(c *Cluster) float64 {
	total := 0.0
	for _, n := range c.Nodes {
		if n.NodeClaim != nil {
			total += c.describe(n).price
		}
	}
	return total
}

// checkPods fails unless every pod of want is on exactly one node and every node's pods fit its
// allocatable.
func checkPods(t *testing.T, c *Cluster, want []string) {
	t.Helper()
	var got []string
	names := map[string]bool{}
	for _, n := range c.Nodes {
		if names[n.Name()] {
			t.Errorf("two nodes named %s", n.Name())
		}
		names[n.Name()] = true
		cpu, mem := resource.Quantity{}, resource.Quantity{}
		for _, p := range n.Pods {
			got = append(got, p.Name)
			cpu.Add(p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
			mem.Add(p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory])
		}
		alloc := n.Node.Status.Allocatable
		if cpu.Cmp(alloc[corev1.ResourceCPU]) > 0 || mem.Cmp(alloc[corev1.ResourceMemory]) > 0 {
			t.Errorf("node %s holds %s cpu and %s memory, more than its allocatable %v", n.Name(), cpu.String(), mem.String(), alloc)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("pods %v, want %v", got, want)
	}
	if len(c.Nodes) != len(c.Input.ExistingNodes) {
		t.Errorf("%d nodes but %d existing nodes in the scheduling input", len(c.Nodes), len(c.Input.ExistingNodes))
	}
}

// TestConvergence runs passes, applying each command, until none is returned: this must happen
// within a few passes, every command must save money, no pod may be lost, and one more pass on
// the result must find nothing either, also once the cooldown has passed.
func TestConvergence(t *testing.T) {
	for _, advance := range []bool{false, true} {
		name := "same time"
		if advance {
			name = "cooldown passes between passes"
		}
		t.Run(name, func(t *testing.T) {
			c := messyFixture().cluster()
			var allPods []string
			for _, n := range c.Nodes {
				for _, p := range n.Pods {
					allPods = append(allPods, p.Name)
				}
			}
			slices.Sort(allPods)
			p := newPlanner(Options{})
			start := clusterPrice(c)
			var passes []string
			converged := false
			for range 10 {
				pl := plan(t, p, c)
				if pl.Command == nil {
					converged = true
					break
				}
				before := clusterPrice(c)
				passes = append(passes, pl.Command.String())
				if !(pl.Command.Savings > 0) {
					t.Fatalf("command %s saves nothing", pl.Command)
				}
				// Apply names the replacements after the command.
				pl.Command.ID = fmt.Sprintf("pass-%d", len(passes))
				c = Apply(c, pl.Command)
				if after := clusterPrice(c); !(after < before) {
					t.Fatalf("command %s: price %v -> %v", pl.Command, before, after)
				}
				checkPods(t, c, allPods)
				if advance {
					c.Now = c.Now.Add(DefaultCooldown + time.Minute)
				}
			}
			t.Logf("passes: %q; price %v -> %v", passes, start, clusterPrice(c))
			if !converged {
				t.Fatalf("no convergence after 10 passes: %q", passes)
			}
			if len(passes) == 0 || !(clusterPrice(c) < start) {
				t.Fatalf("passes %q saved nothing", passes)
			}
			if pl := plan(t, p, c); pl.Command != nil {
				t.Errorf("one more pass: %s, want none", pl.Command)
			}
			c.Now = c.Now.Add(DefaultCooldown + time.Minute)
			if pl := plan(t, p, c); pl.Command != nil {
				t.Errorf("one more pass after the cooldown: %s, want none", pl.Command)
			}
		})
	}
}

// TestCooldown checks the churn guard's cooling period: a node launched by a disruption a minute
// ago, or holding a new pod of a workload a disruption moved, is left alone until the cooldown
// has passed; a negative Cooldown disables it.
func TestCooldown(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(f *fixture, target *Node)
		moved       bool // the pod's ReplicaSet was moved by a disruption at t0 - 2m
		cooldown    time.Duration
		at          time.Duration // Now, after t0
		wantMessage string        // "" when the node is replaced
	}{
		{
			name:        "replacement launched a minute ago",
			setup:       replacementOf(time.Minute),
			wantMessage: "Node was launched by a disruption 1m0s ago; it is left alone until the 10m0s cooldown passes",
		},
		{
			name:  "replacement launched a minute ago, considered again after the cooldown",
			setup: replacementOf(time.Minute),
			at:    DefaultCooldown,
		},
		{
			name:     "replacement launched a minute ago, cooldown disabled",
			setup:    replacementOf(time.Minute),
			cooldown: -1,
		},
		{
			name:        "replacement with a custom cooldown",
			setup:       replacementOf(time.Minute),
			cooldown:    2 * time.Minute,
			at:          30 * time.Second,
			wantMessage: "Node was launched by a disruption 1m30s ago; it is left alone until the 2m0s cooldown passes",
		},
		{
			name: "node not launched by a disruption",
			setup: func(_ *fixture, n *Node) {
				n.NodeClaim.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
			},
		},
		{
			name:        "pod of a workload moved two minutes ago",
			setup:       podAge(time.Minute),
			moved:       true,
			wantMessage: "Pod default/web was moved by a disruption 2m0s ago; it is left alone until the 10m0s cooldown passes",
		},
		{
			name:  "pod of a workload moved two minutes ago, after the cooldown",
			setup: podAge(time.Minute),
			moved: true,
			at:    DefaultCooldown,
		},
		{
			name:  "pod older than the move it survived",
			setup: podAge(3 * time.Minute),
			moved: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"), filterTypes()...)
			target := f.odNode("target", "default", "big", pod("web", "500m", "1Gi"))
			tt.setup(f, target)
			c := f.cluster()
			c.Now = t0.Add(tt.at)
			if tt.moved {
				c.RecentlyMoved = map[types.UID]time.Time{"rs-web": t0.Add(-2 * time.Minute)}
			}
			pl := plan(t, newPlanner(Options{Cooldown: tt.cooldown}), c)
			if tt.wantMessage != "" {
				if pl.Command != nil {
					t.Fatalf("command %s, want none", pl.Command)
				}
				if v := verdictOf(t, pl, "target"); v.Reason != ReasonUnconsolidatable || v.Message != tt.wantMessage {
					t.Errorf("verdict %s %q, want %q", v.Reason, v.Message, tt.wantMessage)
				}
				return
			}
			if pl.Command == nil || !slices.Equal(candidateNames(pl.Command), []string{"target"}) {
				t.Fatalf("command %v, want target replaced; verdicts %+v", pl.Command, pl.Verdicts)
			}
		})
	}
}

// replacementOf makes the node a replacement launched age before t0.
func replacementOf(age time.Duration) func(*fixture, *Node) {
	return func(_ *fixture, n *Node) {
		n.NodeClaim.Annotations = map[string]string{ReplacementForAnnotationKey: "cmd-0"}
		n.NodeClaim.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		n.Node.CreationTimestamp = n.NodeClaim.CreationTimestamp
	}
}

// podAge makes the node's first pod one created age before t0.
func podAge(age time.Duration) func(*fixture, *Node) {
	return func(_ *fixture, n *Node) {
		n.Pods[0].CreationTimestamp = metav1.NewTime(t0.Add(-age))
	}
}

// TestEmptyReplacementNotCooling checks that the cooldown only holds back consolidation of
// underutilized nodes: an empty replacement is still deleted.
func TestEmptyReplacementNotCooling(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), filterTypes()...)
	target := f.odNode("target", "default", "big")
	replacementOf(time.Minute)(f, target)
	pl := plan(t, newPlanner(Options{}), f.cluster())
	if pl.Command == nil || pl.Command.Type != TypeEmpty {
		t.Fatalf("command %v, want the empty node deleted", pl.Command)
	}
}

// TestMinSavings checks the churn guard's margin: a replacement 2% cheaper is refused with the
// default 5% margin and accepted without a margin.
func TestMinSavings(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		wantReplace bool
	}{
		{name: "default 5% margin", opts: Options{}},
		{name: "1% margin", opts: Options{MinSavingsFraction: 0.01}, wantReplace: true},
		{name: "no margin", opts: Options{MinSavingsFraction: -1}, wantReplace: true},
		{name: "no margin but $0.05/h", opts: Options{MinSavingsFraction: -1, MinSavings: 0.05}},
		{name: "no margin, $0.01/h", opts: Options{MinSavingsFraction: -1, MinSavings: 0.01}, wantReplace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.pool(nodePool("default"),
				itype("current", "4", "8Gi", 1.0),
				itype("newer", "4", "8Gi", 0.98))
			f.odNode("target", "default", "current", pod("web", "2", "4Gi"))
			pl := plan(t, newPlanner(tt.opts), f.cluster())
			if !tt.wantReplace {
				if pl.Command != nil {
					t.Fatalf("command %s, want none", pl.Command)
				}
				if v := verdictOf(t, pl, "target"); v.Message != "Can't replace with a cheaper node" {
					t.Errorf("verdict %q", v.Message)
				}
				return
			}
			cmd := pl.Command
			if cmd == nil || cmd.Decision() != "replace" {
				t.Fatalf("command %v, want a replace; verdicts %+v", cmd, pl.Verdicts)
			}
			if got := replacementTypes(cmd); len(got) != 1 || !slices.Equal(got[0], []string{"newer"}) {
				t.Errorf("replacement options %v, want [[newer]]", got)
			}
			if math.Abs(cmd.Savings-0.02) > 1e-9 {
				t.Errorf("savings %v, want 0.02", cmd.Savings)
			}
		})
	}
}

// TestOptionsDefaults checks what zero and negative options mean.
func TestOptionsDefaults(t *testing.T) {
	got := newPlanner(Options{}).Options()
	want := Options{
		MultiNodeMaxCandidates: DefaultMultiNodeMaxCandidates, MultiNodeTimeout: DefaultMultiNodeTimeout,
		SingleNodeTimeout: DefaultSingleNodeTimeout, MinSavingsFraction: DefaultMinSavingsFraction, Cooldown: DefaultCooldown,
		Workers: runtime.GOMAXPROCS(0), MaxReplacementsPercent: DefaultMaxReplacementsPercent,
	}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if got := newPlanner(Options{MinSavingsFraction: -1, Cooldown: -1, MaxReplacementsPercent: -1}).Options(); got.MinSavingsFraction != 0 || got.Cooldown != -1 || got.MaxReplacementsPercent != 100 {
		t.Errorf("negative options %+v", got)
	}
}

package scheduling

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// nodeSetCluster is four 16-cpu nodes over two zones: n1 and n3 are full (no room for any pod
// below), n2 and n4 have 6 cpu free; zone 1 runs four web pods, zone 2 three. Every pod of the
// web app spreads over zones with a hard maxSkew of 1 when spread is set.
func nodeSetCluster(spread bool) []*ExistingNode {
	opts := []podOption{withLabels("app", "web")}
	if spread {
		opts = append(opts, withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web"))
	}
	return []*ExistingNode{
		existingNode("n1", fake.Zone1, newPod("n1-a", "6", "1Gi", opts...), newPod("n1-b", "5", "1Gi", opts...), newPod("n1-c", "5", "1Gi", opts...)),
		existingNode("n2", fake.Zone1, newPod("n2-a", "10", "1Gi", opts...)),
		existingNode("n3", fake.Zone2, newPod("n3-a", "8", "1Gi", opts...), newPod("n3-b", "8", "1Gi", opts...)),
		existingNode("n4", fake.Zone2, newPod("n4-a", "10", "1Gi", opts...)),
	}
}

// TestSolveOnLeavesNodesOut checks that SolveOn over a prepared set, leaving nodes out, places
// pods exactly as Solve over the list without them, with and without topology constraints (the
// solve without them skips the full nodes, the one with them must count their pods).
func TestSolveOnLeavesNodesOut(t *testing.T) {
	np := newNodePool("default", poolRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, fake.Zone1, fake.Zone2))
	pools := []NodePool{pool(np, fakeTypes(8)...)}
	for _, spread := range []bool{false, true} {
		nodes := nodeSetCluster(spread)
		var opts []podOption
		if spread {
			opts = []podOption{withLabels("app", "web"), withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web")}
		}
		pods := []*corev1.Pod{newPod("p1", "4", "1Gi", opts...), newPod("p2", "4", "1Gi", opts...), newPod("p3", "2", "1Gi", opts...)}
		for _, leave := range [][]bool{nil, {false, true}, {false, false, false, true}, {true, true, true, true}} {
			t.Run(fmt.Sprintf("spread=%v/leave=%v", spread, leave), func(t *testing.T) {
				sch, err := Prepare(pools, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				var kept []*ExistingNode
				for i, n := range nodes {
					if i >= len(leave) || !leave[i] {
						kept = append(kept, n)
					}
				}
				want, err := sch.Solve(context.Background(), pods, kept, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := sch.SolveOn(context.Background(), pods, NewNodeSet(nodes), leave, nil)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := outcome(got), outcome(want); !maps.Equal(g, w) {
					t.Errorf("SolveOn %v, Solve without the nodes %v", g, w)
				}
				// The full n1 counts: with zone 1 ahead by one, the first web pod must go to zone 2.
				if spread && leave == nil {
					if z := zoneOf(t, got, "p1"); z != fake.Zone2 {
						t.Errorf("p1 in %s, want %s (the full nodes' pods count for the spread)", z, fake.Zone2)
					}
				}
			})
		}
	}
}

// TestSkippedNodesExplained checks that the nodes a solve skips for want of room still count in
// the explanation of a pod that fits nowhere.
func TestSkippedNodesExplained(t *testing.T) {
	in := Input{
		Pods:          []*corev1.Pod{newPod("huge", "20", "1Gi")},
		ExistingNodes: nodeSetCluster(false),
		NodePools:     []NodePool{pool(newNodePool("default"), fakeTypes(2)...)},
	}
	r := solve(t, in)
	wantContains(t, errorOf(r, "huge"), "no existing node fits (4 nodes: 4× not enough free resources)")
}

// TestSolveOnConcurrent runs simulations over one set at once (a disruption pass does): run it
// with -race. Each must give what a lone one gives.
func TestSolveOnConcurrent(t *testing.T) {
	sch, err := Prepare([]NodePool{pool(newNodePool("default"), fakeTypes(8)...)}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := nodeSetCluster(true)
	set := NewNodeSet(nodes)
	spread := []podOption{withLabels("app", "web"), withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web")}
	pods := []*corev1.Pod{newPod("p1", "4", "1Gi", spread...), newPod("p2", "6", "1Gi", spread...), newPod("p3", "2", "1Gi")}
	want, err := sch.SolveOn(context.Background(), pods, set, []bool{true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]*Results, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = sch.SolveOn(context.Background(), pods, set, []bool{true}, nil)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r == nil || !maps.Equal(outcome(r), outcome(want)) {
			t.Errorf("solve %d: %v, want %v", i, r, outcome(want))
		}
	}
}

// TestRequestedShare checks the mean share of cpu and memory a node's pods request, as the
// scheduler counts requests (the larger of the app containers and an init container).
func TestRequestedShare(t *testing.T) {
	withInit := newPod("init", "1", "1Gi")
	withInit.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}}
	noMemory := existingNode("bare", fake.Zone1)
	delete(noMemory.Allocatable, corev1.ResourceMemory)
	for _, tc := range []struct {
		name string
		node *ExistingNode
		want float64
	}{
		{"empty", existingNode("n", fake.Zone1), 0},
		{"cpu half, memory an eighth", existingNode("n", fake.Zone1, newPod("a", "8", "8Gi")), (0.5 + 0.125) / 2},
		{"init container counts", existingNode("n", fake.Zone1, withInit), (0.5 + 1.0/64) / 2},
		{"over-committed counts as full", existingNode("n", fake.Zone1, newPod("a", "32", "1Gi")), (1 + 1.0/64) / 2},
		{"unreported memory counts as full", noMemory, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewNodeSet([]*ExistingNode{tc.node}).RequestedShare(0); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("RequestedShare = %v, want %v", got, tc.want)
			}
		})
	}
}

package scheduling

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// fingerprint renders everything a simulation decided, so that two results can be compared.
func fingerprint(r *Results) string {
	var sb strings.Builder
	for _, e := range r.ExistingNodes {
		fmt.Fprintf(&sb, "existing %s: %v\n", e.Node.Name, podNames(e.Pods))
	}
	for _, nc := range r.NewNodeClaims {
		req := resources.Of(nc.Requests)
		fmt.Fprintf(&sb, "claim %s/%s %.6f relaxed=%v req=%v reqs=%s its=%v pods=%v\n", nc.NodePool.Name, nc.Hostname, nc.Price,
			nc.MinValuesRelaxed, req.Core, nc.Requirements, nc.InstanceTypeOptions.Names(), podNames(nc.Pods))
	}
	for _, pe := range r.PodErrors {
		fmt.Fprintf(&sb, "error %s: %v\n", pe.Pod.Name, pe.Err)
	}
	return sb.String()
}

// reuseInput is a varied workload: diverse and preference pods, an existing node with pods,
// three NodePools (weighted, limited, tainted PreferNoSchedule, zone-restricted) and a
// DaemonSet.
func reuseInput() Input {
	pods := makeDiversePods(150)
	prefs := makePreferencePods(20)
	for i, p := range prefs {
		p.Name = fmt.Sprintf("pref-%d", i)
	}
	pods = append(pods, prefs...)
	pods = append(pods, newPod("huge", "5000", "1Gi"))
	limited := pool(newNodePool("limited", poolWeight(10), poolRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, fake.Zone1)), fakeTypes(32)...)
	limited.Remaining = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("24"), "nodes": resource.MustParse("4")}
	soft := pool(newNodePool("soft", poolTaints(corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule})), fakeTypes(64)...)
	daemon := newPod("ds", "100m", "64Mi")
	return Input{
		Pods:          pods,
		ExistingNodes: []*ExistingNode{existingNode("n1", fake.Zone2, newPod("old", "1", "1Gi", withLabels("app", "nginx")))},
		NodePools:     []NodePool{limited, soft, {NodePool: benchNodePool(), InstanceTypes: benchInstanceTypes}},
		DaemonSetPods: []*corev1.Pod{daemon},
	}
}

func remainingOf(in Input) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, np := range in.NodePools {
		if np.Remaining != nil {
			out[np.NodePool.Name] = np.Remaining
		}
	}
	return out
}

func TestSchedulerReuseMatchesFreshSolves(t *testing.T) {
	in := reuseInput()
	fresh1, fresh2 := fingerprint(solve(t, in)), fingerprint(solve(t, in))
	if fresh1 != fresh2 {
		t.Fatalf("two fresh solves differ:\n%s\nvs\n%s", fresh1, fresh2)
	}
	if !strings.Contains(fresh1, "claim limited/") || !strings.Contains(fresh1, "existing n1") || !strings.Contains(fresh1, "error huge") {
		t.Fatalf("the workload does not exercise limits, existing nodes and errors:\n%s", fresh1)
	}
	sch, err := Prepare(in.NodePools, in.DaemonSetPods, in.Options)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := sch.Solve(context.Background(), in.Pods, in.ExistingNodes, remainingOf(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := fingerprint(r); got != fresh1 {
			t.Fatalf("solve %d on a reused Scheduler differs from a fresh Solve:\n%s\nvs\n%s", i+1, got, fresh1)
		}
	}
}

func TestSchedulerLimitsArePerSolve(t *testing.T) {
	np := pool(newNodePool("default"))
	pods := replicas(3, "p", "100m", withPodAntiAffinity(term(karpv1.LabelHostname, "app", "x")), withLabels("app", "x"))
	sch, err := Prepare([]NodePool{np}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		remaining map[string]corev1.ResourceList
		claims    int
	}{
		{map[string]corev1.ResourceList{"default": {"nodes": resource.MustParse("1")}}, 1},
		{nil, 3},
		{map[string]corev1.ResourceList{"default": {"nodes": resource.MustParse("2")}}, 2},
		{map[string]corev1.ResourceList{"other": {"nodes": resource.MustParse("0")}}, 3},
	} {
		r, err := sch.Solve(context.Background(), pods, nil, tt.remaining)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.NewNodeClaims) != tt.claims || len(r.PodErrors) != 3-tt.claims {
			t.Errorf("remaining %v: %d NodeClaims and %d errors, want %d and %d", tt.remaining, len(r.NewNodeClaims), len(r.PodErrors), tt.claims, 3-tt.claims)
		}
	}
}

func TestSchedulerConcurrentSolves(t *testing.T) {
	in := reuseInput()
	other := makeDiversePods(100)
	want := []string{fingerprint(solve(t, in)), fingerprint(solve(t, Input{Pods: other, NodePools: in.NodePools, DaemonSetPods: in.DaemonSetPods}))}
	sch, err := Prepare(in.NodePools, in.DaemonSetPods, in.Options)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			var r *Results
			var err error
			if i%2 == 0 {
				r, err = sch.Solve(context.Background(), in.Pods, in.ExistingNodes, remainingOf(in))
			} else {
				r, err = sch.Solve(context.Background(), other, nil, remainingOf(in))
			}
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = fingerprint(r)
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != want[i%2] {
			t.Errorf("concurrent solve %d differs from a fresh Solve:\n%s\nvs\n%s", i, got[i], want[i%2])
		}
	}
}

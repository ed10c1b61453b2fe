package bufferpods

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// TestSettleExpectedPods: the pods workloads are still to create are virtual pods too: Settle
// strips them as it strips buffer units, and reports where they went by workload.
func TestSettleExpectedPods(t *testing.T) {
	expected := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{podpredicates.ExpectedPodAnnotationKey: "ReplicaSet team/web"}}}
	}
	real := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}
	results := &scheduling.Results{
		ExistingNodes: []scheduling.ExistingNodePlacement{{Node: &scheduling.ExistingNode{Name: "n1"}, Pods: []*corev1.Pod{expected("e0")}}},
		NewNodeClaims: []*scheduling.NodeClaimPlan{{Hostname: "new", Pods: []*corev1.Pod{real, expected("e1"), expected("e2")}}},
		PodErrors:     []scheduling.PodError{{Pod: expected("e3"), Err: errors.New("limit reached")}},
	}
	out, outcomes := Settle(results)
	if len(out.ExistingNodes) != 0 {
		t.Errorf("existing placements %+v, want none: n1 only received an expected pod", out.ExistingNodes)
	}
	if len(out.NewNodeClaims) != 1 || len(out.NewNodeClaims[0].Pods) != 1 || out.NewNodeClaims[0].Pods[0] != real {
		t.Errorf("new NodeClaims %+v, want one with web-1 only", out.NewNodeClaims)
	}
	if len(out.PodErrors) != 0 {
		t.Errorf("pod errors %+v, want none", out.PodErrors)
	}
	want := Outcome{Existing: 1, New: 2, Failed: 1, Err: "limit reached"}
	if got := outcomes["ReplicaSet team/web"]; got == nil || *got != want {
		t.Errorf("outcome %+v, want %+v", got, want)
	}
}

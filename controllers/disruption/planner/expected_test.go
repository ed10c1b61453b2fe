package planner

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// virtualPod is a pod that exists only in the simulations (pending, never bound, no owner), marked
// by the annotation key=value, as the disruption controller adds it to the pass's pending pods.
func virtualPod(name, cpu, memory, key, value string, opts ...podOption) *corev1.Pod {
	p := pod(name, cpu, memory, append(opts, withAnnotation(key, value))...)
	p.OwnerReferences = nil
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

// expectedPod is a virtual pod standing for a pod a ReplicaSet is still to create.
func expectedPod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	return virtualPod(name, cpu, memory, podpredicates.ExpectedPodAnnotationKey, "ReplicaSet default/web", opts...)
}

// planEmptyNodes plans a pass over an empty small node e1 and either a second empty one, e2, or
// (busy) one holding a 1.5-CPU pod, with the pending pods; it returns the plan and the nodes its
// command deletes, sorted.
func planEmptyNodes(t *testing.T, busy bool, pending []*corev1.Pod) (*Plan, []string) {
	t.Helper()
	f := newFixture()
	f.pool(nodePool("default"), filterTypes()...)
	f.odNode("e1", "default", "small")
	if busy {
		f.odNode("busy", "default", "small", pod("web", "1500m", "1Gi"))
	} else {
		f.odNode("e2", "default", "small")
	}
	f.pending = pending
	pl := plan(t, newPlanner(Options{}), f.cluster())
	var deleted []string
	if pl.Command != nil {
		deleted = candidateNames(pl.Command)
	}
	return pl, deleted
}

// TestExpectedPodsRoomCountsAsUsed: the room the pods still to be created take is used, as a
// CapacityBuffer's: an empty node that would receive them is left alone with its own verdict, a
// node holding a buffer's unit too keeps Karpenter's, and a move that would take room they cannot
// get elsewhere is refused.
func TestExpectedPodsRoomCountsAsUsed(t *testing.T) {
	tests := []struct {
		name        string
		pending     []*corev1.Pod
		busy        bool
		wantDeleted []string
		// wantVerdict are parts of the verdicts of nodes left alone.
		wantVerdict map[string]string
	}{
		{name: "nothing coming: both empty nodes go", wantDeleted: []string{"e1", "e2"}},
		{name: "one pod coming keeps one empty node", pending: []*corev1.Pod{expectedPod("x0", "1500m", "1Gi")}, wantDeleted: []string{"e2"},
			wantVerdict: map[string]string{"e1": `Node "e1" has room for pods still to be created`}},
		{name: "a buffer unit with it: Karpenter's verdict", pending: []*corev1.Pod{unit("u0", "100m", "128Mi"), expectedPod("x0", "1500m", "1Gi")},
			wantDeleted: []string{"e2"}, wantVerdict: map[string]string{"e1": `Node "e1" has buffer pods`}},
		{name: "a pod coming that fits nowhere else keeps its room", busy: true,
			pending:     []*corev1.Pod{expectedPod("x0", "1500m", "1Gi", withNodeSelector(karpv1.LabelHostname, "e1"))},
			wantVerdict: map[string]string{"busy": "1 pod(s) still to be created would lose their room"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, deleted := planEmptyNodes(t, tt.busy, tt.pending)
			if !slices.Equal(deleted, tt.wantDeleted) {
				t.Errorf("command %v deletes %v, want %v", pl.Command, deleted, tt.wantDeleted)
			}
			for name, part := range tt.wantVerdict {
				if v := verdictOf(t, pl, name); !strings.Contains(v.Message, part) {
					t.Errorf("%s: verdict %s %q, want it to say %q", name, v.Reason, v.Message, part)
				}
			}
		})
	}
}

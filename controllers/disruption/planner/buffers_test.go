package planner

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// unit is a CapacityBuffer's virtual pod (pending, never bound), as the disruption controller adds
// it to the pass's pending pods.
func unit(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	return virtualPod(name, cpu, memory, autoscalingv1beta1.FakePodAnnotationKey, "true", opts...)
}

// TestBufferRoomCountsAsUsed: the room a CapacityBuffer's units take is used. An empty node that
// holds units is left alone by emptiness with Karpenter's Unconsolidatable verdict; a node whose
// pods would move into that room is not deleted for free; without units both go.
func TestBufferRoomCountsAsUsed(t *testing.T) {
	tests := []struct {
		name  string
		units []*corev1.Pod
		// busy puts a pod on a second node, which could move onto the empty one.
		busy          bool
		wantDeleted   []string
		wantBuffered  []string
		wantUntouched []string
		// wantVerdict are parts of the verdicts of nodes left alone.
		wantVerdict map[string]string
	}{
		{name: "no buffer: both empty nodes go", wantDeleted: []string{"e1", "e2"}},
		{name: "one unit keeps one empty node", units: []*corev1.Pod{unit("u0", "1500m", "1Gi")}, wantDeleted: []string{"e2"}, wantBuffered: []string{"e1"}},
		{name: "two units keep both", units: []*corev1.Pod{unit("u0", "1500m", "1Gi"), unit("u1", "1500m", "1Gi")}, wantBuffered: []string{"e1", "e2"}},
		{name: "no buffer: the busy node's pod moves to the empty node, which is deleted first", busy: true, wantDeleted: []string{"e1"}},
		{name: "a unit on the empty node keeps the busy node's pod from moving into its room", busy: true,
			units: []*corev1.Pod{unit("u0", "1500m", "1Gi")}, wantBuffered: []string{"e1"}, wantUntouched: []string{"busy"}},
		// The unit fits e1 only: moving the busy node's pod there for free would leave it no room.
		{name: "a unit that fits nowhere else keeps its room", busy: true,
			units: []*corev1.Pod{unit("u0", "1500m", "1Gi", withNodeSelector(karpv1.LabelHostname, "e1"))}, wantBuffered: []string{"e1"}, wantUntouched: []string{"busy"},
			wantVerdict: map[string]string{"busy": "CapacityBuffer unit(s) would lose their room"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, deleted := planEmptyNodes(t, tt.busy, tt.units)
			slices.Sort(tt.wantDeleted)
			if !slices.Equal(deleted, tt.wantDeleted) {
				t.Errorf("command %v deletes %v, want %v", pl.Command, deleted, tt.wantDeleted)
			}
			for _, name := range tt.wantBuffered {
				if v := verdictOf(t, pl, name); v.Reason != ReasonUnconsolidatable || v.Message != `Node "`+name+`" has buffer pods` {
					t.Errorf("%s: %s %q, want Unconsolidatable: has buffer pods", name, v.Reason, v.Message)
				}
			}
			for name, part := range tt.wantVerdict {
				if v := verdictOf(t, pl, name); !strings.Contains(v.Message, part) {
					t.Errorf("%s: verdict %s %q, want it to say %q", name, v.Reason, v.Message, part)
				}
			}
			for _, name := range tt.wantUntouched {
				if slices.Contains(deleted, name) {
					t.Errorf("%s is disrupted, want it left alone", name)
				}
			}
		})
	}
}

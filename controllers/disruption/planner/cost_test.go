package planner

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEvictionCost checks Karpenter v1.14's reference values: 1 + deletionCost/2^27 +
// priority/2^25, clamped to [-10, 10].
func TestEvictionCost(t *testing.T) {
	tests := []struct {
		name string
		opts []podOption
		want float64
	}{
		{name: "no annotation, no priority", want: 1},
		{name: "system-critical priority clamps to 10", opts: []podOption{withPriority(2_000_000_000)}, want: 10},
		{name: "priority 2^25 adds 1", opts: []podOption{withPriority(1 << 25)}, want: 2},
		{name: "priority 0", opts: []podOption{withPriority(0)}, want: 1},
		{name: "lowest priority clamps to -10", opts: []podOption{withPriority(math.MinInt32)}, want: -10},
		{name: "deletion cost -2^31 clamps to -10", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "-2147483648")}, want: -10},
		{name: "deletion cost 2^31-1 is 1+16 clamped to 10", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "2147483647")}, want: 10},
		{name: "deletion cost 2^27 adds 1", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "134217728")}, want: 2},
		{name: "deletion cost -2^27 makes it 0", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "-134217728")}, want: 0},
		{name: "deletion cost that does not parse is ignored", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "lots")}, want: 1},
		{name: "NaN deletion cost is ignored", opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "NaN")}, want: 1},
		{
			name: "both terms add",
			opts: []podOption{withAnnotation(PodDeletionCostAnnotationKey, "-268435456"), withPriority(1 << 26)},
			want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EvictionCost(pod("p", "100m", "100Mi", tt.opts...)); got != tt.want {
				t.Errorf("EvictionCost = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDisruptionCost checks the per-node cost: 1 plus the positive eviction costs, so that a node
// whose pods all cost at most 0 counts as empty.
func TestDisruptionCost(t *testing.T) {
	plain := pod("plain", "100m", "100Mi")
	critical := pod("critical", "100m", "100Mi", withPriority(2_000_000_000))
	negative := pod("negative", "100m", "100Mi", withAnnotation(PodDeletionCostAnnotationKey, "-2147483648"))
	tests := []struct {
		name string
		pods []*corev1.Pod
		want float64
	}{
		{name: "no pods", want: 1},
		{name: "one plain pod", pods: []*corev1.Pod{plain}, want: 2},
		{name: "critical pod", pods: []*corev1.Pod{critical}, want: 11},
		{name: "negative pod adds nothing and subtracts nothing", pods: []*corev1.Pod{negative, plain}, want: 2},
		{name: "only a negative pod", pods: []*corev1.Pod{negative}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DisruptionCost(tt.pods); got != tt.want {
				t.Errorf("DisruptionCost = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestIsReschedulable checks which pods need a new home.
func TestIsReschedulable(t *testing.T) {
	terminating := pod("terminating", "100m", "100Mi")
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	terminatingSTS := pod("sts-0", "100m", "100Mi", ownedBy("StatefulSet", "sts"))
	terminatingSTS.DeletionTimestamp = &metav1.Time{Time: t0}
	done := pod("done", "100m", "100Mi")
	done.Status.Phase = corev1.PodSucceeded
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", pod("web", "100m", "100Mi"), true},
		{"daemonset", pod("ds", "100m", "100Mi", ownedBy("DaemonSet", "ds")), false},
		{"mirror", pod("static", "100m", "100Mi", withAnnotation(corev1.MirrorPodAnnotationKey, "x")), false},
		{"finished", done, false},
		{"terminating", terminating, false},
		{"terminating statefulset pod", terminatingSTS, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsReschedulable(tt.pod); got != tt.want {
				t.Errorf("IsReschedulable = %v, want %v", got, tt.want)
			}
		})
	}
}

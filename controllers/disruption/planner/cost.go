package planner

import (
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// PodDeletionCostAnnotationKey is the ReplicaSet controller's pod-deletion-cost annotation, which
// eviction cost reads too.
const PodDeletionCostAnnotationKey = "controller.kubernetes.io/pod-deletion-cost"

// Eviction-cost constants of Karpenter v1.14: the deletion cost and the priority are scaled so
// that their int32 ranges span a few units, and the result is clamped.
const (
	deletionCostScale = 1 << 27
	priorityScale     = 1 << 25
	maxEvictionCost   = 10.0
	// perNodeBaseDisruptionCost is what disrupting a node costs before any of its pods.
	perNodeBaseDisruptionCost = 1.0
)

// EvictionCost is the cost of evicting pod: 1 + deletionCost/2^27 + priority/2^25, clamped to
// [-10, 10]. A pod-deletion-cost that does not parse is ignored.
func EvictionCost(pod *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := pod.Annotations[PodDeletionCostAnnotationKey]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			cost += f / deletionCostScale
		}
	}
	if pod.Spec.Priority != nil {
		cost += float64(*pod.Spec.Priority) / priorityScale
	}
	return math.Max(-maxEvictionCost, math.Min(maxEvictionCost, cost))
}

// DisruptionCost is what disrupting a node with these reschedulable pods costs: 1 for the node
// plus the positive eviction costs of its pods. A node whose cost is at most 1 counts as empty.
func DisruptionCost(reschedulable []*corev1.Pod) float64 {
	cost := perNodeBaseDisruptionCost
	for _, pod := range reschedulable {
		cost += math.Max(0, EvictionCost(pod))
	}
	return cost
}

// IsReschedulable reports whether the pod would need a new home if its node went away: an active
// pod (or a terminating StatefulSet pod) that is neither a DaemonSet pod nor a mirror pod.
func IsReschedulable(pod *corev1.Pod) bool {
	if podpredicates.IsTerminal(pod) || podpredicates.IsDaemonSetPod(pod) || podpredicates.IsMirrorPod(pod) {
		return false
	}
	if pod.DeletionTimestamp != nil {
		ref := metav1.GetControllerOf(pod)
		return ref != nil && ref.Kind == "StatefulSet"
	}
	return true
}

// isActive reports whether the pod is neither finished nor terminating.
func isActive(pod *corev1.Pod) bool {
	return !podpredicates.IsTerminal(pod) && pod.DeletionTimestamp == nil
}

// isEvictable reports whether a drain would evict the pod (so a PodDisruptionBudget matters).
func isEvictable(pod *corev1.Pod) bool {
	return isActive(pod) && !podpredicates.IsMirrorPod(pod) && !podpredicates.ToleratesDisruptedTaint(pod)
}

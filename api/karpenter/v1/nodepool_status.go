package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	// Resources is the total of the resources of the NodePool's nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of nodes of the NodePool. It backs the scale subresource.
	// +kubebuilder:default:=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// Rollout counts the NodePool's NodeClaims by where they stand in a rollout. It is Joiner's
	// addition (Karpenter #3071): a GitOps health check can wait until upToDate equals nodes.
	// +optional
	Rollout *NodePoolRollout `json:"rollout,omitempty"`
	// NodeClassObservedGeneration is the generation of the node class last seen; when the node
	// class changes, NodeRegistrationHealthy is reset.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Conditions report readiness: ValidationSucceeded and NodeClassReady make up Ready;
	// NodeRegistrationHealthy is reported separately.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolRollout counts a NodePool's NodeClaims by disruption state.
type NodePoolRollout struct {
	// UpToDate NodeClaims are neither drifted, expired nor being disrupted.
	UpToDate int64 `json:"upToDate"`
	// Drifted NodeClaims have Drifted=True and are not being disrupted yet.
	Drifted int64 `json:"drifted"`
	// Disrupting NodeClaims are being replaced or removed (DisruptionReason set, or deleting).
	Disrupting int64 `json:"disrupting"`
}

// StatusCondition returns the condition of the given type, or nil when the NodePool has none.
func (in *NodePool) StatusCondition(conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(in.Status.Conditions, conditionType)
}

// SetCondition sets the NodePool condition of the given type and reports whether anything changed.
// ObservedGeneration is stamped from the NodePool's generation, and LastTransitionTime is set to now
// only when the condition is new or its status changes, so an unchanged status keeps its
// original transition time.
func (in *NodePool) SetCondition(now time.Time, conditionType string, status metav1.ConditionStatus, reason, message string) bool {
	return setCondition(&in.Status.Conditions, in.Generation, now, conditionType, status, reason, message)
}

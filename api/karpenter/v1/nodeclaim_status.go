package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaimStatus is the observed state of a NodeClaim and its node.
type NodeClaimStatus struct {
	// NodeName is the name of the Node registered for this NodeClaim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the cloud provider's ID of the instance, as on the Node (spec.providerID).
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID identifies the machine image the node runs.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the estimated full capacity of the node.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is the estimated capacity of the node available to pods.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions report the lifecycle (Launched, Registered, Initialized, Ready) and disruption
	// state (Drifted, Consolidatable, ...) of the NodeClaim.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is the last time a pod was bound to or removed from the node (a pod going
	// terminal or terminating counts as removed). Consolidation waits consolidateAfter from it.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitzero"`
}

// StatusCondition returns the condition of the given type, or nil when the NodeClaim has none.
func (in *NodeClaim) StatusCondition(conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(in.Status.Conditions, conditionType)
}

// SetCondition sets the NodeClaim condition of the given type and reports whether anything changed.
// ObservedGeneration is stamped from the NodeClaim's generation, and LastTransitionTime is set to now
// only when the condition is new or its status changes, so an unchanged status keeps its
// original transition time.
func (in *NodeClaim) SetCondition(now time.Time, conditionType string, status metav1.ConditionStatus, reason, message string) bool {
	return setCondition(&in.Status.Conditions, in.Generation, now, conditionType, status, reason, message)
}

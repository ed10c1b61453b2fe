package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ActiveCapacityStrategy is the provisioning strategy of a buffer whose room the autoscaler keeps
// free by launching capacity for it; the only strategy Joiner (and Karpenter) acts on, and the
// default.
const ActiveCapacityStrategy = "buffer.x-k8s.io/active-capacity"

// Annotations on the virtual pods that stand for a buffer's units in scheduling simulations (never
// written to the apiserver), Karpenter's names.
const (
	// FakePodAnnotationKey is "true" on a virtual buffer pod.
	FakePodAnnotationKey = "karpenter.sh/capacity-buffer-fake-pod"
	// BufferNameAnnotationKey names the CapacityBuffer a virtual pod stands for.
	BufferNameAnnotationKey = "karpenter.sh/capacity-buffer-name"
	// BufferNamespaceAnnotationKey is the namespace of that CapacityBuffer.
	BufferNamespaceAnnotationKey = "karpenter.sh/capacity-buffer-namespace"
)

// Condition types and reasons of a CapacityBuffer's status.
const (
	// ConditionTypeReadyForProvisioning is True once the buffer's pod template and replicas are
	// resolved.
	ConditionTypeReadyForProvisioning = "ReadyForProvisioning"
	// ConditionTypeProvisioning says whether the buffer's units fit the capacity there is.
	ConditionTypeProvisioning = "Provisioning"
	// ConditionTypeLimitedByQuotas is declared by the API and not set (as in Karpenter).
	ConditionTypeLimitedByQuotas = "LimitedByQuotas"

	// ReasonResolved: ReadyForProvisioning True.
	ReasonResolved = "Resolved"
	// ReasonPodTemplateNotFound: the PodTemplate spec.podTemplateRef names does not exist.
	ReasonPodTemplateNotFound = "PodTemplateNotFound"
	// ReasonScalableRefNotFound: the object spec.scalableRef names does not exist.
	ReasonScalableRefNotFound = "ScalableRefNotFound"
	// ReasonResolutionFailed: the template or the replicas could not be resolved otherwise.
	ReasonResolutionFailed = "ResolutionFailed"

	// ReasonNotReadyForProvisioning: Provisioning False while ReadyForProvisioning is not True.
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	// ReasonBufferEmpty: Provisioning False, the buffer resolves to zero units.
	ReasonBufferEmpty = "BufferEmpty"
	// ReasonRequiresNewCapacity: Provisioning False, some units need capacity to be launched.
	ReasonRequiresNewCapacity = "RequiresNewCapacity"
	// ReasonFitsExistingCapacity: Provisioning True, every unit fits the capacity there is.
	ReasonFitsExistingCapacity = "FitsExistingCapacity"
)

// LocalObjectRef names an object in the CapacityBuffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ScalableRef names a workload in the CapacityBuffer's namespace whose pod template is the shape
// of one buffer unit and whose replicas the percentage applies to.
type ScalableRef struct {
	// APIGroup of the workload: apps for Deployment, StatefulSet and ReplicaSet; empty means the
	// core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload: Deployment, StatefulSet or ReplicaSet.
	// +kubebuilder:validation:MinLength=1
	// +required
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ResourceName names a resource, as corev1.ResourceName does.
type ResourceName string

// ResourceList maps resource names to quantities, as corev1.ResourceList does.
type ResourceList map[ResourceName]resource.Quantity

// CapacityBufferSpec is the spare capacity a team asks for: units shaped like a pod template, how
// many, and at most how much in total.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="spec.podTemplateRef needs spec.replicas or spec.limits",fieldPath=".podTemplateRef"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="spec.podTemplateRef and spec.scalableRef are mutually exclusive: set one",fieldPath=".scalableRef"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the buffer is kept: buffer.x-k8s.io/active-capacity (the
	// default) launches capacity so that the units fit. Buffers of any other strategy are left
	// alone.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names a PodTemplate in the buffer's namespace: the shape of one unit.
	// Exactly one of podTemplateRef and scalableRef is set.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names a Deployment, StatefulSet or ReplicaSet in the buffer's namespace: its pod
	// template is the shape of one unit, and percentage applies to its replicas.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is how many units to keep free. With percentage, the larger of the two counts.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the scalableRef's current replicas to keep free as units, rounded up (at least
	// one unit when both are above zero).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits cap the units' total requests per resource; with neither replicas nor percentage
	// set, as many units as fit within them are kept.
	// +optional
	Limits *ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is what the buffer resolved to.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the units are shaped like (set for spec.podTemplateRef).
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is how many units the buffer resolved to.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of the object the template was read from.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning and Provisioning.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy in effect.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBuffer keeps room for a number of pod-shaped units free in the cluster, so that new
// pods of that shape start on capacity that is already there instead of waiting for a launch.
// Joiner serves it when the CapacityBuffer feature gate is on.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"ReadyForProvisioning\")].status"
// +kubebuilder:printcolumn:name="Provisioning",type="string",JSONPath=".status.conditions[?(@.type==\"Provisioning\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the capacity asked for.
	// +required
	Spec CapacityBufferSpec `json:"spec"`
	// Status is what it resolved to.
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffer.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}

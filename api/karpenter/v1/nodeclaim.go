package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NodeClaimSpec is the desired node of a NodeClaim. The API server rejects any change to it after
// creation.
type NodeClaimSpec struct {
	// Taints are applied to the node and must be tolerated by the pods that run on it.
	// +listType=atomic
	// +optional
	Taints []Taint `json:"taints,omitempty"`

	// StartupTaints are applied to the node at startup and are expected to be removed by someone
	// else (typically a DaemonSet) before the node is initialized. Pods need not tolerate them to
	// have a node provisioned.
	// +listType=atomic
	// +optional
	StartupTaints []Taint `json:"startupTaints,omitempty"`

	// Requirements constrain the instance type, zone, capacity type and other labels of the node.
	// +kubebuilder:validation:XValidation:rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",message="requirements with operator 'In' must have a value defined"
	// +kubebuilder:validation:XValidation:rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
	// +kubebuilder:validation:XValidation:rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",message="requirements with 'minValues' must have at least that many values specified in the 'values' field"
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`

	// Resources are the resources the NodeClaim's node must provide for the pods it was created for.
	// +optional
	Resources ResourceRequirements `json:"resources,omitzero"`

	// NodeClassRef points to the provider-specific node class (for AWS an EC2NodeClass).
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`

	// TerminationGracePeriod is the longest time draining may take once deletion starts. When it is
	// reached, remaining pods are deleted even if a PodDisruptionBudget or the
	// karpenter.sh/do-not-disrupt annotation blocks them. Unset means wait forever.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`

	// ExpireAfter is how long after creation the node is forcefully replaced, or "Never".
	// +kubebuilder:default:="720h"
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// ResourceRequirements are the resources a NodeClaim's node must provide.
type ResourceRequirements struct {
	// Requests are the minimum resources the node must offer.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClassReference identifies a provider node class object by API group, kind and name.
type NodeClassReference struct {
	// Group is the API group of the node class, for AWS "karpenter.k8s.aws".
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
	// Kind is the kind of the node class, for AWS "EC2NodeClass".
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name is the name of the node class object.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
}

// GroupKind returns the API group and kind of the referenced node class.
func (r *NodeClassReference) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// NodeClaim is a request for one node: Karpenter launches an instance that satisfies its spec,
// registers the resulting Node and tracks it until termination.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter,shortName={nc,ncs}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired node; it cannot be changed after creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec NodeClaimSpec `json:"spec"`

	// Status is the observed state of the node.
	// +optional
	Status NodeClaimStatus `json:"status,omitzero"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the NodeClaims.
	Items []NodeClaim `json:"items"`
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalNodeClassSpec configures the local provider, which simulates cloud instances as
// kwok-managed Nodes, priced from the embedded catalog of real instance types.
type LocalNodeClassSpec struct {
	// Region whose instance types, zones and prices the local provider offers.
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +optional
	Region string `json:"region,omitempty"`
	// Zones limits the offered zones; empty means every zone of the region in the catalog.
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:items:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`
	// NodeRegistrationDelay is how long a simulated instance takes to register its Node.
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	NodeRegistrationDelay *metav1.Duration `json:"nodeRegistrationDelay,omitempty"`
	// Labels are added to every Node launched with this class.
	// +kubebuilder:validation:MaxProperties=50
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// LocalNodeClassStatus is the observed state of a LocalNodeClass.
type LocalNodeClassStatus struct {
	// Zones are the zones the class resolves to.
	// +optional
	Zones []string `json:"zones,omitempty"`
	// Conditions: Ready is True once the region and zones resolve in the catalog.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LocalNodeClass is the node class of the local provider, referenced from a NodePool's
// nodeClassRef with group joiner.dev and kind LocalNodeClass.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=localnodeclasses,scope=Cluster,categories={karpenter,joiner},shortName={lnc,lncs}
// +kubebuilder:printcolumn:name="Region",type="string",JSONPath=".spec.region"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type LocalNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LocalNodeClassSpec   `json:"spec,omitempty"`
	Status LocalNodeClassStatus `json:"status,omitempty"`
}

// LocalNodeClassList is a list of LocalNodeClass.
//
// +kubebuilder:object:root=true
type LocalNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalNodeClass `json:"items"`
}

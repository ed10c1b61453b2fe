// Package v1beta1 holds the CapacityBuffer kind of the autoscaling.x-k8s.io group: SIG
// Autoscaling's API for spare capacity (headroom) that an autoscaler keeps free ahead of demand,
// served by Joiner as Karpenter v1.14 serves it (feature gate CapacityBuffer). It holds types,
// markers and constants only.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of CapacityBuffer.
	GroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this package and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

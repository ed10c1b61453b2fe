// Package v1alpha1 holds Joiner's own API kinds in the joiner.dev group: the local provider's
// node class and the Rego provisioning policy. It holds types, markers and constants only.
//
// +kubebuilder:object:generate=true
// +groupName=joiner.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of Joiner's own kinds.
	GroupVersion = schema.GroupVersion{Group: "joiner.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this package and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &LocalNodeClass{}, &LocalNodeClassList{}, &ProvisioningPolicy{}, &ProvisioningPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

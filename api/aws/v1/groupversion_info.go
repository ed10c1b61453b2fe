// Package v1 holds the API types of the karpenter.k8s.aws/v1 group: the EC2NodeClass kind, its well-known
// labels, annotations and tag keys, with the schema markers that controller-gen turns into the CRD.
// It follows the Karpenter AWS provider v1.14.1 contract. It must hold no controller logic: types, markers,
// constants and small pure methods only.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the AWS provider's node class.
const Group = "karpenter.k8s.aws"

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this package and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EC2NodeClass{}, &EC2NodeClassList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
